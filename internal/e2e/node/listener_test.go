//go:build e2e

// The bed's real node: pods that run as containers (containerd, runc, a
// kubelet from the bed's Kubernetes) with images pulled from the bed's
// registry, where the agent only plays them as processes elsewhere. Only
// pods that ask for it land there (its label as nodeSelector, a toleration
// of its taint); scripts/testbed starts it with TESTBED_REAL_NODE=1.

package node

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// realNode is what scripts/testbed wrote to node.env once the node was Ready.
type realNode struct {
	name     string
	label    string // the node's label and taint key
	giteaURL string // Gitea, as pods on the node and the host both reach it
	image    string // the scaler's image (make image) in the bed's registry
	registry string
	// tunResource is the node's tun device plugin's resource,
	// seccompProfile the Localhost profile the bed installed there, and
	// runtimeSocket the node's containerd socket.
	tunResource, seccompProfile, runtimeSocket string
}

func readRealNode(b *e2e.Testbed, t *testing.T) realNode {
	t.Helper()
	env, err := e2e.ReadEnvFile(filepath.Join(b.Dir, "node.env"))
	if err != nil {
		// make test asks for the node (TESTBED_REAL_NODE=1): there a
		// missing node fails rather than passing unproven.
		if asked := os.Getenv("TESTBED_REAL_NODE"); asked != "" && asked != "0" {
			t.Fatalf("TESTBED_REAL_NODE=%s but the bed has no real node (%v)", asked, err)
		}
		t.Skipf("the bed has no real node (%v): start it with TESTBED_REAL_NODE=1 scripts/testbed up", err)
	}
	n := realNode{name: env["NODE_NAME"], label: env["NODE_LABEL"], giteaURL: env["NODE_GITEA_URL"], image: env["SCALER_IMAGE"], registry: env["REGISTRY"],
		tunResource: env["TUN_RESOURCE"], seccompProfile: env["SECCOMP_PROFILE"], runtimeSocket: env["RUNTIME_SOCKET"]}
	require.NotContains(t, []string{n.name, n.label, n.giteaURL, n.image, n.registry, n.tunResource, n.seccompProfile, n.runtimeSocket}, "", "node.env lacks a key: %v", env)
	return n
}

// listenerValues put the release's listener pods on the node with the real
// scaler image, allowed to reach Gitea at the node's address.
func (n realNode) listenerValues(values map[string]any) map[string]any {
	i := strings.LastIndex(n.image, ":")
	repo, tag := n.image[:i], n.image[i+1:]
	values["image"] = map[string]any{"repository": repo, "tag": tag, "pullPolicy": "IfNotPresent"}
	values["listenerPod"] = map[string]any{
		"nodeSelector": map[string]any{n.label: "true"},
		"tolerations":  []any{map[string]any{"key": n.label, "operator": "Exists", "effect": "NoSchedule"}},
	}
	values["allowedGiteaURLs"] = []string{n.giteaURL}
	return values
}

// containersStarted reports whether every container of the pod was started
// by the node's runtime (a containerd:// containerID), and why not.
func (n realNode) containersStarted(p *corev1.Pod) (bool, string) {
	if p.Spec.NodeName != n.name {
		return false, fmt.Sprintf("pod %s is on node %q", p.Name, p.Spec.NodeName)
	}
	if len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false, fmt.Sprintf("pod %s: %s, %d container statuses", p.Name, p.Status.Phase, len(p.Status.ContainerStatuses))
	}
	for _, c := range p.Status.ContainerStatuses {
		if !strings.HasPrefix(c.ContainerID, "containerd://") {
			return false, fmt.Sprintf("pod %s container %s: containerID %q, state %+v", p.Name, c.Name, c.ContainerID, c.State)
		}
	}
	return true, ""
}

// realNodeScene installs the chart with values into a namespace of its own
// that enforces Pod Security restricted, so the listener pod is admitted
// only as the chart renders it, and creates a group whose Gitea URL is the
// node's in another (privileged, as the default runner pod needs: a group
// whose runner pod its namespace refuses fails its pass).
func realNodeScene(b *e2e.Testbed, ctx context.Context, t *testing.T, n realNode, name string, values map[string]any) (rel e2e.HelmRelease, ns, group string, dump func() string) {
	t.Helper()
	sys := b.Namespace(ctx, t, "e2e-"+name+"-sys", map[string]string{tenancy.LabelEnforce: "restricted"})
	ns = b.Namespace(ctx, t, "e2e-"+name, nil)
	values["watchNamespaces"] = []string{ns}
	rel = b.HelmInstall(ctx, t, sys, "gro", n.listenerValues(values))
	fx := b.NewOrgScope(ctx, t, e2e.Uniq("e2e-"+name))
	group = "rg-" + name
	b.TokenSecret(ctx, t, ns, e2e.GroupSecret(group), fx.RegToken, fx.APIToken)
	spec := b.GroupSpec(fx, e2e.GroupSecret(group), 1, e2e.Uniq("e2e-"+name))
	spec.Gitea.URL = n.giteaURL
	b.CreateGroup(ctx, t, ns, group, nil, spec)
	return rel, ns, group, func() string { return b.DumpNamespaces(sys, ns) + b.Gitea.JobsLine(fx.Repo) }
}

// waitReconciled waits for a pass of the listener to reconcile the group:
// it reached the API server and Gitea from its pod.
func waitReconciled(b *e2e.Testbed, ctx context.Context, t *testing.T, ns, group string, dump func() string) {
	t.Helper()
	e2e.WaitUntil(ctx, t, e2e.StepWait, "RunnerGroup "+ns+"/"+group+" reconciled by a pass in the listener pod", dump, func(ctx context.Context) (bool, string, error) {
		rg, err := b.Group(ctx, ns, group)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, c := range rg.Status.Conditions {
			if c.Type == v1alpha1.ConditionReady && c.Reason == v1alpha1.ReasonReconciled && c.Status == metav1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, e2e.StatusLine(rg), nil
	})
}

// TestRealNodeListener runs the chart's listener on the real node with the
// image `make image` builds, in a namespace that enforces Pod Security
// restricted: the pod runs as rendered (non-root, read-only root file
// system), its passes reach the API server through the kubernetes Service
// and Gitea through the node's bridge, and in mode deployment it serves
// /healthz and /metrics on its pod IP.
func TestRealNodeListener(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	n := readRealNode(b, t)

	t.Run("deployment", func(t *testing.T) {
		e2e.ParallelSub(t)
		ctx := e2e.TestContext(t, 5*time.Minute)
		values := e2e.DeploymentValues()
		values["deployment"] = map[string]any{"liveness": map[string]any{"enabled": true, "port": 8081}}
		values["metrics"] = map[string]any{"enabled": true, "port": 9090}
		// The test scrapes from the host, which the pod sees at the bridge's
		// address (Gitea's host in the node's URL).
		gw, err := url.Parse(n.giteaURL)
		require.NoError(t, err)
		values["networkPolicy"] = map[string]any{"metricsFrom": []any{map[string]any{"ipBlock": map[string]any{"cidr": gw.Hostname() + "/32"}}}}
		rel, ns, group, dump := realNodeScene(b, ctx, t, n, "realnode-loop", values)

		var pod corev1.Pod
		e2e.WaitUntil(ctx, t, e2e.StepWait, "the listener pod running on "+n.name, dump, func(ctx context.Context) (bool, string, error) {
			pods, err := b.ListenerPods(ctx, rel, "default")
			if err != nil || len(pods) != 1 {
				return false, fmt.Sprintf("%d listener pods, %v", len(pods), err), nil
			}
			pod = pods[0]
			if ok, why := n.containersStarted(&pod); !ok {
				return false, why, nil
			}
			st := pod.Status.ContainerStatuses[0]
			return st.State.Running != nil && pod.Status.PodIP != "", fmt.Sprintf("state %+v", st.State), nil
		})
		c := pod.Spec.Containers[0]
		require.NotNil(t, c.SecurityContext, "the listener container's securityContext")
		require.NotNil(t, c.SecurityContext.ReadOnlyRootFilesystem)
		require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem, "the listener's root file system is read-only")

		waitReconciled(b, ctx, t, ns, group, dump)
		for _, get := range []struct{ url, want string }{
			{fmt.Sprintf("http://%s:8081/healthz", pod.Status.PodIP), "ok: last pass ended"},
			{fmt.Sprintf("http://%s:9090/metrics", pod.Status.PodIP), "giteascaler_passes_total"},
		} {
			e2e.WaitUntil(ctx, t, e2e.StepWait, "GET "+get.url+" answers 200 with "+get.want, dump, func(ctx context.Context) (bool, string, error) {
				code, body, err := httpGet(ctx, get.url)
				if err != nil {
					return false, err.Error(), nil
				}
				return code == http.StatusOK && strings.Contains(body, get.want), fmt.Sprintf("%d %.200s", code, body), nil
			})
		}
		// The kubelet's own liveness probe passes too: no restarts.
		p, err := b.Kube.CoreV1().Pods(rel.NS).Get(ctx, pod.Name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Zero(t, p.Status.ContainerStatuses[0].RestartCount, "restarts of the listener")
	})

	t.Run("cronjob", func(t *testing.T) {
		e2e.ParallelSub(t)
		ctx := e2e.TestContext(t, 5*time.Minute)
		rel, ns, group, dump := realNodeScene(b, ctx, t, n, "realnode-cron", e2e.BaseValues())
		e2e.WaitUntil(ctx, t, 3*time.Minute, "a CronJob pass's pod completed on "+n.name, dump, func(ctx context.Context) (bool, string, error) {
			pods, err := b.ListenerPods(ctx, rel, "default")
			if err != nil {
				return false, err.Error(), nil
			}
			why := fmt.Sprintf("%d listener pods", len(pods))
			for i := range pods {
				p := &pods[i]
				ok, w := n.containersStarted(p)
				if !ok {
					why = w
					continue
				}
				if st := p.Status.ContainerStatuses[0].State.Terminated; st != nil && st.ExitCode == 0 && p.Status.Phase == corev1.PodSucceeded {
					return true, "", nil
				}
				why = fmt.Sprintf("pod %s: %s %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses[0].State)
			}
			return false, why, nil
		})
		waitReconciled(b, ctx, t, ns, group, dump)
	})
}

// httpGet returns the status and body of a GET.
func httpGet(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
