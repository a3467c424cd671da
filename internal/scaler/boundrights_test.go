package scaler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/kubecache"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

const (
	tenantRole = "gro-gitea-runner-operator-gitea-runners-tenant"
	scalerUser = "system:serviceaccount:gitea-runners:gro"
)

// clusterWide makes e's API server one where the chart installed the
// tenant ClusterRole and granted the cluster-wide reads: it answers a
// SelfSubjectReview with the scaler's ServiceAccount. A namespace is
// enabled by e.bind (a RoleBinding, and the reviews agree).
func (e *env) clusterWide() {
	e.t.Helper()
	e.kube.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{
			Username: scalerUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:gitea-runners", "system:authenticated"}}}}, nil
	})
	var rules []rbacv1.PolicyRule
	for _, r := range append(tenancy.Rights, tenancy.WatchRights...) {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{r.Group}, Resources: []string{r.Resource}, Verbs: []string{r.Verb}})
	}
	require.NoError(e.t, e.kube.Tracker().Add(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: tenantRole}, Rules: rules}))
}

// withClusterWide is the scaler's setup with the flag and the chart's names.
func withClusterWide(_ *Deps, c *Config) {
	c.ClusterWideReads = true
	c.Tenancy = tenancy.Names{TenantClusterRole: tenantRole, ServiceAccount: "gitea-runners:gro"}
}

// bind enables namespace as the enable command does: a RoleBinding of the
// tenant ClusterRole to the scaler's ServiceAccount, which the reviews
// then see too.
func (e *env) bind(namespace string) {
	e.t.Helper()
	e.addBinding(namespace, "ClusterRole", tenantRole, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "gitea-runners", Name: "gro"})
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.disabled, namespace)
}

// unbind deletes that RoleBinding: the namespace is no longer enabled.
func (e *env) unbind(namespace string) {
	e.t.Helper()
	require.NoError(e.t, e.kube.RbacV1().RoleBindings(namespace).Delete(context.Background(), tenantRole, metav1.DeleteOptions{}))
	e.disable(namespace)
}

// addBinding adds a RoleBinding that does not change what the reviews say.
func (e *env) addBinding(namespace, kind, role string, subject rbacv1.Subject) {
	e.t.Helper()
	_, err := e.kube.RbacV1().RoleBindings(namespace).Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects:   []rbacv1.Subject{subject},
	}, metav1.CreateOptions{})
	require.NoError(e.t, err)
}

// tokensIn gives namespace the token Secrets of newGroup.
func (e *env) tokensIn(namespace string) {
	e.t.Helper()
	for _, s := range []string{"api", "reg"} {
		sec := secret(s, map[string]string{"api": secretToken, "reg": "reg-" + secretToken}[s])
		sec.Namespace = namespace
		require.NoError(e.t, e.kube.Tracker().Add(sec))
	}
}

func (e *env) reviewsOf(namespace string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reviews[namespace]
}

func TestClusterWideReadsEnableABoundNamespaceWithoutAReviewAndReviewTheOthers(t *testing.T) {
	const (
		otherSubject = "team-c"
		otherRole    = "team-d"
		otherGrant   = "team-e"
	)
	e := newEnv(t, newGroup("ci", 5), newGroup("ci", 5, inNamespace(otherNS)), newGroup("ci", 5, inNamespace(otherSubject)),
		newGroup("ci", 5, inNamespace(otherRole)), newGroup("ci", 5, inNamespace(otherGrant)))
	e.clusterWide()
	e.bind(ns)
	e.bind(otherNS)
	e.addBinding(otherSubject, "ClusterRole", tenantRole, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: otherSubject, Name: "gro"})
	e.addBinding(otherRole, "ClusterRole", "edit", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "gitea-runners", Name: "gro"})
	e.disable(otherSubject)
	e.disable(otherRole)
	// otherGrant is enabled some other way (a Role of its own, say): only
	// its review knows.
	e.tokensIn(otherNS)
	e.tokensIn(otherGrant)

	e.pass(withClusterWide)

	for _, n := range []string{ns, otherNS} {
		assert.Equal(t, v1alpha1.ReasonReconciled, ready(e.groupIn(n, "ci")).Reason, n)
		assert.Zero(t, e.reviewsOf(n), "%s: bound, so not reviewed", n)
	}
	for _, n := range []string{otherSubject, otherRole} {
		c := ready(e.groupIn(n, "ci"))
		assert.Equal(t, v1alpha1.ReasonNamespaceNotEnabled, c.Reason, n)
		assert.Equal(t, tenancy.Names{TenantClusterRole: tenantRole, ServiceAccount: "gitea-runners:gro"}.NotEnabledMessage(n, tenancy.Rights), c.Message, "the same message as without the flag")
		assert.Equal(t, 1, e.reviewsOf(n), "%s: reviewed as before", n)
	}
	assert.Equal(t, v1alpha1.ReasonReconciled, ready(e.groupIn(otherGrant, "ci")).Reason, "another way of granting the rights still works")
	assert.Equal(t, 1, e.reviewsOf(otherGrant))
}

// A CronJob runs one pass per process: each pass here is a new Scaler.
func TestClusterWideReadsSeeABindingAddedAndRemovedBetweenCronJobPasses(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5, inNamespace(otherNS)))
	e.clusterWide()
	e.tokensIn(otherNS)
	e.disable(otherNS)

	e.pass(withClusterWide)
	require.Equal(t, v1alpha1.ReasonNamespaceNotEnabled, ready(e.groupIn(otherNS, "ci")).Reason)

	e.bind(otherNS)
	e.pass(withClusterWide)
	assert.Equal(t, v1alpha1.ReasonReconciled, ready(e.groupIn(otherNS, "ci")).Reason, "served from the pass after the binding")

	e.unbind(otherNS)
	e.pass(withClusterWide)
	assert.Equal(t, v1alpha1.ReasonNamespaceNotEnabled, ready(e.groupIn(otherNS, "ci")).Reason, "refused from the pass after the binding is gone")
	assert.Equal(t, 2, e.reviewsOf(otherNS), "reviewed only in the passes it was not bound")
}

// In a loop the binding is read afresh every pass: no trust window, even
// with a RightsRecheck, and the namespace's watches stop.
func TestClusterWideReadsInALoopSeeARemovedBindingAtTheNextPass(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	e.clusterWide()
	e.bind(ns)
	c := &stillCache{views: map[string]kubecache.View{ns: {}}, refused: map[string]bool{}}
	sc := e.scaler(withClusterWide, func(d *Deps, cfg *Config) { d.Cache = c; cfg.RightsRecheck = 10 * time.Minute })
	for range 2 {
		_, err := sc.Pass(context.Background())
		require.NoError(t, err)
	}
	require.Equal(t, v1alpha1.ReasonReconciled, ready(e.group("ci")).Reason)
	require.Zero(t, e.reviewsOf(ns))

	e.unbind(ns)
	_, err := sc.Pass(context.Background())
	require.NoError(t, err)
	assert.Equal(t, v1alpha1.ReasonNamespaceNotEnabled, ready(e.group("ci")).Reason)
	assert.Contains(t, c.forgot, ns, "the namespace's watches stop")

	e.bind(ns)
	_, err = sc.Pass(context.Background())
	require.NoError(t, err)
	assert.Equal(t, v1alpha1.ReasonReconciled, ready(e.group("ci")).Reason)
	assert.Equal(t, 1, e.reviewsOf(ns), "one review, in the pass it was not bound")
}

// An edited tenant ClusterRole that lacks a right proves nothing: every
// namespace is reviewed, and a loop says so once.
func TestClusterWideReadsTrustNoBindingOfARoleThatLacksARight(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	e.clusterWide()
	e.bind(ns)
	cr, err := e.kube.RbacV1().ClusterRoles().Get(context.Background(), tenantRole, metav1.GetOptions{})
	require.NoError(t, err)
	cr.Rules = cr.Rules[1:] // create jobs.batch is gone
	_, err = e.kube.RbacV1().ClusterRoles().Update(context.Background(), cr, metav1.UpdateOptions{})
	require.NoError(t, err)
	e.disable(ns) // RBAC agrees: the binding no longer grants create jobs
	e.kube.ClearActions()

	sc := e.scaler(withClusterWide, asLoop)
	for range 2 {
		_, err := sc.Pass(context.Background())
		require.NoError(t, err)
	}
	assert.Equal(t, v1alpha1.ReasonNamespaceNotEnabled, ready(e.group("ci")).Reason)
	assert.Contains(t, ready(e.group("ci")).Message, "create jobs.batch")
	assert.Equal(t, 2, e.reviewsOf(ns), "reviewed every pass")
	assert.Equal(t, 1, strings.Count(e.logs.String(), "the tenant ClusterRole lacks rights"), "said once")
	assert.Contains(t, e.logs.String(), `"missing":["create jobs.batch"]`)
	for _, a := range e.kube.Actions() {
		assert.NotEqual(t, "rolebindings", a.GetResource().Resource, "its bindings are not even listed")
	}
}

// Without the grants the pass reviews each namespace and reads each
// Namespace as without the flag, never fails for it, and says so once.
func TestClusterWideReadsFallBackToReviewsWhenNotGranted(t *testing.T) {
	forbidden := func(resource string) k8stesting.ReactionFunc {
		return func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), "", fmt.Errorf("%s is not granted", resource))
		}
	}
	tests := []struct {
		name   string
		refuse func(e *env)
		warn   string
	}{
		{"no list of RoleBindings", func(e *env) { e.kube.PrependReactor("list", "rolebindings", forbidden("rolebindings")) }, "cannot read the tenant ClusterRole's RoleBindings"},
		{"no get of the ClusterRole", func(e *env) { e.kube.PrependReactor("get", "clusterroles", forbidden("clusterroles")) }, "cannot read the tenant ClusterRole's RoleBindings"},
		{"no SelfSubjectReview", func(e *env) { e.kube.PrependReactor("create", "selfsubjectreviews", forbidden("selfsubjectreviews")) }, "cannot tell who the scaler is"},
		{"no list of Namespaces", func(e *env) { e.kube.PrependReactor("list", "namespaces", forbidden("namespaces")) }, "cannot list Namespaces"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, newGroup("ci", 5), newGroup("ci", 5, inNamespace(otherNS)))
			e.clusterWide()
			e.bind(ns)
			e.disable(otherNS)
			tt.refuse(e)
			sc := e.scaler(withClusterWide, asLoop)
			for range 2 {
				sum, err := sc.Pass(context.Background())
				require.NoError(t, err)
				assert.Equal(t, []string{otherNS + "/ci"}, sum.Failed, "only the namespace that is not enabled")
			}
			assert.Equal(t, v1alpha1.ReasonReconciled, ready(e.group("ci")).Reason)
			assert.Equal(t, v1alpha1.ReasonNamespaceNotEnabled, ready(e.groupIn(otherNS, "ci")).Reason)
			assert.Equal(t, 1, strings.Count(e.logs.String(), tt.warn), "said once across passes")
			if tt.name == "no list of Namespaces" {
				assert.Zero(t, e.reviewsOf(ns), "the bindings still spare the review")
				assert.Contains(t, namespaceReads(e), "get namespaces", "each Namespace is read")
			} else {
				assert.Equal(t, 2, e.reviewsOf(ns), "reviewed each pass as without the flag")
			}
		})
	}
}

// namespaceReads are the Namespace requests e's passes sent.
func namespaceReads(e *env) []string {
	var out []string
	for _, a := range e.kube.Actions() {
		if a.GetResource().Resource == "namespaces" {
			out = append(out, a.GetVerb()+" namespaces")
		}
	}
	return out
}

// rightsRequests counts the requests a pass sends for the rights check and
// the Namespace objects, by "verb resource".
func rightsRequests(e *env) map[string]int {
	out := map[string]int{}
	for _, a := range e.kube.Actions() {
		switch r := a.GetResource().Resource; r {
		case "selfsubjectrulesreviews", "selfsubjectaccessreviews", "selfsubjectreviews", "rolebindings", "clusterroles", "namespaces":
			out[a.GetVerb()+" "+r]++
		}
	}
	return out
}

// The cost of a CronJob pass's rights check and Namespace objects: with
// the flag the same few requests for 1 or 60 namespaces; without it a
// review per namespace, and a GET of each Namespace or, from
// namespaceListFrom namespaces on, one list of them. A loop's later passes read the rights the same way,
// without asking again who the scaler is.
func TestClusterWideReadsCostTheSameRequestsPerPassForAnyNumberOfNamespaces(t *testing.T) {
	for _, n := range []int{1, 12, 60} {
		t.Run(fmt.Sprint(n, " namespaces"), func(t *testing.T) {
			var groups = newGroupsIn(n)
			for _, wide := range []bool{true, false} {
				e := newEnv(t, groups...)
				e.clusterWide()
				for _, g := range groups {
					e.bind(g.Namespace)
				}
				e.kube.ClearActions()
				if wide {
					e.pass(withClusterWide)
					assert.Equal(t, map[string]int{"create selfsubjectreviews": 1, "get clusterroles": 1, "list rolebindings": 1, "list namespaces": 1}, rightsRequests(e))

					c := &stillCache{views: map[string]kubecache.View{}, refused: map[string]bool{}}
					sc := e.scaler(withClusterWide, func(d *Deps, _ *Config) { d.Cache = c })
					_, err := sc.Pass(context.Background())
					require.NoError(t, err)
					e.kube.ClearActions()
					_, err = sc.Pass(context.Background())
					require.NoError(t, err)
					// This cache has no Namespace objects; the chart's loop
					// watches them.
					assert.Equal(t, map[string]int{"get clusterroles": 1, "list rolebindings": 1, "list namespaces": 1}, rightsRequests(e), "a loop's steady pass")
					continue
				}
				e.pass()
				want := map[string]int{"create selfsubjectrulesreviews": n, "get namespaces": n}
				if n >= namespaceListFrom {
					want = map[string]int{"create selfsubjectrulesreviews": n, "list namespaces": 1}
				}
				assert.Equal(t, want, rightsRequests(e))
			}
		})
	}
}

// newGroupsIn is one group in each of n namespaces.
func newGroupsIn(n int) []*v1alpha1.RunnerGroup {
	var out []*v1alpha1.RunnerGroup
	for i := range n {
		out = append(out, newGroup("ci", 5, inNamespace(fmt.Sprintf("team-%03d", i))))
	}
	return out
}
