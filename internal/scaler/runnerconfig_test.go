package scaler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/owned"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerconfig"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// TestAPassWritesTheRunnerConfigBeforeItsRunners: the group's runner pods
// read <group>-runner-config, which the pass writes (owned by the group)
// from the chart's layers and spec.runnerConfig before it creates them, and
// writes again when the group's config changes.
func TestAPassWritesTheRunnerConfigBeforeItsRunners(t *testing.T) {
	rg := newGroup("ci", 5, func(rg *v1alpha1.RunnerGroup) {
		rg.Spec.RunnerConfig = &v1alpha1.RunnerConfig{Runner: &v1alpha1.RunnerRunnerConfig{
			Envs: map[string]string{"TEAM": "web"}, Timeout: ptr.To("45m")}}
	})
	e := newEnv(t, rg)
	layers := func(_ *Deps, c *Config) {
		c.Runner.Config = runnerconfig.Layers{
			Defaults: &v1alpha1.RunnerConfig{Runner: &v1alpha1.RunnerRunnerConfig{FetchInterval: ptr.To("1s"), Envs: map[string]string{"TEAM": "platform", "HTTP_PROXY": "http://proxy"}}},
			Pinned:   &v1alpha1.RunnerConfig{Container: &v1alpha1.RunnerContainerConfig{DockerHost: ptr.To("-")}},
		}
	}
	e.pass(layers)
	assert.Empty(t, e.jobs(), "no queued job, no runner, no config written")
	_, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "ci-runner-config", metav1.GetOptions{})
	require.Error(t, err)

	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}
	e.pass(layers)
	require.Len(t, e.jobs(), 1)
	cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "ci-runner-config", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, owned.Controls(rg, cm), "controlled by the group")
	var got map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(cm.Data["config-grace-10920s.yaml"]), &got), "the key of the runner pod's grace, 3h and 120s")
	assert.Equal(t, map[string]any{
		"capacity": 1, "shutdown_timeout": "3h0m0s", "timeout": "45m", "fetch_interval": "1s",
		"envs": map[string]any{"TEAM": "web", "HTTP_PROXY": "http://proxy"},
	}, got["runner"])
	assert.Equal(t, map[string]any{"docker_host": "-"}, got["container"])

	stored := e.group("ci")
	stored.Spec.RunnerConfig.Runner.Timeout = ptr.To("2h")
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(stored)
	require.NoError(t, err)
	obj := &unstructured.Unstructured{Object: raw}
	_, err = e.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Update(context.Background(), obj, metav1.UpdateOptions{})
	require.NoError(t, err)
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest"), queued(8, "ubuntu-latest")}}
	e.pass(layers)
	cm, err = e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "ci-runner-config", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, cm.Data["config-grace-10920s.yaml"], "timeout: 2h")
}

func TestARunnerConfigMapTheGroupDoesNotOwnIsLeftAlone(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	_, err := e.kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "ci-runner-config", Namespace: ns},
		Data:       map[string]string{"config.yaml": "mine"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}

	e.pass()

	c := ready(e.group("ci"))
	assert.Equal(t, v1alpha1.ReasonRunnerConfigNotOwned, c.Reason, c.Message)
	assert.Empty(t, e.jobs(), "no runner without its config")
	assert.Empty(t, e.claims("ci"), "the claim is released for the next pass")
	cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "ci-runner-config", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "mine", cm.Data["config.yaml"])
}

// TestARunnerConfigGivesJobContainersNoMoreThanTheNamespaceAllows: what
// the config gives job containers (privilege, the host network, host
// paths, another Docker daemon, unsafe docker flags) goes only where a
// privileged runner pod would; elsewhere the group gets no runner.
func TestARunnerConfigGivesJobContainersNoMoreThanTheNamespaceAllows(t *testing.T) {
	privileged := &v1alpha1.RunnerConfig{Container: &v1alpha1.RunnerContainerConfig{Privileged: ptr.To(true), ValidVolumes: []string{"/var/run/docker.sock"}}}
	harmless := &v1alpha1.RunnerConfig{Container: &v1alpha1.RunnerContainerConfig{Options: ptr.To("--memory 2g"), ValidVolumes: []string{"data"}}}
	// A runner the platform runs without privilege passes every level, so
	// only the config decides.
	unprivileged := func(_ *Deps, c *Config) {
		c.Runner.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", SecurityContext: &corev1.SecurityContext{
			Privileged: ptr.To(false), AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}}}}}
	}
	tests := []struct {
		name     string
		labels   map[string]string
		group    *v1alpha1.RunnerConfig
		platform *v1alpha1.RunnerConfig
		reason   string
	}{
		{"privileged namespace", map[string]string{tenancy.LabelEnforce: "privileged"}, privileged, nil, v1alpha1.ReasonReconciled},
		{"baseline namespace", map[string]string{tenancy.LabelEnforce: "baseline"}, privileged, nil, v1alpha1.ReasonPodSecurityForbidsRunner},
		{"restricted namespace, harmless settings", map[string]string{tenancy.LabelEnforce: "restricted"}, harmless, nil, v1alpha1.ReasonReconciled},
		{"unlabelled namespace", nil, privileged, nil, v1alpha1.ReasonPodSecurityForbidsRunner},
		{"the platform's layer is judged the same", map[string]string{tenancy.LabelEnforce: "baseline"}, nil, privileged, v1alpha1.ReasonPodSecurityForbidsRunner},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, newGroup("ci", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.RunnerConfig = tt.group }))
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}
			e.labelNamespace(tt.labels)

			e.pass(unprivileged, func(_ *Deps, c *Config) { c.Runner.Config.Defaults = tt.platform })

			c := ready(e.group("ci"))
			assert.Equal(t, tt.reason, c.Reason, c.Message)
			if tt.reason == v1alpha1.ReasonReconciled {
				assert.Len(t, e.jobs(), 1)
				return
			}
			assert.Empty(t, e.jobs())
			assert.Contains(t, c.Message, "container.privileged: true")
			assert.Contains(t, c.Message, `container.valid_volumes "/var/run/docker.sock"`)
		})
	}
}

func TestAGroupMayNotSetWhatThePlatformPinned(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5, func(rg *v1alpha1.RunnerGroup) {
		rg.Spec.RunnerConfig = &v1alpha1.RunnerConfig{Container: &v1alpha1.RunnerContainerConfig{DockerHost: ptr.To("")}}
	}))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}
	e.pass(func(_ *Deps, c *Config) {
		c.Runner.Config.Pinned = &v1alpha1.RunnerConfig{Container: &v1alpha1.RunnerContainerConfig{DockerHost: ptr.To("-")}}
	})
	c := ready(e.group("ci"))
	assert.Equal(t, v1alpha1.ReasonInvalidRunnerConfig, c.Reason)
	assert.Contains(t, c.Message, "spec.runnerConfig.container.docker_host is pinned by the platform")
	assert.Empty(t, e.jobs())
	assert.Zero(t, e.gitea.calls, "refused before Gitea is asked")
}

// TestASteadyLoopPassNeitherBuildsNorRendersTheRunnerConfig: a loop keeps
// what each group's runner config is made of while the group's generation
// stays, so a pass that creates no runner compares the ConfigMap with it
// without building a runner Job or rendering. A change of the spec is
// made once, at the next pass, and reaches the ConfigMap.
func TestASteadyLoopPassNeitherBuildsNorRendersTheRunnerConfig(t *testing.T) {
	ctx := context.Background()
	rg := newGroup("ci", 5)
	rg.Generation = 1
	e := newEnv(t, rg)
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}
	sc, cache := watchingScaler(t, e)
	pass := func() {
		t.Helper()
		sum, err := sc.Pass(ctx)
		require.NoError(t, err)
		require.Empty(t, sum.Failed)
	}
	made := func() (builds, renders int) {
		sc.mem.configs.mu.Lock()
		defer sc.mem.configs.mu.Unlock()
		return sc.mem.configs.builds, sc.mem.configs.renders
	}
	pass()
	require.Len(t, e.jobs(), 1)
	builds, renders := made()
	assert.Equal(t, 1, builds, "the first pass finds the group's grace")
	assert.Equal(t, 1, renders, "and renders its config")
	// A steady pass is one whose watch caches hold what the last pass
	// made; before that, a pass reads a claim without its runner Job.
	require.Eventually(t, func() bool {
		v, ok := cache.Watch(ctx, ns)
		return ok && len(v.Jobs) == 1
	}, 10*time.Second, 10*time.Millisecond, "the loop's cache sees the runner Job")

	for range 3 {
		pass()
	}
	builds, renders = made()
	assert.Equal(t, 1, builds, "steady passes build no runner Job for the config")
	assert.Equal(t, 1, renders, "steady passes render nothing")

	e.editGroupSpec("ci", func(rg *v1alpha1.RunnerGroup) {
		rg.Spec.RunnerConfig = &v1alpha1.RunnerConfig{Runner: &v1alpha1.RunnerRunnerConfig{Timeout: ptr.To("2h")}}
	})
	require.Eventually(t, func() bool {
		list, _, err := sc.groups.List(ctx, ns, "")
		return err == nil && len(list) == 1 && list[0].Generation == 2
	}, 10*time.Second, 10*time.Millisecond, "the loop's cache sees generation 2")
	pass()
	pass()
	builds, renders = made()
	assert.Equal(t, 2, builds, "the new generation's grace, found once")
	assert.Equal(t, 2, renders, "its config, rendered once")
	cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(ctx, "ci-runner-config", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, cm.Data["config-grace-10920s.yaml"], "timeout: 2h", "a pass that creates no runner writes the new config")
}
