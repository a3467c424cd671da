package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

func TestTenancyFlagsFromEnvironment(t *testing.T) {
	t.Setenv("SCALER_ALLOWED_GITEA_URLS", "https://gitea.example.com, http://127.0.0.1:3000")
	t.Setenv("SCALER_TENANT_CLUSTER_ROLE", "gro-gitea-runner-operator-gitea-runners-tenant")
	t.Setenv("SCALER_SERVICE_ACCOUNT", "gitea-runners:gro-gitea-runner-operator")
	t.Setenv("SCALER_TRUST_UNLABELLED_NAMESPACES", "true")
	t.Setenv("SCALER_USER_NAMESPACES_POD_SECURITY_STANDARDS", "true")
	r, err := parse(t)
	require.NoError(t, err)
	cfg, err := r.scalerConfig()
	require.NoError(t, err)
	assert.NoError(t, cfg.AllowedGiteaURLs.Check("https://gitea.example.com/sub"))
	assert.NoError(t, cfg.AllowedGiteaURLs.Check("http://127.0.0.1:3000"))
	assert.Error(t, cfg.AllowedGiteaURLs.Check("https://other.example.com"))
	assert.Equal(t, tenancy.Names{TenantClusterRole: "gro-gitea-runner-operator-gitea-runners-tenant", ServiceAccount: "gitea-runners:gro-gitea-runner-operator"}, cfg.Tenancy)
	assert.Equal(t, tenancy.Platform{TrustUnlabelled: true, UserNamespacesPodSecurityStandards: true}, cfg.PodSecurity)
	assert.False(t, cfg.ClusterWideReads, "off unless the chart grants the reads")
}

// TestUserNamespacesPodSecurityStandardsIsOffUnlessThePlatformSaysSo: the
// scaler cannot read the API server's feature gates, so the relaxation for
// user-namespaced pods comes only from the flag or its env var.
func TestUserNamespacesPodSecurityStandardsIsOffUnlessThePlatformSaysSo(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  string
		want bool
	}{
		{name: "default"},
		{name: "flag", args: []string{"--user-namespaces-pod-security-standards"}, want: true},
		{name: "env", env: "true", want: true},
		{name: "env false", env: "false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("SCALER_USER_NAMESPACES_POD_SECURITY_STANDARDS", tt.env)
			}
			r, err := parse(t, tt.args...)
			require.NoError(t, err)
			cfg, err := r.scalerConfig()
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.PodSecurity.UserNamespacesPodSecurityStandards)
			assert.False(t, cfg.PodSecurity.TrustUnlabelled, "a setting of its own")
		})
	}
}
