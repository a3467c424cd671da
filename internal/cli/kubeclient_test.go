package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClusterWideReadsFlag(t *testing.T) {
	t.Setenv("SCALER_CLUSTER_WIDE_READS", "true")
	r, err := parse(t)
	require.NoError(t, err)
	cfg, err := r.scalerConfig()
	require.NoError(t, err)
	assert.True(t, cfg.ClusterWideReads)
}

// The Kubernetes client runs at --kube-qps and --kube-burst, not at
// client-go's default 5 requests/s, which made 500 groups take minutes.
func TestKubeClientRate(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	r, err := parse(t, "--kubeconfig", kubeconfig, "--kube-qps", "75", "--kube-burst", "150")
	require.NoError(t, err)

	cfg, err := r.kubeConfig()

	require.NoError(t, err)
	assert.InDelta(t, 75, cfg.QPS, 0)
	assert.Equal(t, 150, cfg.Burst)
	assert.Equal(t, "gitea-runner-scaler/"+version(), cfg.UserAgent)
}

// The new groups a pass serves follow --kube-qps up to 50 a second: their
// first writes take about 30 s at any rate, and no more than 1,500 new
// groups are written in one pass however fast the client may send.
func TestNewGroupsPerPassFollowsTheKubeRate(t *testing.T) {
	tests := []struct {
		args []string
		want int
	}{
		{nil, 1500},
		{[]string{"--kube-qps", "1000"}, 1500},
		{[]string{"--kube-qps", "20"}, 600},
		{[]string{"--kube-qps", "0.01"}, 1},
	}
	for _, tt := range tests {
		r, err := parse(t, tt.args...)
		require.NoError(t, err)
		cfg, err := r.scalerConfig()
		require.NoError(t, err)
		assert.Equal(t, tt.want, cfg.NewGroupsPerPass, "%v", tt.args)
	}
}
