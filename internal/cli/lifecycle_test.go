package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scaler"
)

func TestLifecycleFlags(t *testing.T) {
	t.Setenv("SCALER_RUNNER_IDLE_TIMEOUT", "0")
	t.Setenv("SCALER_RUNNER_START_TIMEOUT", "90s")
	r, err := parse(t)
	require.NoError(t, err)
	cfg, err := r.scalerConfig()
	require.NoError(t, err)
	assert.Zero(t, cfg.RunnerIdleTimeout, "0 turns idle reaping off")
	assert.Equal(t, 90*time.Second, cfg.RunnerStartTimeout)

	_, err = parse(t, "--runner-start-timeout=-1s")
	require.ErrorContains(t, err, "--runner-start-timeout must be 0 (off) or more")
	_, err = parse(t, "--runner-idle-timeout=-1s")
	require.ErrorContains(t, err, "--runner-idle-timeout must be 0 (off) or more")
}

// The sweep of deleted namespaces: on with its mirror's namespace/name;
// the platform token needs the Gitea URL it is for, which the allowed
// Gitea URLs must allow; a token without the sweep is refused.
func TestDeletedNamespacesFlags(t *testing.T) {
	t.Setenv("SCALER_DELETED_NAMESPACES_MIRROR", "gitea-runners/gro-registrations")
	t.Setenv("SCALER_DELETED_NAMESPACES_GITEA_URL", "https://gitea.example.com")
	t.Setenv("SCALER_DELETED_NAMESPACES_TOKEN", "pl4tf0rm")
	t.Setenv("SCALER_DELETED_NAMESPACES_PER_PASS", "7")
	r, err := parse(t)
	require.NoError(t, err)
	cfg, err := r.scalerConfig()
	require.NoError(t, err)
	assert.Equal(t, &scaler.DeletedNamespaces{Namespace: "gitea-runners", ConfigMap: "gro-registrations",
		GiteaURL: "https://gitea.example.com", Token: "pl4tf0rm", MaxPerPass: 7}, cfg.DeletedNamespaces)
}

func TestDeletedNamespacesFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{name: "mirror not ns/name", args: []string{"--deleted-namespaces-mirror", "registrations"}, wantErr: "--deleted-namespaces-mirror must be namespace/name"},
		{name: "token without URL", args: []string{"--deleted-namespaces-mirror", "a/b"}, env: map[string]string{"SCALER_DELETED_NAMESPACES_TOKEN": "t"}, wantErr: "--deleted-namespaces-gitea-url"},
		{name: "URL not allowed", args: []string{"--deleted-namespaces-mirror", "a/b", "--deleted-namespaces-gitea-url", "https://other.example.com", "--allowed-gitea-urls", "https://gitea.example.com"}, wantErr: "not allowed"},
		{name: "token without sweep", env: map[string]string{"SCALER_DELETED_NAMESPACES_TOKEN": "t"}, wantErr: "need --deleted-namespaces-mirror"},
		{name: "negative bound", args: []string{"--deleted-namespaces-mirror", "a/b", "--deleted-namespaces-per-pass", "-1"}, wantErr: "--deleted-namespaces-per-pass"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := parse(t, tc.args...)
			require.ErrorContains(t, err, tc.wantErr)
			assert.NotContains(t, err.Error(), "pl4tf0rm")
		})
	}
}
