//go:build e2e

// Services on the bed's real node: kube-proxy (iptables mode) makes a
// ClusterIP Service whose endpoint is a pod on the node reachable from
// another pod there. The chart's runner cache server runs on the node and
// its listener, on the node too, reaches it through the cache Service.
//
// The bed has no NetworkPolicy engine: the kernel here lacks nftables'
// queue expression (CONFIG_NFT_QUEUE), which kube-network-policies needs
// (scripts/tools/testbed/README.md). So this proves who reaches the cache
// server, not who is kept out.

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
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
// kube-proxy's rules to the cache server's pod.
func TestRealNodeListenerReachesTheCacheServerThroughItsService(t *testing.T) {
	t.Parallel()
	b := e2e.Bed(t)
	n := readRealNode(b, t)
	ctx := e2e.TestContext(t, 8*time.Minute)
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
	rel, ns, group, dump := realNodeScene(b, ctx, t, n, "realnode-cache", values)
	name := rel.Fullname() + "-cache"

	svc, err := b.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, svc.Spec.ClusterIP)
	cache["url"] = fmt.Sprintf("http://%s:%d/", svc.Spec.ClusterIP, port)
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
	_, err = b.Kube.AppsV1().Deployments(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
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
					return true, "", nil
				}
			}
			why = fmt.Sprintf("pod %s not ready: %+v", p.Name, p.Status.ContainerStatuses)
		}
		return false, why, nil
	})

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
