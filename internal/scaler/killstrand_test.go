package scaler

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// The tests of issue 32: the ways the lifecycle killed a running job or
// stranded a queued one at the edges of a scope.

// checkingRunners is the runners API fake that also answers the
// registration token check, so a pass knows where its runners register.
type checkingRunners struct {
	*runnersGitea
	check *checkingGitea
}

func (c checkingRunners) RegistrationScope(ctx context.Context, t scope.Place, token string) (scope.Place, bool, error) {
	return c.check.RegistrationScope(ctx, t, token)
}

// repoGroupWithOrgToken is a group of repository acme/app whose
// registration token is its org's: its runners register in org acme.
func repoGroupWithOrgToken(t *testing.T, max int32) (*v1alpha1.RunnerGroup, *env, *runnersGitea, setup) {
	rg := newGroup("ci", max, func(o *v1alpha1.RunnerGroup) { o.Spec.Scope, o.Spec.Repo = v1alpha1.ScopeRepo, "app" })
	e, g, set := lifecycleEnv(t, rg)
	check := &checkingGitea{fakeGitea: e.gitea, active: map[string]string{"org acme": "reg-" + secretToken}}
	both := checkingRunners{runnersGitea: g, check: check}
	withCheck := func(d *Deps, c *Config) {
		set(d, c)
		d.Gitea = func(string, string) (gitea.Client, error) { return both, nil }
	}
	return rg, e, g, withCheck
}

var orgAcme = scope.New("https://gitea.example.com", gitea.ScopeOrg, "acme", "")

// orgScope is the runner-scope annotation of a runner registered in org
// acme on the tests' Gitea.
func orgScope() scope.Place { return orgAcme }

// 32.1: a runner registered with a containing scope's token is judged
// where it registered, never killed because the group's own scope does not
// list it.
func TestARunnerRegisteredWithAContainingScopesTokenIsJudgedWhereItRegistered(t *testing.T) {
	t.Run("a pass records on the runner Job that its runner registers in the org", func(t *testing.T) {
		_, e, _, set := repoGroupWithOrgToken(t, 3)
		e.gitea.snap.Queued = []gitea.Job{queued(1, "ubuntu-latest")}

		sum := e.pass(set)

		require.Equal(t, 1, sum.Created)
		j := e.jobs()[0]
		assert.Equal(t, "https://gitea.example.com org acme", j.Annotations[v1alpha1.AnnotationRunnerScope], "the stored form")
		at, _ := runnerjob.PlaceOfJob(&j)
		assert.Equal(t, orgScope(), at)
		assert.True(t, runnerjob.ScopeKnown(&j))
		assert.Contains(t, regCondition(e.group("ci")).Message, "org acme, which contains repo acme/app")
	})
	t.Run("running another repository's job past the start timeout: kept, and no supply for the group's queued job", func(t *testing.T) {
		rg, e, g, set := repoGroupWithOrgToken(t, 3)
		j := e.addRunnerAt(rg, orgScope(), true, "ci-aaaaa", 0, 20*time.Minute, runnerRunningSince(t0.Add(-19*time.Minute)))
		runner := runnerjob.RunnerNameOf(j)
		g.registerAt(orgAcme, runner, true)
		g.place(orgAcme).running = []gitea.Job{{ID: 77, Repo: "acme/other", RunnerName: runner}}
		e.gitea.snap.Queued = []gitea.Job{queued(1, "ubuntu-latest")}

		sum := e.pass(set)

		assert.Contains(t, jobNamesOf(e), "ci-aaaaa", "the runner at work on acme/other's job is kept")
		assert.Equal(t, 1, sum.Created, "busy elsewhere, it is no supply: the queued job gets a runner of its own")
		assert.Equal(t, []string{runner}, g.namesAt(orgAcme), "its registration is kept")
		for _, c := range g.calls {
			assert.False(t, strings.HasPrefix(c, "disable") || strings.HasPrefix(c, "delete"), "nothing disabled or deleted: %v", g.calls)
		}
	})
	t.Run("idle in the org past the idle timeout: disabled, confirmed and reaped there", func(t *testing.T) {
		rg, e, g, set := repoGroupWithOrgToken(t, 3)
		j := e.addRunnerAt(rg, orgScope(), true, "ci-aaaaa", 0, 20*time.Minute, runnerRunningSince(t0.Add(-19*time.Minute)))
		runner := runnerjob.RunnerNameOf(j)
		g.registerAt(orgAcme, runner, true)

		e.pass(set)

		assert.NotContains(t, jobNamesOf(e), "ci-aaaaa")
		assert.Empty(t, g.namesAt(orgAcme))
		assert.Subset(t, g.calls, []string{"list org acme", "disable " + runner, "confirm org acme", "delete " + runner})
	})
	t.Run("registered where its token was not known: never taken for unregistered", func(t *testing.T) {
		rg := newGroup("ci", 3, func(o *v1alpha1.RunnerGroup) { o.Spec.Scope, o.Spec.Repo = v1alpha1.ScopeRepo, "app" })
		e, g, set := lifecycleEnv(t, rg)
		// The check could not be made (the API token may not ask the
		// org): the Job names the repository, not known.
		e.addRunnerAt(rg, scope.Of(&rg.Spec), false, "ci-aaaaa", 0, 20*time.Minute, runnerRunningSince(t0.Add(-19*time.Minute)))

		e.pass(set)

		assert.Contains(t, jobNamesOf(e), "ci-aaaaa")
		assert.Zero(t, e.group("ci").Status.ReapedRunners)
		assert.NotContains(t, g.calls, "confirm", "no reap was even tried")
	})
}

// 32.3: a runner Gitea calls busy (cleaning up after a cancelled job, which
// no status filter lists) is never reaped, disabled or in a former scope.
func TestARunnerGiteaCallsBusyIsNeverReaped(t *testing.T) {
	t.Run("disabled", func(t *testing.T) {
		rg := newGroup("ci", 3)
		e, g, set := lifecycleEnv(t, rg)
		j := e.addRunner(rg, "ci-aaaaa", 1, 20*time.Minute, podRunning)
		g.register(runnerjob.RunnerNameOf(j), true)
		g.runners[0].Disabled, g.runners[0].Busy = true, true

		e.pass(set)

		assert.Contains(t, jobNamesOf(e), "ci-aaaaa")
		assert.Equal(t, []string{runnerjob.RunnerNameOf(j)}, g.names())
	})
	t.Run("in a former scope", func(t *testing.T) {
		before := newGroup("ci", 3)
		rg := newGroup("ci", 3, func(o *v1alpha1.RunnerGroup) { o.Spec.Org = "beta" })
		e, g, set := lifecycleEnv(t, rg)
		j := e.addRunner(before, "ci-aaaaa", 1, 20*time.Minute, runnerRunningSince(t0.Add(-19*time.Minute)))
		g.registerAt(orgAcme, runnerjob.RunnerNameOf(j), true)
		g.place(orgAcme).runners[0].Busy = true

		e.pass(set)

		assert.Contains(t, jobNamesOf(e), "ci-aaaaa")
		assert.Equal(t, []string{runnerjob.RunnerNameOf(j)}, g.namesAt(orgAcme))
	})
}

// 32.4: a runner left in a former place that no pass can reach holds no
// slot: with a cap of 1 the group still serves.
func TestARunnerStrandedInAFormerPlaceHoldsNoSlot(t *testing.T) {
	tests := []struct {
		name string
		// scope is where the old runner registered.
		scope scope.Place
		set   func(*Deps, *Config)
		reach func(g *runnersGitea)
	}{
		{name: "another Gitea", scope: scope.New("https://old-gitea.example.com", gitea.ScopeOrg, "acme", "")},
		{name: "the runners API off", scope: orgScope(), set: func(_ *Deps, c *Config) { c.RunnerIdleTimeout = 0 }},
		{name: "a place the token may not list", scope: orgScope(), reach: func(g *runnersGitea) { g.place(orgAcme).listErr = gitea.ErrForbidden }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := newGroup("ci", 1)
			rg := newGroup("ci", 1, func(o *v1alpha1.RunnerGroup) { o.Spec.Org = "beta" })
			e, g, set := lifecycleEnv(t, rg)
			if tt.reach != nil {
				tt.reach(g)
			}
			e.addRunnerAt(before, tt.scope, true, "ci-aaaaa", 1, 20*time.Minute, runnerRunningSince(t0.Add(-19*time.Minute)))
			e.gitea.snap.Queued = []gitea.Job{queued(2, "ubuntu-latest")}
			setups := []setup{set}
			if tt.set != nil {
				setups = append(setups, tt.set)
			}

			sum := e.pass(setups...)

			assert.Equal(t, 1, sum.Created, "the stranded runner holds no slot")
			assert.Contains(t, jobNamesOf(e), "ci-aaaaa", "and is left to end by itself")
		})
	}
	t.Run("a reachable former place keeps its runner's slot until it is reaped", func(t *testing.T) {
		before := newGroup("ci", 1)
		rg := newGroup("ci", 1, func(o *v1alpha1.RunnerGroup) { o.Spec.Org = "beta" })
		e, g, set := lifecycleEnv(t, rg)
		j := e.addRunner(before, "ci-aaaaa", 1, 20*time.Minute, runnerRunningSince(t0.Add(-19*time.Minute)))
		g.registerAt(orgAcme, runnerjob.RunnerNameOf(j), true)
		g.place(orgAcme).running = []gitea.Job{{ID: 5, RunnerName: runnerjob.RunnerNameOf(j)}}
		e.gitea.snap.Queued = []gitea.Job{queued(2, "ubuntu-latest")}

		sum := e.pass(set)

		assert.Zero(t, sum.Created, "a runner of the group still at work in its former place counts against the cap")
		assert.Contains(t, jobNamesOf(e), "ci-aaaaa")
	})
}

// 32.6: one runners listing that missed a live runner deletes nothing: the
// confirmation reads the registrations again, and a runner it lists is
// registered after all.
func TestOneListingThatMissesALiveRunnerDeletesNothing(t *testing.T) {
	rg := newGroup("ci", 3)
	e, g, set := lifecycleEnv(t, rg)
	j := e.addRunner(rg, "ci-aaaaa", 1, 20*time.Minute, runnerRunningSince(t0.Add(-19*time.Minute)))
	runner := runnerjob.RunnerNameOf(j)
	// The pass's listing (the first) misses it; the confirmation's lists it.
	g.onList = func(n int) {
		if n == 2 {
			g.register(runner, true)
		}
	}

	e.pass(set)

	assert.Contains(t, jobNamesOf(e), "ci-aaaaa", "kept: registered after all")
	assert.Equal(t, []string{"list", "confirm", "list"}, g.calls, "nothing disabled or deleted")
	assert.Zero(t, e.group("ci").Status.ReapedRunners)
}

// A runner Job a racing pass deleted first is that pass's to count and
// say: this pass records no reap of it, so one reap is one event.
func TestAReapARacingPassDidFirstIsNotCountedTwice(t *testing.T) {
	rg := newGroup("ci", 3)
	e, g, set := lifecycleEnv(t, rg)
	j := e.addRunner(rg, "ci-aaaaa", 1, 20*time.Minute, podRunning)
	g.register(runnerjob.RunnerNameOf(j), true)
	e.kube.PrependReactor("delete", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(batchv1.Resource("jobs"), "ci-aaaaa")
	})

	e.pass(set)

	assert.Zero(t, e.group("ci").Status.ReapedRunners)
	assert.NotContains(t, strings.Join(eventReasons(e), "\n"), "RunnerReaped")
	assert.NotContains(t, g.calls, "delete "+runnerjob.RunnerNameOf(j), "its registration is the other pass's to remove")
}
