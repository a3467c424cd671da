//go:build e2e

// Services on the bed's real node: kube-proxy (iptables mode) makes a
// ClusterIP Service whose endpoint is a pod on the node reachable from
// another pod there. The chart's runner cache server runs on the node and
// its listener, on the node too, reaches it through the cache Service.
//
// kube-router's policy controller enforces the chart's NetworkPolicies for
// the node's pods (kube-network-policies cannot run on this kernel:
// scripts/tools/testbed/README.md), so the cache server's policy is proven
// both ways: its namespace's pods reach it, another namespace's do not.

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// TestRealNodeListenerReachesTheCacheServerThroughItsService installs the
// chart with runnerCache, its listener and its cache server on the real
// node. runnerCache.url names the cache Service's ClusterIP (the bed has no
// cluster DNS), so the group's Cache condition turns CacheReachable only
// when the listener's probe, with the namespace's secret, went through
// kube-proxy's rules and the cache server's NetworkPolicy (which admits
// the release's listeners) to the cache server's pod.
func TestRealNodeListenerReachesTheCacheServerThroughItsService(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	n := readRealNode(b, t)
	ctx := e2e.TestContext(t, 8*time.Minute)
	rel, ns, group, _, dump := cacheServerOnRealNode(b, ctx, t, n, "realnode-cache")

	e2e.WaitUntil(ctx, t, 3*time.Minute, "the group's Cache condition CacheReachable, probed from the listener on "+n.name, dump, func(ctx context.Context) (bool, string, error) {
		rg, err := b.Group(ctx, ns, group)
		if err != nil {
			return false, err.Error(), nil
		}
		c := meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionCache)
		if c == nil {
			return false, "no Cache condition: " + e2e.StatusLine(rg), nil
		}
		return c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonCacheReachable, c.Reason + ": " + c.Message, nil
	})
	listeners, err := b.ListenerPods(ctx, rel, "default")
	require.NoError(t, err)
	for i := range listeners {
		if listeners[i].DeletionTimestamp == nil {
			ok, why := n.containersStarted(&listeners[i])
			require.True(t, ok, why)
		}
	}
}

// TestRealNodeCacheServerAdmitsOnlyItsNamespace proves the chart's cache
// NetworkPolicy on the real node: a pod of the group's namespace connects
// to the cache server, through its Service and to its pod, while a pod of
// another namespace is refused both ways until the policy is deleted (so
// the refusal is the policy's, not the network's).
func TestRealNodeCacheServerAdmitsOnlyItsNamespace(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	n := readRealNode(b, t)
	ctx := e2e.TestContext(t, 8*time.Minute)
	_, ns, _, server, dump := cacheServerOnRealNode(b, ctx, t, n, "realnode-netpol")
	env, err := e2e.ReadEnvFile(filepath.Join(b.Dir, "node.env"))
	require.NoError(t, err)
	pause := env["PAUSE_IMAGE"]
	require.NotEmpty(t, pause, "node.env names the pause image")

	other := b.Namespace(ctx, t, "e2e-realnode-netpol-other", nil)
	inside := probePod(b, ctx, t, n, ns, pause, dump)
	outside := probePod(b, ctx, t, n, other, pause, dump)
	targets := []string{server.service, server.pod}

	for _, addr := range targets {
		e2e.WaitUntil(ctx, t, e2e.StepWait, "a pod of "+ns+" connects to the cache server at "+addr, dump, func(context.Context) (bool, string, error) {
			if err := dialFromPod(n, inside, addr); err != nil {
				return false, err.Error(), nil
			}
			return true, "", nil
		})
		// The policy is in place before the server is ready, and kube-router
		// applies it for the node's pods as they start: refused at once.
		require.Error(t, dialFromPod(n, outside, addr), "a pod of %s must not reach the cache server at %s", other, addr)
	}

	policies, err := b.Kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=runner-cache"})
	require.NoError(t, err)
	require.Len(t, policies.Items, 1, "the chart renders one cache NetworkPolicy in %s", ns)
	require.NoError(t, b.Kube.NetworkingV1().NetworkPolicies(ns).Delete(ctx, policies.Items[0].Name, metav1.DeleteOptions{}))
	for _, addr := range targets {
		e2e.WaitUntil(ctx, t, e2e.StepWait, "without the policy, a pod of "+other+" connects to the cache server at "+addr, dump, func(context.Context) (bool, string, error) {
			if err := dialFromPod(n, outside, addr); err != nil {
				return false, err.Error(), nil
			}
			return true, "", nil
		})
	}
}

// cacheServer is where a pod on the node dials the cache server.
type cacheServer struct {
	service string // the Service's ClusterIP and port
	pod     string // the server pod's IP and port
}

// cacheServerOnRealNode installs the chart with runnerCache and
// networkPolicy, its listener and its cache server on the real node, and
// waits for the server ready behind its Service.
func cacheServerOnRealNode(b *e2e.Testbed, ctx context.Context, t *testing.T, n realNode, name string) (rel e2e.HelmRelease, ns, group string, server cacheServer, dump func() string) {
	t.Helper()
	env, err := e2e.ReadEnvFile(filepath.Join(b.Dir, "node.env"))
	require.NoError(t, err)
	cacheImage := env["CACHE_SERVER_IMAGE"]
	require.NotEmpty(t, cacheImage, "node.env names the cache server's image")
	const port = 8088

	// Until it is moved to the real node, the agent plays the cache server
	// on a fake node: in a network namespace of its own, as the runner
	// cache test does, so it listens on nothing of the host's.
	fakePort := e2e.FreeLoopbackPort(t)
	cache := map[string]any{
		"enabled":        true,
		"port":           port,
		"image":          cacheImage,
		"persistence":    map[string]any{"enabled": false, "size": "1Gi"},
		"podAnnotations": map[string]any{"testbed.gitea.bpg.pw/forward": fmt.Sprintf("127.0.0.1:%d=%d", fakePort, port)},
	}
	values := e2e.DeploymentValues()
	values["runnerCache"] = cache
	values["networkPolicy"] = map[string]any{"enabled": true}
	rel, ns, group, dump = realNodeScene(b, ctx, t, n, name, values)
	fullname := rel.Fullname() + "-cache"

	svc, err := b.Kube.CoreV1().Services(ns).Get(ctx, fullname, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, svc.Spec.ClusterIP)
	server.service = net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(port))
	cache["url"] = fmt.Sprintf("http://%s/", server.service)
	values["runnerCache"] = cache
	out, err := b.Helm(ctx, "upgrade", rel.Name, "charts/"+e2e.ChartName, "--namespace", rel.NS, "--values", e2e.ValuesFile(t, n.listenerValues(values)))
	require.NoError(t, err, "helm upgrade: %s", e2e.Redact(out))

	// The chart has no placement for the cache server: the test moves it
	// to the real node, where only the command differs (the image holds
	// gitea-runner at /, not on PATH).
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"nodeSelector": map[string]any{n.label: "true"},
		"tolerations":  []any{map[string]any{"key": n.label, "operator": "Exists", "effect": "NoSchedule"}},
		"containers":   []any{map[string]any{"name": "cache-server", "command": []string{"/gitea-runner"}}},
	}}}})
	require.NoError(t, err)
	_, err = b.Kube.AppsV1().Deployments(ns).Patch(ctx, fullname, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)

	e2e.WaitUntil(ctx, t, e2e.StepWait, "the cache server ready on "+n.name+" behind its Service", dump, func(ctx context.Context) (bool, string, error) {
		pods, err := b.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=runner-cache"})
		if err != nil {
			return false, err.Error(), nil
		}
		why := fmt.Sprintf("%d cache pods", len(pods.Items))
		for i := range pods.Items {
			p := &pods.Items[i]
			ok, w := n.containersStarted(p)
			if !ok {
				why = w
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					server.pod = net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port))
					return true, "", nil
				}
			}
			why = fmt.Sprintf("pod %s not ready: %+v", p.Name, p.Status.ContainerStatuses)
		}
		return false, why, nil
	})
	return rel, ns, group, server, dump
}

// probePod starts a pause pod on the real node in ns and waits for it to
// run: the test dials from its network namespace, so what the policy sees
// is that pod's address.
func probePod(b *e2e.Testbed, ctx context.Context, t *testing.T, n realNode, ns, image string, dump func() string) *corev1.Pod {
	t.Helper()
	no := false
	p, err := b.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: &no,
			NodeSelector:                 map[string]string{n.label: "true"},
			Tolerations:                  []corev1.Toleration{{Key: n.label, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers:                   []corev1.Container{{Name: "pause", Image: image}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	e2e.WaitUntil(ctx, t, e2e.StepWait, "probe pod "+ns+"/"+p.Name+" running on "+n.name, dump, func(ctx context.Context) (bool, string, error) {
		got, err := b.Kube.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if ok, why := n.containersStarted(got); !ok {
			return false, why, nil
		}
		p = got
		return got.Status.Phase == corev1.PodRunning && got.Status.PodIP != "", string(got.Status.Phase), nil
	})
	return p
}

// dialFromPod opens a TCP connection to addr from the network namespace of
// pod p on the real node, found through its cgroup (the kubelet's cgroupfs
// tree under the node's name), and closes it.
func dialFromPod(n realNode, p *corev1.Pod, addr string) error {
	var procs []string
	for _, pattern := range []string{"kubepods/pod%s/*/cgroup.procs", "kubepods/*/pod%s/*/cgroup.procs"} {
		m, err := filepath.Glob(filepath.Join("/sys/fs/cgroup/pids", n.name, fmt.Sprintf(pattern, p.UID)))
		if err != nil {
			return err
		}
		procs = append(procs, m...)
	}
	var pid string
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err == nil && len(strings.Fields(string(b))) > 0 {
			pid = strings.Fields(string(b))[0]
			break
		}
	}
	if pid == "" {
		return fmt.Errorf("no process of pod %s/%s in its cgroup (%d cgroups)", p.Namespace, p.Name, len(procs))
	}
	done := make(chan error, 1)
	go func() {
		// The thread enters the pod's network namespace and is never
		// unlocked, so Go ends it with the goroutine instead of reusing it.
		runtime.LockOSThread()
		f, err := os.Open("/proc/" + pid + "/ns/net")
		if err != nil {
			done <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("entering the network namespace of pod %s/%s: %w", p.Namespace, p.Name, err)
			return
		}
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err == nil {
			err = c.Close()
		}
		done <- err
	}()
	return <-done
}
