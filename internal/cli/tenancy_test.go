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
	r, err := parse(t)
	require.NoError(t, err)
	cfg, err := r.scalerConfig()
	require.NoError(t, err)
	assert.NoError(t, cfg.AllowedGiteaURLs.Check("https://gitea.example.com/sub"))
	assert.NoError(t, cfg.AllowedGiteaURLs.Check("http://127.0.0.1:3000"))
	assert.Error(t, cfg.AllowedGiteaURLs.Check("https://other.example.com"))
	assert.Equal(t, tenancy.Names{TenantClusterRole: "gro-gitea-runner-operator-gitea-runners-tenant", ServiceAccount: "gitea-runners:gro-gitea-runner-operator"}, cfg.Tenancy)
	assert.True(t, cfg.TrustUnlabelledNamespaces)
	assert.False(t, cfg.ClusterWideReads, "off unless the chart grants the reads")
}
