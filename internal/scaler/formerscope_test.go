package scaler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// TestRunnersOfAGroupsFormerScopeAreReaped (issue 25.8): a group whose
// spec moves it to another Gitea scope leaves its runners registered
// where they were. The pass looks for them there (the runner Job's
// runner-scope annotation, the namespace's ledger for registrations whose
// Job is gone), reaps them as it reaps idle runners (disable, confirm
// with that scope's running jobs, delete), never counts them as supply
// for the new scope, and never calls them unregistered because the new
// scope does not list them.
func TestRunnersOfAGroupsFormerScopeAreReaped(t *testing.T) {
	before := newGroup("ci", 3) // org acme
	// Org beta: acme's runners take none of its jobs.
	moved := func(o *v1alpha1.RunnerGroup) { o.Spec.Org = "beta" }
	old := scope.Of(&before.Spec)
	tests := []struct {
		name string
		// setup registers the runner Job's runner (runner) and anything
		// else the row needs.
		setup       func(t *testing.T, g *runnersGitea, e *env, runner string)
		wantCreated int
		wantKept    bool
		// wantLeft are the runners left registered in the former scope.
		wantLeft   func(runner string) []string
		wantFailed bool
	}{
		{name: "idle there: disabled, confirmed idle there, its Job and registration deleted; a new runner for the new scope's job",
			setup: func(_ *testing.T, g *runnersGitea, _ *env, runner string) {
				g.registerAt(old, runner, true)
			},
			wantCreated: 1},
		{name: "runs a job there: disabled and left alone, it exits after the job",
			setup: func(_ *testing.T, g *runnersGitea, _ *env, runner string) {
				g.registerAt(old, runner, true)
				g.place(old).running = []gitea.Job{{ID: 7, RunnerName: runner}}
			},
			wantCreated: 1, wantKept: true, wantLeft: func(r string) []string { return []string{r} }},
		{name: "the former scope cannot be listed: nothing deleted, not called unregistered by the new scope",
			setup: func(_ *testing.T, g *runnersGitea, _ *env, runner string) {
				g.registerAt(old, runner, true)
				g.place(old).listErr = gitea.ErrForbidden
			},
			wantCreated: 1, wantKept: true, wantFailed: true, wantLeft: func(r string) []string { return []string{r} }},
		{name: "registered nowhere long after it started: reaped as unregistered",
			setup: func(_ *testing.T, g *runnersGitea, _ *env, _ string) {
				g.place(old)
			},
			wantCreated: 1},
		{name: "registered in the new scope (its pod restarted with the new token): judged there, and it takes the job",
			setup: func(_ *testing.T, g *runnersGitea, _ *env, runner string) {
				g.place(old)
				g.register(runner, true)
			},
			wantCreated: 0, wantKept: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := newGroup("ci", 3, moved)
			e, g, set := lifecycleEnv(t, rg)
			books := ledger.Store{Client: e.kube}
			require.NoError(t, books.Record(context.Background(), ns, runnerjob.OwnerTag(rg.UID), "ci", scope.Of(&before.Spec)))
			j := e.addRunner(before, "ci-aaaaa", 1, 20*time.Minute, runnerRunningSince(t0.Add(-19*time.Minute)))
			runner := runnerjob.RunnerNameOf(j)
			tt.setup(t, g, e, runner)
			e.gitea.snap.Queued = []gitea.Job{queued(2, "ubuntu-latest")}

			sum := e.pass(set)

			assert.Equal(t, tt.wantCreated, sum.Created)
			var left []string
			if tt.wantLeft != nil {
				left = tt.wantLeft(runner)
			}
			assert.Equal(t, left, g.namesAt(old), "runners left in the former scope")
			ready := meta.FindStatusCondition(e.group("ci").Status.Conditions, v1alpha1.ConditionReady)
			require.NotNil(t, ready)
			if tt.wantFailed {
				assert.Equal(t, v1alpha1.ReasonRunnerReapFailed, ready.Reason)
			}
			if tt.wantKept {
				assert.Contains(t, jobNamesOf(e), "ci-aaaaa")
				return
			}
			assert.NotContains(t, jobNamesOf(e), "ci-aaaaa", "reaped")
			assert.Contains(t, g.calls, "confirm "+old.String(), "after the former scope's running jobs said it runs none")
			assert.EqualValues(t, 1, e.group("ci").Status.ReapedRunners)
		})
	}
}

// TestRegistrationsLeftInAGroupsFormerScopeAreRemoved: a registration
// whose runner Job is gone, left in the group's former scope, is removed
// as an orphan there, and the ledger forgets that scope once nothing of
// the group is left in it. A runner of another group, an online one and
// one that runs a job are kept.
func TestRegistrationsLeftInAGroupsFormerScopeAreRemoved(t *testing.T) {
	before := newGroup("ci", 3)
	rg := newGroup("ci", 3, func(o *v1alpha1.RunnerGroup) { o.Spec.Scope, o.Spec.Repo = v1alpha1.ScopeRepo, "app" })
	other := newGroup("ci", 3, func(o *v1alpha1.RunnerGroup) { o.Namespace, o.UID = "elsewhere", "uid-ci-elsewhere" })
	e, g, set := lifecycleEnv(t, rg)
	books := ledger.Store{Client: e.kube}
	tag := runnerjob.OwnerTag(rg.UID)
	require.NoError(t, books.Record(context.Background(), ns, tag, "ci", scope.Of(&before.Spec)))
	old := scope.Of(&before.Spec)
	g.registerAt(old, runnerjob.RunnerName(before, "ci-gone1"), false) // removed
	g.registerAt(old, runnerjob.RunnerName(before, "ci-gone2"), true)  // online: kept
	g.registerAt(old, runnerjob.RunnerName(before, "ci-gone3"), false) // runs a job: kept
	g.registerAt(old, runnerjob.RunnerName(other, "ci-bbbbb"), false)  // another namespace's: kept
	g.place(old).running = []gitea.Job{{ID: 4, RunnerName: runnerjob.RunnerName(before, "ci-gone3")}}

	e.pass(set, func(_ *Deps, c *Config) { c.DryRun = true })
	assert.Len(t, g.namesAt(old), 4, "a dry run removes nothing")
	assert.Contains(t, e.out.String(), "would remove runner "+runnerjob.RunnerName(before, "ci-gone1"))

	e.pass(set)

	assert.Equal(t, []string{runnerjob.RunnerName(before, "ci-gone2"), runnerjob.RunnerName(before, "ci-gone3"),
		runnerjob.RunnerName(other, "ci-bbbbb")}, g.namesAt(old))
	entries, _, err := books.Load(context.Background(), ns)
	require.NoError(t, err)
	assert.Equal(t, []scope.Place{scope.Of(&rg.Spec), scope.Of(&before.Spec)}, entries[tag].Places(), "moved, the former scope kept while runners are left there")

	// The online one went offline and the job ended: both go, and the
	// former scope is forgotten.
	p := g.place(old)
	g.mu.Lock()
	p.runners[0].Online, p.running = false, nil
	g.mu.Unlock()
	e.pass(set)

	assert.Equal(t, []string{runnerjob.RunnerName(other, "ci-bbbbb")}, g.namesAt(old))
	entries, _, err = books.Load(context.Background(), ns)
	require.NoError(t, err)
	assert.Equal(t, []scope.Place{scope.Of(&rg.Spec)}, entries[tag].Places(), "nothing of the group is left in its former scope")
}

// TestAGroupWhoseURLIsSpeltAnotherWayHasNotMoved: a Gitea URL spelt
// another way (case, default port, trailing slash) is the same place; its
// runners are judged where the group is.
func TestAGroupWhoseURLIsSpeltAnotherWayHasNotMoved(t *testing.T) {
	before := newGroup("ci", 3, func(o *v1alpha1.RunnerGroup) { o.Spec.Gitea.URL = "HTTPS://Gitea.Example.com:443/" })
	rg := newGroup("ci", 3)
	e, g, set := lifecycleEnv(t, rg)
	j := e.addRunner(before, "ci-aaaaa", 1, 20*time.Minute, runnerRunningSince(t0.Add(-19*time.Minute)))
	g.register(runnerjob.RunnerNameOf(j), true)
	e.gitea.snap.Queued = []gitea.Job{queued(2, "ubuntu-latest")}

	sum := e.pass(set)

	assert.Zero(t, sum.Created, "its registered runner takes the queued job")
	assert.Contains(t, jobNamesOf(e), "ci-aaaaa")
	assert.Equal(t, scope.Of(&rg.Spec), scope.Of(&before.Spec))
}
