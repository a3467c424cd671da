//go:build e2e

// Helm: installing the chart as a platform team would, with the values
// every release here starts from.

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HelmRelease is an installed helm release.
type HelmRelease struct {
	Name, NS string
}

// Fullname is the chart's name for the release's objects.
func (r HelmRelease) Fullname() string { return r.Name + "-" + ChartName }

// BaseValues are the values every release here starts from: the scaler
// image the agent plays, the shared CRD left alone, logs the tests read, and
// a spawn TTL short enough for a test yet far above a runner's start time,
// and the bed's host label as the default runner label (bedHostLabel).
//
// The bed's Gitea is on loopback, which an empty allowedGiteaURLs refuses:
// the platform team that installs here allows it explicitly.
//
// The liveness endpoint is off: the agent runs listener pods as processes
// of the host, where every looping listener would bind the same /healthz
// port; TestLoopingListenerServesHealthz turns it on, on a free port.
func BaseValues(watch ...string) map[string]any {
	return map[string]any{
		"image":            map[string]any{"repository": scalerImage},
		"deployment":       map[string]any{"liveness": map[string]any{"enabled": false}},
		"crds":             map[string]any{"install": false},
		"watchNamespaces":  watch,
		"allowedGiteaURLs": []string{GiteaURL},
		"runnerConfig":     map[string]any{"defaults": bedRunnerConfig()},
		"scaler": map[string]any{
			"logFormat":     "text",
			"logLevel":      "debug",
			"spawnTTL":      "1m",
			"defaultLabels": []string{HostLabel},
		},
	}
}

// bedRunnerConfig is the install-wide runner config of the bed's releases
// and passes (runnerConfig.defaults, --runner-config-defaults): the runner
// reads the config the scaler renders, not the bed's own
// (.testbed/gitea-runner-config.yaml), so the bed's polling goes here.
// The runner's defaults ask every 2s and back off to 5s when idle; the bed
// asks every 500ms, up to 1s, so a test waits on its own steps rather than
// on polls. It waits up to 30s for Gitea to answer a fetch, not 5s: under
// the full suite's load Gitea 1.26 (sqlite) took over 5s to answer a
// FetchTask it had already assigned, and a runner that gave up lost the
// job, which Gitea then showed in_progress on that runner for ever.
// (The runner's own cache server, which listens on every
// interface, is off in the rendered config unless a group has a shared
// cache.)
func bedRunnerConfig() map[string]any {
	return map[string]any{"runner": map[string]any{"fetch_interval": "500ms", "fetch_interval_max": "1s", "fetch_timeout": "30s"}}
}

// DeploymentValues run the listener as a Deployment that passes every 2s.
func DeploymentValues(watch ...string) map[string]any {
	v := BaseValues(watch...)
	v["mode"] = "deployment"
	v["scaler"].(map[string]any)["interval"] = "2s"
	return v
}

func (b *Testbed) Helm(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, b.HelmBin, args...)
	cmd.Env = b.HelmEnv
	cmd.Dir = b.Root
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ValuesFile writes values to a file of the test, for helm's --values.
func ValuesFile(t *testing.T, values map[string]any) string {
	t.Helper()
	raw, err := yaml.Marshal(values)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(file, raw, 0o600))
	return file
}

// HelmInstall installs charts/gitea-runner-operator into ns with the values
// and fails the test if helm does.
func (b *Testbed) HelmInstall(ctx context.Context, t *testing.T, ns, name string, values map[string]any) HelmRelease {
	t.Helper()
	file := ValuesFile(t, values)
	if out, err := b.TryHelmInstall(ctx, t, ns, name, file); err != nil {
		raw, _ := os.ReadFile(file)
		t.Fatalf("helm install %s -n %s: %v\n%s\nvalues:\n%s", name, ns, err, out, raw)
	}
	return HelmRelease{Name: name, NS: ns}
}

// TryHelmInstall runs `helm install <name> charts/gitea-runner-operator`
// into ns with the values files, in order, and returns helm's output
// (redacted) and error. The release is uninstalled when the test ends
// (before the namespace goes), also after a failed install, which leaves
// the objects created before the failure.
func (b *Testbed) TryHelmInstall(ctx context.Context, t *testing.T, ns, name string, valueFiles ...string) (string, error) {
	t.Helper()
	args := []string{"install", name, filepath.Join(b.Root, "charts", ChartName), "--namespace", ns}
	for _, f := range valueFiles {
		args = append(args, "--values", f)
	}
	t.Cleanup(func() {
		if Keep() {
			return
		}
		ctx, cancel := CleanupContext()
		defer cancel()
		if out, err := b.Helm(ctx, "uninstall", name, "--namespace", ns); err != nil && !strings.Contains(out, "not found") {
			t.Errorf("helm uninstall %s -n %s: %v\n%s", name, ns, err, Redact(out))
		}
	})
	ictx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	out, err := b.Helm(ictx, args...)
	return Redact(out), err
}

// ListenerPods lists the pods of one listener ("default" or a name from
// values.listeners) of a release.
func (b *Testbed) ListenerPods(ctx context.Context, rel HelmRelease, listener string) ([]corev1.Pod, error) {
	list, err := b.Kube.CoreV1().Pods(rel.NS).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/instance=" + rel.Name + "," + LabelListener + "=" + listener,
	})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}
