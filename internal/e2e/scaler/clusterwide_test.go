//go:build e2e

package scaler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// readingClusterWide is what a scaler logs once it reads cluster-wide.
const readingClusterWide = "reading runner Jobs, runner pods, state ConfigMaps and registrations ledgers cluster-wide"

// TestClusterWideReads installs the chart with scaler.clusterWideReads
// (the scaler's ClusterRole then grants list and watch on Jobs, pods and
// ConfigMaps in every namespace) and enables two of three namespaces with
// the tenant RoleBinding. A looping listener (its cluster-wide watch
// caches) and then three racing single passes under the chart's
// ServiceAccount (the CronJob's, with one list of each kind) serve their
// groups in the two enabled namespaces with exactly one runner Job per
// Gitea job, and in the third, where the cluster-wide grant lets them
// read everything, create nothing: its group says NamespaceNotEnabled.
func TestClusterWideReads(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 10*time.Minute)
	const selKey = "e2e.gitea.bpg.pw/cluster-wide"
	selLoop, selCron := e2e.Uniq("cwl"), e2e.Uniq("cwc")

	sys := b.Namespace(ctx, t, "e2e-cw-sys", nil)
	nsA := b.Namespace(ctx, t, "e2e-cw-a", nil)
	nsB := b.Namespace(ctx, t, "e2e-cw-b", nil)
	off := b.Namespace(ctx, t, "e2e-cw-off", nil)
	all := []string{nsA, nsB, off}
	dump := func() string { return b.DumpNamespaces(append([]string{sys}, all...)...) }

	values := e2e.DeploymentValues() // no watchNamespaces: RBAC defaults
	values["scaler"].(map[string]any)["clusterWideReads"] = true
	values["defaultListener"] = map[string]any{"enabled": false}
	values["listeners"] = []any{map[string]any{
		"name":     "wide",
		"selector": map[string]any{"matchLabels": map[string]any{selKey: selLoop}},
	}}
	rel := b.HelmInstall(ctx, t, sys, "grw", values)
	tenantRole := rel.Fullname() + "-" + sys + "-tenant"
	sa := rel.Fullname()
	b.Enable(ctx, t, nsA, tenantRole, sys, sa)
	b.Enable(ctx, t, nsB, tenantRole, sys, sa)

	fx := b.NewOrgScope(ctx, t, e2e.Uniq("cw"))
	// Each group offers a label of its own (and no default label), so
	// each Gitea job has one group that may serve it.
	off2 := false
	labels := map[string]string{}
	group := func(ns, name, sel string) string {
		secret := e2e.GroupSecret(name)
		b.TokenSecret(ctx, t, ns, secret, fx.RegToken, fx.APIToken)
		l := e2e.Uniq("cw", name, ns[len(ns)-5:])
		spec := b.GroupSpec(fx, secret, 3, l)
		spec.DefaultLabels = &off2
		b.CreateGroup(ctx, t, ns, name, map[string]string{selKey: sel}, spec)
		labels[ns+"/"+name] = l
		return l
	}
	served := func(what, name string, ids map[string][]int64) {
		t.Helper()
		for _, ns := range []string{nsA, nsB} {
			want := ids[labels[ns+"/"+name]]
			e2e.WaitUntil(ctx, t, e2e.StepWait, fmt.Sprintf("%s: a runner Job for each job of %s/%s", what, ns, name), dump, func(ctx context.Context) (bool, string, error) {
				by, line := b.RunnersPerJob(ctx, t, ns, name)
				for _, id := range want {
					if len(by[id]) == 0 {
						return false, line, nil
					}
				}
				return true, line, nil
			})
		}
	}
	notServed := func(what, name string) {
		t.Helper()
		rg, ready := b.ReadyOf(ctx, t, off, name)
		assert.Equal(t, "NamespaceNotEnabled", ready.Reason, "%s: %s", what, e2e.StatusLine(rg))
		b.RequireNoRunners(ctx, t, off, name, what+": no runner Job where the scaler is not bound")
	}

	t.Run("loop", func(t *testing.T) {
		for _, ns := range all {
			group(ns, "loop", selLoop)
		}
		ids := b.QueueJobs(ctx, t, fx, "loop.yml", map[string]int{labels[nsA+"/loop"]: 2, labels[nsB+"/loop"]: 2, labels[off+"/loop"]: 1})
		served("loop", "loop", ids)
		e2e.WaitUntil(ctx, t, e2e.StepWait, "the group without the binding is refused", dump, func(ctx context.Context) (bool, string, error) {
			rg, err := b.Group(ctx, off, "loop")
			if err != nil {
				return false, err.Error(), nil
			}
			c := e2e.Condition(rg, "Ready")
			return c != nil && c.Reason == "NamespaceNotEnabled", e2e.StatusLine(rg), nil
		})
		// A few more passes: still one runner Job each, none in off.
		b.WaitPasses(ctx, t, nsA, "loop", 3, dump, nil)
		for _, ns := range []string{nsA, nsB} {
			b.RequireOneRunnerEach(ctx, t, ns, "loop", ids[labels[ns+"/loop"]], "loop")
		}
		notServed("loop", "loop")
		pods, err := b.ListenerPods(ctx, rel, "wide")
		require.NoError(t, err)
		require.NotEmpty(t, pods)
		log := b.PodLog(sys, pods[0].Name, "listener")
		assert.Contains(t, log, readingClusterWide, "the loop reads cluster-wide")
		assert.NotContains(t, log, "not reading cluster-wide")
	})

	t.Run("single passes", func(t *testing.T) {
		for _, ns := range all {
			group(ns, "cron", selCron)
		}
		ids := b.QueueJobs(ctx, t, fx, "cron.yml", map[string]int{labels[nsA+"/cron"]: 2, labels[nsB+"/cron"]: 2, labels[off+"/cron"]: 1})
		// The chart's ServiceAccount, as the CronJob's pass runs (the
		// admin may impersonate it).
		asSA := b.KubeconfigAs(t, sys, sa)
		o := e2e.PassOpts{Namespaces: all, Kubeconfig: asSA, Args: []string{"--cluster-wide-reads", "--selector", selKey + "=" + selCron}}
		for round := range 2 {
			results := make([]e2e.PassResult, 3)
			var wg sync.WaitGroup
			for i := range results {
				wg.Go(func() { results[i] = b.Pass(ctx, t, o) })
			}
			wg.Wait()
			for i, r := range results {
				what := fmt.Sprintf("round %d pass %d", round, i)
				e2e.RequireSanePass(t, r, what)
				assert.Contains(t, r.Log, readingClusterWide, what)
				assert.Equal(t, map[string]string{off + "/cron": "NamespaceNotEnabled"}, e2e.PassFailures(r), what)
			}
		}
		served("single passes", "cron", ids)
		for _, ns := range []string{nsA, nsB} {
			b.RequireOneRunnerEach(ctx, t, ns, "cron", ids[labels[ns+"/cron"]], "racing single passes")
		}
		notServed("single passes", "cron")
		jobs, err := b.Kube.BatchV1().Jobs(off).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, jobs.Items, "no Job at all in the namespace without the binding")
	})
}
