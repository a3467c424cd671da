package cli

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/why"
)

func parseWhy(t *testing.T, args ...string) (*WhyCmd, error) {
	t.Helper()
	c, err := parseCLI(t, append([]string{"why"}, args...)...)
	return &c.Why, err
}

// With a listener's environment, why weighs what that listener serves,
// with its default labels.
func TestWhyReadsTheListenersEnvironment(t *testing.T) {
	t.Setenv("SCALER_NAMESPACES", "a,b")
	t.Setenv("SCALER_SELECTOR", "team=infra")
	t.Setenv("SCALER_DEFAULT_LABELS", "linux:host,ubuntu-latest")
	t.Setenv("SCALER_GITEA_TIMEOUT", "3s")
	t.Setenv("SCALER_ALLOWED_GITEA_URLS", "https://gitea.example.com")
	t.Setenv("SCALER_SERVICE_ACCOUNT", "gitea-runner:scaler")
	t.Setenv("SCALER_TENANT_CLUSTER_ROLE", "gitea-runner-tenant")
	c, err := parseWhy(t, "https://gitea.example.com/acme/app/actions/runs/12/jobs/34", "-o", "json")
	require.NoError(t, err)
	assert.Equal(t, "gitea-runner:scaler", c.ServiceAccount)
	assert.Equal(t, "gitea-runner-tenant", c.TenantClusterRole)
	assert.Equal(t, []string{"a", "b"}, c.Namespace)
	assert.Equal(t, "team=infra", c.Selector)
	assert.Equal(t, []string{"linux:host", "ubuntu-latest"}, c.DefaultLabels)
	assert.Equal(t, why.Ref{Base: "https://gitea.example.com", Owner: "acme", Repo: "app", JobID: 34}, c.ref)
	assert.Equal(t, "json", c.Output)
}

func TestWhyRefusesBadArguments(t *testing.T) {
	// A list, so each case fails for its own reason.
	t.Setenv("SCALER_ALLOWED_GITEA_URLS", "https://gitea.example.com")
	t.Setenv("SCALER_SERVICE_ACCOUNT", "gitea-runner:scaler")
	for _, args := range [][]string{
		{},
		{"build"},
		{"https://gitea.example.com/acme/app/actions/runs/12"},
		{"42", "--selector", "a in ("},
		{"42", "-o", "table"},
		{"42", "--gitea-timeout", "0s"},
		{"42", "--default-labels", "a b"},
		{"42", "--gitea-ca-file", "/nonexistent/ca.pem"},
		{"42", "--allowed-gitea-urls", "gitea.example.com"},
		{"42", "--service-account", "scaler"},
		{"42", "--service-account", "gitea-runner:"},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, ExitUsage, Main(append([]string{"why"}, args...), IO{Out: &out, Err: &errOut}), "%q", args)
	}
}

// A pass sends a group's token only from a namespace enabled for the
// scaler, which why can tell only knowing the scaler's ServiceAccount
// (issue 36).
func TestWhyNeedsTheScalersServiceAccount(t *testing.T) {
	t.Setenv("SCALER_ALLOWED_GITEA_URLS", "https://gitea.example.com")
	var out, errOut bytes.Buffer
	assert.Equal(t, ExitUsage, Main([]string{"why", "42"}, IO{Out: &out, Err: &errOut}))
	assert.Contains(t, errOut.String(), "--service-account")
	assert.Contains(t, errOut.String(), "SCALER_SERVICE_ACCOUNT")
}

func TestWhyFailsWhenNoGroupIsSelected(t *testing.T) {
	c, err := parseWhy(t, "42", "-n", "empty", "--any-gitea-url", "--service-account", scalerSA)
	require.NoError(t, err)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource: "RunnerGroupList"})
	var out, errOut bytes.Buffer
	code := c.runWith(context.Background(), why.Deps{Kube: fake.NewSimpleClientset(), Groups: runnergroups.Client{Dynamic: dyn}}, IO{Out: &out, Err: &errOut})
	assert.Equal(t, ExitFailed, code)
	assert.Contains(t, errOut.String(), "no selected RunnerGroup has a valid spec")
	assert.Empty(t, out.String())
}

type failingGitea struct{ err error }

func (f failingGitea) Snapshot(context.Context, scope.Place) (gitea.Snapshot, error) {
	return gitea.Snapshot{}, f.err
}

// Gitea's error text reaches the operator's terminal escaped.
func TestWhyEscapesGiteasErrors(t *testing.T) {
	c, err := parseWhy(t, "42", "-n", "ci", "--any-gitea-url", "--service-account", scalerSA)
	require.NoError(t, err)
	deps := whyWorld(t, "https://gitea.example.com")
	deps.Gitea = func(string, string) (gitea.Client, error) {
		return failingGitea{errors.New("HTTP 500: \x1b]0;owned\x07\x1b[2K\rverdict: Running\u009b")}, nil
	}
	var out, errOut bytes.Buffer
	assert.Equal(t, ExitFailed, c.runWith(context.Background(), deps, IO{Out: &out, Err: &errOut}))
	assert.Contains(t, errOut.String(), `HTTP 500: \x1b]0;owned\x07\x1b[2K\rverdict: Running\u009b`)
	assert.NotContains(t, errOut.String(), "\x1b")
	assert.NotContains(t, errOut.String(), "\u009b")
}
