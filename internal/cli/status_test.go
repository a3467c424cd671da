package cli

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
)

func parseStatus(t *testing.T, args ...string) (*StatusCmd, error) {
	t.Helper()
	c, err := parseCLI(t, append([]string{"status"}, args...)...)
	return &c.Status, err
}

// With a listener's environment, status looks at what that listener serves.
func TestStatusReadsTheListenersSelection(t *testing.T) {
	t.Setenv("SCALER_NAMESPACES", "a, b,a")
	t.Setenv("SCALER_SELECTOR", `{"matchLabels":{"team":"infra"}}`)
	t.Setenv("SCALER_EXCLUDE_SELECTORS", "pool=gpu,tier in (x,y);team=z")
	c, err := parseStatus(t, "-o", "json")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, c.Namespace)
	assert.Equal(t, `{"matchLabels":{"team":"infra"}}`, c.Selector)
	assert.Equal(t, []string{"pool=gpu,tier in (x,y)", "team=z"}, c.ExcludeSelector)
	assert.Equal(t, "json", c.Output)
}

func TestStatusRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--selector", "a in ("}, {"--exclude-selector", "{"}, {"-o", "xml"}, {"-o", "jsonpath={.groups["}, {"-o", "custom-columns=NAME"}, {"--deleted-namespaces-mirror", "rel-registrations"}} {
		var out, errOut bytes.Buffer
		assert.Equal(t, ExitUsage, Main(append([]string{"status"}, args...), IO{Out: &out, Err: &errOut}), args)
	}
}

func rgObject(ns, name string, labels map[string]string) *unstructured.Unstructured {
	m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha1.RunnerGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeOrg, Org: "acme", MaxActiveRunners: 3},
		Status:     v1alpha1.RunnerGroupStatus{QueuedJobs: 2, ActiveRunners: 1},
	})
	return &unstructured.Unstructured{Object: m}
}

func TestStatusPrintsTheSelectedGroups(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource: "RunnerGroupList"},
		rgObject("a", "ci", map[string]string{"team": "infra"}), rgObject("a", "other", nil), rgObject("c", "ci", map[string]string{"team": "infra"}))
	c, err := parseStatus(t, "-n", "a", "--selector", "team=infra")
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	code := c.runWith(context.Background(), runnergroups.Client{Dynamic: dyn}, IO{Out: &out, Err: &errOut}, time.Now())
	assert.Equal(t, ExitOK, code, errOut.String())
	assert.Regexp(t, `(?m)^a/ci\s+org acme\s+2\s+0\s+0\s+1/3\s+0/0\s+never\s+-\s+-$`, out.String())
	assert.NotContains(t, out.String(), "a/other")
	assert.NotContains(t, out.String(), "c/ci")
}

// In the listener's pod (its SCALER_DELETED_NAMESPACES_MIRROR) or with the
// flag, status shows the state the sweep of deleted namespaces keeps on
// the mirror.
func TestStatusShowsTheSweepOfDeletedNamespaces(t *testing.T) {
	t.Setenv("SCALER_DELETED_NAMESPACES_MIRROR", "platform/rel-registrations")
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource: "RunnerGroupList"}, rgObject("a", "ci", nil))
	kube := fake.NewClientset()
	since := time.Now().Add(-time.Hour)
	require.NoError(t, ledger.Mirror{Client: kube, Namespace: "platform", Name: "rel-registrations"}.
		RecordSweep(context.Background(), ledger.Sweep{Since: since, Left: map[string]int{passreport.LeftNoToken: 2}}))
	c, err := parseStatus(t, "-n", "a")
	require.NoError(t, err)
	c.kube = kube
	var out, errOut bytes.Buffer
	assert.Equal(t, ExitOK, c.runWith(context.Background(), runnergroups.Client{Dynamic: dyn}, IO{Out: &out, Err: &errOut}, time.Now()), errOut.String())
	assert.Contains(t, out.String(), "Deleted namespaces (mirror platform/rel-registrations): 0 removed, 0 namespace(s) being deleted, 2 group(s) may have left registrations (no_token 2); reported alike since "+since.UTC().Format(time.RFC3339))
}
