//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

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
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 10*time.Minute)
	const selKey = "e2e.gitea.bpg.pw/cluster-wide"
	selLoop, selCron := uniq("cwl"), uniq("cwc")

	sys := b.namespace(ctx, t, "e2e-cw-sys", nil)
	nsA := b.namespace(ctx, t, "e2e-cw-a", nil)
	nsB := b.namespace(ctx, t, "e2e-cw-b", nil)
	off := b.namespace(ctx, t, "e2e-cw-off", nil)
	all := []string{nsA, nsB, off}
	dump := func() string { return b.dumpNamespaces(append([]string{sys}, all...)...) }

	values := deploymentValues() // no watchNamespaces: RBAC defaults
	values["scaler"].(map[string]any)["clusterWideReads"] = true
	values["defaultListener"] = map[string]any{"enabled": false}
	values["listeners"] = []any{map[string]any{
		"name":     "wide",
		"selector": map[string]any{"matchLabels": map[string]any{selKey: selLoop}},
	}}
	rel := b.helmInstall(ctx, t, sys, "grw", values)
	tenantRole := rel.fullname() + "-" + sys + "-tenant"
	sa := rel.fullname()
	b.enable(ctx, t, nsA, tenantRole, sys, sa)
	b.enable(ctx, t, nsB, tenantRole, sys, sa)

	fx := b.newOrgScope(ctx, t, uniq("cw"))
	// Each group offers a label of its own (and no default label), so
	// each Gitea job has one group that may serve it.
	off2 := false
	labels := map[string]string{}
	group := func(ns, name, sel string) string {
		secret := groupSecret(name)
		b.tokenSecret(ctx, t, ns, secret, fx.regToken, fx.apiToken)
		l := uniq("cw", name, ns[len(ns)-5:])
		spec := b.groupSpec(fx, secret, 3, l)
		spec.DefaultLabels = &off2
		b.createGroup(ctx, t, ns, name, map[string]string{selKey: sel}, spec)
		labels[ns+"/"+name] = l
		return l
	}
	served := func(what, name string, ids map[string][]int64) {
		t.Helper()
		for _, ns := range []string{nsA, nsB} {
			want := ids[labels[ns+"/"+name]]
			waitUntil(ctx, t, stepWait, fmt.Sprintf("%s: a runner Job for each job of %s/%s", what, ns, name), dump, func(ctx context.Context) (bool, string, error) {
				by, line := b.runnersPerJob(ctx, t, ns, name)
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
		rg, ready := b.readyOf(ctx, t, off, name)
		assert.Equal(t, "NamespaceNotEnabled", ready.Reason, "%s: %s", what, statusLine(rg))
		b.requireNoRunners(ctx, t, off, name, what+": no runner Job where the scaler is not bound")
	}

	t.Run("loop", func(t *testing.T) {
		for _, ns := range all {
			group(ns, "loop", selLoop)
		}
		ids := b.queueJobs(ctx, t, fx, "loop.yml", map[string]int{labels[nsA+"/loop"]: 2, labels[nsB+"/loop"]: 2, labels[off+"/loop"]: 1})
		served("loop", "loop", ids)
		waitUntil(ctx, t, stepWait, "the group without the binding is refused", dump, func(ctx context.Context) (bool, string, error) {
			rg, err := b.group(ctx, off, "loop")
			if err != nil {
				return false, err.Error(), nil
			}
			c := condition(rg, "Ready")
			return c != nil && c.Reason == "NamespaceNotEnabled", statusLine(rg), nil
		})
		// A few more passes: still one runner Job each, none in off.
		b.waitPasses(ctx, t, nsA, "loop", 3, dump, nil)
		for _, ns := range []string{nsA, nsB} {
			b.requireOneRunnerEach(ctx, t, ns, "loop", ids[labels[ns+"/loop"]], "loop")
		}
		notServed("loop", "loop")
		pods, err := b.listenerPods(ctx, rel, "wide")
		require.NoError(t, err)
		require.NotEmpty(t, pods)
		log := b.podLog(sys, pods[0].Name, "listener")
		assert.Contains(t, log, readingClusterWide, "the loop reads cluster-wide")
		assert.NotContains(t, log, "not reading cluster-wide")
	})

	t.Run("single passes", func(t *testing.T) {
		for _, ns := range all {
			group(ns, "cron", selCron)
		}
		ids := b.queueJobs(ctx, t, fx, "cron.yml", map[string]int{labels[nsA+"/cron"]: 2, labels[nsB+"/cron"]: 2, labels[off+"/cron"]: 1})
		// The chart's ServiceAccount, as the CronJob's pass runs (the
		// admin may impersonate it).
		asSA := b.kubeconfigAs(t, sys, sa)
		o := passOpts{namespaces: all, kubeconfig: asSA, args: []string{"--cluster-wide-reads", "--selector", selKey + "=" + selCron}}
		for round := range 2 {
			results := make([]passResult, 3)
			var wg sync.WaitGroup
			for i := range results {
				wg.Go(func() { results[i] = b.pass(ctx, t, o) })
			}
			wg.Wait()
			for i, r := range results {
				what := fmt.Sprintf("round %d pass %d", round, i)
				requireSanePass(t, r, what)
				assert.Contains(t, r.log, readingClusterWide, what)
				assert.Equal(t, map[string]string{off + "/cron": "NamespaceNotEnabled"}, passFailures(r), what)
			}
		}
		served("single passes", "cron", ids)
		for _, ns := range []string{nsA, nsB} {
			b.requireOneRunnerEach(ctx, t, ns, "cron", ids[labels[ns+"/cron"]], "racing single passes")
		}
		notServed("single passes", "cron")
		jobs, err := b.kube.BatchV1().Jobs(off).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, jobs.Items, "no Job at all in the namespace without the binding")
	})
}
