//go:build e2e

// The rights check of scaler.clusterWideReads on the real API server, with
// RBAC enforced by it: CronJob passes run as the chart's ServiceAccount
// with the grants the chart gives it.

package scaler

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// TestClusterWideRightsCronJobPass installs the chart with
// scaler.clusterWideReads and no watchNamespaces, enables one namespace
// with the enable command's RoleBinding and leaves another alone, and
// runs CronJob passes as the chart's ServiceAccount:
//   - the pass reads the rights cluster-wide (the chart grants what it
//     needs: no fallback warning) and serves the bound namespace;
//   - the unbound one gets NamespaceNotEnabled with the enable command,
//     as without the value;
//   - once the RoleBinding is deleted, the next pass refuses it too.
func TestClusterWideRightsCronJobPass(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 6*time.Minute)
	const selKey = "e2e.gitea.bpg.pw/cluster-wide-rights"

	sys := b.Namespace(ctx, t, "e2e-cwr-sys", nil)
	bound := b.Namespace(ctx, t, "e2e-cwr-bound", nil)
	unbound := b.Namespace(ctx, t, "e2e-cwr-unbound", nil)
	dump := func() string { return b.DumpNamespaces(sys, bound, unbound) }

	values := e2e.BaseValues() // no watchNamespaces: the tenant ClusterRole bound nowhere
	values["scaler"].(map[string]any)["clusterWideReads"] = true
	// The release's own listener serves nothing: the test runs the passes.
	values["defaultListener"] = map[string]any{"enabled": false}
	values["listeners"] = []any{map[string]any{
		"name":     "none",
		"selector": map[string]any{"matchLabels": map[string]any{selKey: e2e.Uniq("none")}},
	}}
	rel := b.HelmInstall(ctx, t, sys, "gro", values)
	tenantRole := rel.Fullname() + "-" + sys + "-tenant"
	sa := rel.Fullname()
	user := "system:serviceaccount:" + sys + ":" + sa
	b.Enable(ctx, t, bound, tenantRole, sys, sa)

	fx := b.NewOrgScope(ctx, t, e2e.Uniq("cwr"))
	for _, ns := range []string{bound, unbound} {
		secret := e2e.GroupSecret("rg")
		b.TokenSecret(ctx, t, ns, secret, fx.RegToken, fx.APIToken)
		b.CreateGroup(ctx, t, ns, "rg", nil, b.GroupSpec(fx, secret, 2, e2e.Uniq("cwr", ns)))
	}

	kubeconfig := serviceAccountKubeconfig(b, ctx, t, sys, sa)
	pass := func() e2e.PassResult {
		t.Helper()
		r := b.Pass(ctx, t, e2e.PassOpts{Namespaces: []string{bound, unbound}, Kubeconfig: kubeconfig, Args: []string{
			"--cluster-wide-reads", "--tenant-cluster-role", tenantRole, "--service-account", sys + ":" + sa}})
		e2e.RequireSanePass(t, r, "cluster-wide rights pass")
		assert.Empty(t, e2e.Lines(r.Log, "reviewing the rights in each namespace instead"), "the chart grants the reads")
		assert.Empty(t, e2e.Lines(r.Log, "cannot list Namespaces"), "the chart grants the reads")
		return r
	}
	reason := func(ns string) *metav1.Condition {
		t.Helper()
		rg, err := b.Group(ctx, ns, "rg")
		require.NoError(t, err)
		c := e2e.Condition(rg, "Ready")
		require.NotNil(t, c, "%s/rg has no Ready condition\n%s", ns, dump())
		return c
	}

	waitAllowed(b, ctx, t, user, bound, true)
	r := pass()
	read := e2e.Lines(r.Log, `msg="rights read cluster-wide"`)
	require.Len(t, read, 1, "one read of the RoleBindings in the pass\n%s", e2e.Redact(e2e.Tail(r.Log, 40)))
	assert.Equal(t, user, e2e.LogField(read[0], "user"), "the SelfSubjectReview names the ServiceAccount")
	assert.Equal(t, "1", e2e.LogField(read[0], "boundNamespaces"), "the enable command's RoleBinding, found among the cluster's")
	assert.Equal(t, "Reconciled", reason(bound).Reason, "the bound namespace is served\n%s", dump())
	c := reason(unbound)
	assert.Equal(t, "NamespaceNotEnabled", c.Reason)
	assert.Contains(t, c.Message, fmt.Sprintf("kubectl create rolebinding %s --namespace %s --clusterrole %s --serviceaccount %s:%s", tenantRole, unbound, tenantRole, sys, sa))

	require.NoError(t, b.Kube.RbacV1().RoleBindings(bound).Delete(ctx, tenantRole, metav1.DeleteOptions{}))
	waitAllowed(b, ctx, t, user, bound, false)
	r = pass()
	read = e2e.Lines(r.Log, `msg="rights read cluster-wide"`)
	require.Len(t, read, 1)
	assert.Equal(t, "0", e2e.LogField(read[0], "boundNamespaces"), "the deleted RoleBinding is not found")
	c = reason(bound)
	assert.Equal(t, "NamespaceNotEnabled", c.Reason, "refused from the pass after the RoleBinding is gone\n%s", dump())
	assert.Contains(t, c.Message, "--namespace "+bound)
}

// serviceAccountKubeconfig is a kubeconfig of the bed's API server that
// authenticates as ServiceAccount ns/name with a short-lived token.
func serviceAccountKubeconfig(b *e2e.Testbed, ctx context.Context, t *testing.T, ns, name string) string {
	t.Helper()
	tok, err := b.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	kc, err := clientcmd.LoadFromFile(b.Kubeconfig)
	require.NoError(t, err)
	cur := kc.Contexts[kc.CurrentContext]
	require.NotNil(t, cur)
	kc.AuthInfos = map[string]*clientcmdapi.AuthInfo{"sa": {Token: tok.Status.Token}}
	kc.Contexts = map[string]*clientcmdapi.Context{"sa": {Cluster: cur.Cluster, AuthInfo: "sa"}}
	kc.CurrentContext = "sa"
	file := filepath.Join(t.TempDir(), "kubeconfig-sa")
	require.NoError(t, clientcmd.WriteToFile(*kc, file))
	return file
}

// waitAllowed waits until the API server's authorizer, whose RBAC cache
// trails a RoleBinding's write a little, says whether user may create Jobs
// in ns, so a pass meets the rights the test just gave or took.
func waitAllowed(b *e2e.Testbed, ctx context.Context, t *testing.T, user, ns string, want bool) {
	t.Helper()
	e2e.WaitUntil(ctx, t, e2e.StepWait, fmt.Sprintf("%s may create jobs in %s: %v", user, ns, want), nil, func(ctx context.Context) (bool, string, error) {
		r, err := b.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: "batch", Resource: "jobs", Verb: "create"},
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, "", err
		}
		return r.Status.Allowed == want, fmt.Sprintf("allowed=%v", r.Status.Allowed), nil
	})
}
