//go:build e2e

// Tenancy on the real API server, with RBAC enforced by it: the chart
// installed without watchNamespaces, namespaces enabled (or not) by a
// RoleBinding, the allowed Gitea URLs, Pod Security, and what the scaler's
// ServiceAccount can and cannot do.

package tenancy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// TestTenancy installs the chart with its RBAC defaults (no
// watchNamespaces: the tenant ClusterRole bound nowhere) and one listener
// that serves only this test's groups, then checks, against the real API
// server and scaler pods running as the chart's ServiceAccount:
//   - a group in an enabled namespace is served;
//   - one in a namespace without the RoleBinding gets NamespaceNotEnabled
//     with the command, and nothing is written there (no Job, no state, no
//     Event);
//   - a URL outside allowedGiteaURLs gets GiteaURLNotAllowed, and no request
//     reaches that host;
//   - a namespace enforcing baseline gets PodSecurityForbidsRunner, no Job;
//   - removing a namespace's RoleBinding affects only its groups;
//   - the SubjectAccessReview table of what the ServiceAccount can do;
//   - no token in the listener's log, the events, the status or a Job.
func TestTenancy(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 8*time.Minute)
	const selKey = "e2e.gitea.bpg.pw/tenancy"
	sel := e2e.Uniq("ten")

	sys := b.Namespace(ctx, t, "e2e-ten-sys", nil)
	served := b.Namespace(ctx, t, "e2e-ten-served", nil)
	second := b.Namespace(ctx, t, "e2e-ten-second", nil)
	off := b.Namespace(ctx, t, "e2e-ten-off", nil)
	foreign := b.Namespace(ctx, t, "e2e-ten-url", nil)
	baseline := b.Namespace(ctx, t, "e2e-ten-psa", map[string]string{tenancy.LabelEnforce: "baseline"})
	all := []string{sys, served, second, off, foreign, baseline}
	dump := func() string { return b.DumpNamespaces(all...) }

	// Another host a tenant might point its group at: it must never be asked.
	var asked atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		asked.Add(1)
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(elsewhere.Close)

	values := e2e.DeploymentValues() // no watchNamespaces: RBAC defaults
	values["defaultListener"] = map[string]any{"enabled": false}
	values["listeners"] = []any{map[string]any{
		"name":     "tenancy",
		"selector": map[string]any{"matchLabels": map[string]any{selKey: sel}},
	}}
	rel := b.HelmInstall(ctx, t, sys, "gro", values)
	tenantRole := rel.Fullname() + "-" + sys + "-tenant"
	sa := rel.Fullname()
	for _, ns := range []string{served, second, foreign, baseline} {
		b.Enable(ctx, t, ns, tenantRole, sys, sa)
	}

	fx := b.NewOrgScope(ctx, t, e2e.Uniq("ten"))
	group := func(ns, name, url string) {
		secret := e2e.GroupSecret(name)
		b.TokenSecret(ctx, t, ns, secret, fx.RegToken, fx.APIToken)
		spec := b.GroupSpec(fx, secret, 2, e2e.Uniq("ten", name))
		if url != "" {
			spec.Gitea.URL = url
		}
		b.CreateGroup(ctx, t, ns, name, map[string]string{selKey: sel}, spec)
	}
	group(served, "rg-served", "")
	group(second, "rg-second", "")
	group(off, "rg-off", "")
	group(foreign, "rg-url", elsewhere.URL)
	group(baseline, "rg-psa", "")

	waitReason := func(ns, name, reason string) *metav1.Condition {
		var got *metav1.Condition
		e2e.WaitUntil(ctx, t, e2e.StepWait, fmt.Sprintf("%s/%s Ready reason %s", ns, name, reason), dump, func(ctx context.Context) (bool, string, error) {
			rg, err := b.Group(ctx, ns, name)
			if err != nil {
				return false, err.Error(), nil
			}
			got = e2e.Condition(rg, "Ready")
			return got != nil && got.Reason == reason, e2e.StatusLine(rg), nil
		})
		return got
	}
	waitReason(served, "rg-served", "Reconciled")
	waitReason(second, "rg-second", "Reconciled")
	c := waitReason(off, "rg-off", "NamespaceNotEnabled")
	assert.Contains(t, c.Message, fmt.Sprintf("kubectl create rolebinding %s --namespace %s --clusterrole %s --serviceaccount %s:%s", tenantRole, off, tenantRole, sys, sa))
	c = waitReason(foreign, "rg-url", "GiteaURLNotAllowed")
	assert.Contains(t, c.Message, "is under none of the allowed Gitea URLs")
	c = waitReason(baseline, "rg-psa", "PodSecurityForbidsRunner")
	assert.Contains(t, c.Message, `enforces Pod Security level "baseline"`)

	// A few more passes (a refused group records no lastCheckTime, so the
	// served group's tells them): still nothing done for the refused ones.
	b.WaitPasses(ctx, t, served, "rg-served", 2, dump, nil)
	assert.Zero(t, asked.Load(), "no request reached the host allowedGiteaURLs does not list")
	for _, ns := range []string{off, foreign, baseline} {
		jobs, err := b.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, jobs.Items, "no runner Job in %s", ns)
	}
	cms, err := b.Kube.CoreV1().ConfigMaps(off).List(ctx, metav1.ListOptions{LabelSelector: e2e.LabelGroup})
	require.NoError(t, err)
	assert.Empty(t, cms.Items, "no state ConfigMap where the scaler may not write")
	evs, err := b.Kube.CoreV1().Events(off).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, ev := range evs.Items {
		assert.NotEqual(t, "RunnerGroup", ev.InvolvedObject.Kind, "no Event where the scaler may not write: %s", ev.Message)
	}

	t.Run("SubjectAccessReview table", func(t *testing.T) {
		accessTable(b, ctx, t, "system:serviceaccount:"+sys+":"+sa, served, off, sys)
	})

	// A namespace that stops being enabled mid-life affects only its own
	// groups.
	require.NoError(t, b.Kube.RbacV1().RoleBindings(second).Delete(ctx, tenantRole, metav1.DeleteOptions{}))
	waitReason(second, "rg-second", "NamespaceNotEnabled")
	b.WaitPasses(ctx, t, served, "rg-served", 2, dump, nil)
	rg, err := b.Group(ctx, served, "rg-served")
	require.NoError(t, err)
	assert.Equal(t, "Reconciled", e2e.Condition(rg, "Ready").Reason, "the other namespace is still served")

	// No token anywhere: the listener's log, the events, the statuses,
	// the runner Jobs.
	var seen strings.Builder
	pods, err := b.ListenerPods(ctx, rel, "tenancy")
	require.NoError(t, err)
	require.NotEmpty(t, pods)
	for _, p := range pods {
		seen.WriteString(b.PodLog(sys, p.Name, "listener"))
	}
	for _, ns := range all {
		evs, err := b.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, ev := range evs.Items {
			seen.WriteString(ev.Message + "\n")
		}
		jobs, err := b.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, j := range jobs.Items {
			fmt.Fprintf(&seen, "%+v\n", j.Spec)
			assert.Equal(t, false, *j.Spec.Template.Spec.AutomountServiceAccountToken, "runner pods mount no ServiceAccount token")
		}
		list, err := b.Groups(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, g := range list.Items {
			fmt.Fprintf(&seen, "%v\n", g.Object["status"])
		}
	}
	require.NotEmpty(t, seen.String())
	for _, tok := range []string{fx.APIToken, fx.RegToken} {
		assert.NotContains(t, seen.String(), tok, "a token in a log, event, status or Job")
	}
}

// accessTable asks the API server, with SubjectAccessReviews, what user may
// do: every right of tenancy.Rights in the enabled namespace and none in
// the others; the few cluster-wide reads; nothing else in the table.
func accessTable(b *e2e.Testbed, ctx context.Context, t *testing.T, user, enabled, notEnabled, release string) {
	type row struct {
		ns, group, resource, sub, verb string
		want                           bool
	}
	var rows []row
	for _, r := range append(tenancy.Rights, tenancy.WatchRights...) {
		rows = append(rows,
			row{ns: enabled, group: r.Group, resource: r.Resource, verb: r.Verb, want: true},
			row{ns: notEnabled, group: r.Group, resource: r.Resource, verb: r.Verb},
			row{ns: "kube-system", group: r.Group, resource: r.Resource, verb: r.Verb},
			// In the release namespace the scaler creates the ConfigMap of
			// its kept registration checks (registration-checks-role.yaml);
			// a create cannot be limited to a name, and it reads or changes
			// no other ConfigMap there.
			row{ns: release, group: r.Group, resource: r.Resource, verb: r.Verb, want: r.Resource == "configmaps" && r.Verb == "create"})
	}
	rows = append(rows,
		row{group: "gitea.bpg.pw", resource: "runnergroups", verb: "list", want: true},
		row{group: "gitea.bpg.pw", resource: "runnergroups", verb: "watch", want: true},
		row{resource: "namespaces", verb: "list", want: true},
		row{resource: "namespaces", verb: "watch", want: true},
		row{group: "gitea.bpg.pw", resource: "runnergroups", sub: "status", verb: "patch", want: true},
		row{resource: "namespaces", verb: "get", want: true},
		row{group: "authorization.k8s.io", resource: "selfsubjectrulesreviews", verb: "create", want: true},
		// cannot
		row{ns: enabled, resource: "secrets", verb: "watch"},
		row{group: "gitea.bpg.pw", resource: "runnergroups", verb: "create"},
		row{ns: enabled, group: "gitea.bpg.pw", resource: "runnergroups", verb: "update"},
		row{resource: "namespaces", verb: "update"},
		row{resource: "secrets", verb: "list"},
		row{ns: enabled, resource: "secrets", verb: "list"},
		row{ns: enabled, resource: "secrets", verb: "delete"},
		row{ns: enabled, resource: "pods", verb: "create"},
		row{ns: enabled, resource: "pods", verb: "get"},
		row{ns: enabled, resource: "pods", sub: "exec", verb: "create"},
		row{ns: release, resource: "pods", verb: "create"},
		row{ns: "kube-system", resource: "pods", verb: "create"},
		row{ns: enabled, resource: "configmaps", verb: "delete"},
		row{ns: enabled, group: "batch", resource: "jobs", verb: "update"},
		row{ns: enabled, group: "rbac.authorization.k8s.io", resource: "rolebindings", verb: "create"},
		row{group: "batch", resource: "jobs", verb: "create"},
	)
	for _, r := range rows {
		name := fmt.Sprintf("%s %s/%s.%s in %q", r.verb, r.resource, r.sub, r.group, r.ns)
		sar, err := b.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + strings.Split(user, ":")[2], "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: r.ns, Group: r.group, Resource: r.resource, Subresource: r.sub, Verb: r.verb,
				},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err, name)
		assert.Equal(t, r.want, sar.Status.Allowed, "%s: allowed=%v (%s)", name, sar.Status.Allowed, sar.Status.Reason)
		t.Logf("%-5v %s", sar.Status.Allowed, name)
	}
}
