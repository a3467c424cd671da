package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The chart mounts runnerTemplate as a file and names it and the pinned
// fields in the environment; the scaler reads both into its runner
// options.
func TestRunnerTemplateFlags(t *testing.T) {
	t.Setenv("SCALER_RUNNER_TEMPLATE", writeFile(t, `
metadata:
  labels:
    tier: ci
spec:
  runtimeClassName: sysbox-runc
  imagePullSecrets:
  - name: mirror
  containers:
  - name: runner
    image: mirror.example.com/act_runner:0.2.13-dind-rootless
`))
	t.Setenv("SCALER_RUNNER_TEMPLATE_PINNED", "spec.runtimeClassName,runner.image")
	r, err := parse(t)
	require.NoError(t, err)
	cfg, err := r.scalerConfig()
	require.NoError(t, err)
	require.NotNil(t, cfg.Runner.Template)
	assert.Equal(t, "sysbox-runc", *cfg.Runner.Template.Spec.RuntimeClassName)
	assert.Equal(t, "ci", cfg.Runner.Template.Labels["tier"])
	assert.Equal(t, "mirror.example.com/act_runner:0.2.13-dind-rootless", cfg.Runner.Template.Spec.Containers[0].Image)
	assert.Equal(t, []string{"spec.runtimeClassName", "runner.image"}, []string(cfg.Runner.Pinned))
}

// The chart passes runnerConfig.defaults and runnerConfig.pinned as JSON in
// the environment; the scaler reads both into its runner options.
func TestRunnerConfigFlags(t *testing.T) {
	t.Setenv("SCALER_RUNNER_CONFIG_DEFAULTS", `{"runner":{"fetch_interval":"500ms","envs":{"HTTP_PROXY":"http://proxy"}}}`)
	t.Setenv("SCALER_RUNNER_CONFIG_PINNED", "container:\n  docker_host: '-'\n")
	r, err := parse(t)
	require.NoError(t, err)
	cfg, err := r.scalerConfig()
	require.NoError(t, err)
	require.NotNil(t, cfg.Runner.Config.Defaults)
	assert.Equal(t, "500ms", *cfg.Runner.Config.Defaults.Runner.FetchInterval)
	assert.Equal(t, map[string]string{"HTTP_PROXY": "http://proxy"}, cfg.Runner.Config.Defaults.Runner.Envs)
	require.NotNil(t, cfg.Runner.Config.Pinned)
	assert.Equal(t, "-", *cfg.Runner.Config.Pinned.Container.DockerHost)
}
