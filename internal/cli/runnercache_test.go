package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunnerCacheFlags: the chart's runnerCache reaches the runner
// options; a URL without a trailing slash gets one, since the runner hands
// it to jobs as ACTIONS_CACHE_URL, to which the cache client appends
// "_apis/...".
func TestRunnerCacheFlags(t *testing.T) {
	t.Setenv("SCALER_RUNNER_CACHE_URL", "http://gitea-runner-cache.{namespace}.svc:8088")
	t.Setenv("SCALER_RUNNER_CONFIG_IMAGE", "ghcr.io/x/gitea-runner-scaler:1")
	r, err := parse(t)
	require.NoError(t, err)
	cfg, err := r.scalerConfig()
	require.NoError(t, err)
	assert.Equal(t, "http://gitea-runner-cache.{namespace}.svc:8088/", cfg.Runner.Cache.URL)
	assert.Equal(t, "gitea-runner-cache", cfg.Runner.Cache.SecretName)
	assert.Equal(t, "ghcr.io/x/gitea-runner-scaler:1", cfg.Runner.Cache.Image)
}

// TestRenderRunnerConfig is the runner pod's init container: the rendered
// ConfigMap plus the secret from its env, written where CONFIG_FILE points;
// the secret is never printed.
func TestRenderRunnerConfig(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.yaml")
	out := filepath.Join(dir, "out", "config.yaml")
	require.NoError(t, os.Mkdir(filepath.Dir(out), 0o755))
	require.NoError(t, os.WriteFile(in, []byte("runner:\n  capacity: 1\ncache:\n  enabled: true\n  external_server: http://c:8088/\n"), 0o644))
	t.Setenv("GITEA_RUNNER_CONFIG_TEMPLATE", in)
	t.Setenv("GITEA_RUNNER_CONFIG_OUT", out)

	t.Run("with the secret", func(t *testing.T) {
		t.Setenv("GITEA_RUNNER_CACHE_SECRET", "hunter2")
		var stdout, stderr bytes.Buffer
		require.Equal(t, ExitOK, Main([]string{"render-runner-config"}, IO{Out: &stdout, Err: &stderr}), stderr.String())
		got, err := os.ReadFile(out)
		require.NoError(t, err)
		assert.Contains(t, string(got), "external_secret: hunter2")
		assert.Contains(t, string(got), "external_server: http://c:8088/")
		assert.NotContains(t, stdout.String()+stderr.String(), "hunter2")
		assert.Contains(t, stderr.String(), "shared cache on")
	})
	t.Run("without it", func(t *testing.T) {
		t.Setenv("GITEA_RUNNER_CACHE_SECRET", "")
		var stdout, stderr bytes.Buffer
		require.Equal(t, ExitOK, Main([]string{"render-runner-config"}, IO{Out: &stdout, Err: &stderr}), stderr.String())
		got, err := os.ReadFile(out)
		require.NoError(t, err)
		assert.Contains(t, string(got), "enabled: false")
		assert.NotContains(t, string(got), "external_server")
		assert.Contains(t, stderr.String(), "shared cache off")
	})
	t.Run("a template that is not there", func(t *testing.T) {
		t.Setenv("GITEA_RUNNER_CONFIG_TEMPLATE", filepath.Join(dir, "missing.yaml"))
		var stdout, stderr bytes.Buffer
		assert.Equal(t, ExitFailed, Main([]string{"render-runner-config"}, IO{Out: &stdout, Err: &stderr}))
		assert.Contains(t, stderr.String(), "missing.yaml")
	})
}
