package scaler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

func TestCouldServeAnyByScopeAndLabels(t *testing.T) {
	off := false
	repoGroup := newGroup("r", 1, func(rg *v1alpha1.RunnerGroup) { rg.Spec.Scope, rg.Spec.Repo = v1alpha1.ScopeRepo, "app" })
	userGroup := newGroup("u", 1, func(rg *v1alpha1.RunnerGroup) {
		rg.Spec.Scope, rg.Spec.Org, rg.Spec.User = v1alpha1.ScopeUser, "", "alice"
	})
	global := newGroup("g", 1, func(rg *v1alpha1.RunnerGroup) { rg.Spec.Scope, rg.Spec.Org = v1alpha1.ScopeGlobal, "" })
	gpuOnly := newGroup("gpu", 1, withLabels("gpu"), func(rg *v1alpha1.RunnerGroup) { rg.Spec.DefaultLabels = &off })
	tests := []struct {
		name string
		rg   *v1alpha1.RunnerGroup
		job  QueuedJob
		want bool
	}{
		{"org group, a repo of its org", newGroup("o", 1), QueuedJob{"acme/app", []string{"ubuntu-latest"}}, true},
		{"org group, names are case-insensitive", newGroup("o", 1), QueuedJob{"ACME/app", []string{"ubuntu-latest"}}, true},
		{"org group, another org", newGroup("o", 1), QueuedJob{"beta/app", []string{"ubuntu-latest"}}, false},
		{"org group, labels it does not offer", newGroup("o", 1), QueuedJob{"acme/app", []string{"gpu"}}, false},
		{"repo group, its repo", repoGroup, QueuedJob{"acme/app", []string{"ubuntu-latest"}}, true},
		{"repo group, another repo of the owner", repoGroup, QueuedJob{"acme/web", []string{"ubuntu-latest"}}, false},
		{"user group, the user's repo", userGroup, QueuedJob{"alice/tool", []string{"ubuntu-latest"}}, true},
		{"global group, any repo", global, QueuedJob{"anyone/thing", []string{"ubuntu-latest"}}, true},
		{"gpu group without defaults, a plain job", gpuOnly, QueuedJob{"acme/app", []string{"ubuntu-latest"}}, false},
		{"gpu group without defaults, a gpu job", gpuOnly, QueuedJob{"acme/app", []string{"gpu"}}, true},
	}
	sc := newEnv(t).scaler()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, sc.couldServeAny(tt.rg, []QueuedJob{tt.job}))
		})
	}
}

// countingGitea counts Snapshots by target and answers with no job.
type countingGitea struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingGitea) Snapshot(_ context.Context, t scope.Place) (gitea.Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[t.String()]++
	return gitea.Snapshot{}, nil
}

func (c *countingGitea) count(target string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[target]
}

// TestTriggerPassesAtOnceForTheGroupsThatCanServe: in a loop whose next
// pass is an hour away, a burst of deliveries makes one pass at once, over
// the groups that could serve the jobs only; the polling passes go on.
func TestTriggerPassesAtOnceForTheGroupsThatCanServe(t *testing.T) {
	e := newEnv(t, newGroup("acme", 5), newGroup("beta", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "beta" }))
	g := &countingGitea{calls: map[string]int{}}
	obs := &recordingObserver{}
	sc := e.scaler(func(d *Deps, _ *Config) {
		d.Gitea = func(string, string) (gitea.Client, error) { return g, nil }
		d.Observer = obs
	})
	startLoop(t, sc)
	waitFor(t, "the first pass", func() bool { return g.count("org acme") == 1 && g.count("org beta") == 1 })

	for range 5 {
		sc.Trigger(QueuedJob{Repo: "acme/app", Labels: []string{"ubuntu-latest"}})
	}
	waitFor(t, "a triggered pass", func() bool { return g.count("org acme") == 2 })
	time.Sleep(3 * triggerDelay)
	assert.Equal(t, 2, g.count("org acme"), "the burst made one pass")
	assert.Equal(t, 1, g.count("org beta"), "a group that cannot serve the job is not passed over")

	sc.Trigger(QueuedJob{Repo: "beta/x", Labels: []string{"ubuntu-latest"}})
	waitFor(t, "a second triggered pass", func() bool { return g.count("org beta") == 2 })
	// The observer hears of a pass after its groups were served.
	waitFor(t, "the second triggered pass observed", func() bool { return len(obs.summaries()) == 3 })
	sums := obs.summaries()
	assert.False(t, sums[0].Partial, "the poll")
	assert.True(t, sums[1].Partial, "a webhook's pass")
	assert.Len(t, sums[1].GroupStats, 1)
}

// TestTriggerWithoutALoopDoesNothing: a single pass never waits for
// deliveries, and Trigger never blocks.
func TestTriggerWithoutALoopDoesNothing(t *testing.T) {
	e := newEnv(t, newGroup("acme", 5))
	sc := e.scaler()
	for range 3 {
		sc.Trigger(QueuedJob{Repo: "acme/app", Labels: []string{"ubuntu-latest"}})
	}
	require.NoError(t, sc.Run(context.Background(), RunOptions{}))
	assert.Equal(t, 1, e.gitea.calls)
}

// Triggered passes are rate-limited: the first waits triggerDelay for the
// rest of its burst, a later one until triggerMinGap after the last
// triggered pass started; deliveries meanwhile coalesce into it.
func TestTriggeredPassesAreRateLimited(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		last time.Time
		now  time.Time
		want time.Duration
	}{
		{"no triggered pass yet", time.Time{}, t0, triggerDelay},
		{"right after one", t0, t0.Add(triggerDelay), triggerMinGap - triggerDelay},
		{"in the middle of the gap", t0, t0.Add(triggerMinGap / 2), triggerMinGap / 2},
		{"the gap is over", t0, t0.Add(triggerMinGap), triggerDelay},
		{"long after", t0, t0.Add(time.Hour), triggerDelay},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := triggers{last: tt.last}
			assert.Equal(t, tt.want, tr.delay(tt.now))
		})
	}
	assert.GreaterOrEqual(t, triggerMinGap, time.Second)
}

// The jobs held between triggered passes are bounded: repeats are held
// once, and past maxPendingTriggers the next triggered pass serves every
// group, as a poll does, instead of holding more.
func TestPendingTriggersAreBounded(t *testing.T) {
	e := newEnv(t, newGroup("acme", 5))
	sc := e.scaler()
	for range 10 {
		sc.Trigger(QueuedJob{Repo: "acme/app", Labels: []string{"ubuntu-latest"}})
	}
	jobs, all := sc.takeTriggered()
	assert.Len(t, jobs, 1, "the same job is held once")
	assert.False(t, all)

	for i := range 3 * maxPendingTriggers {
		sc.Trigger(QueuedJob{Repo: fmt.Sprintf("acme/r%d", i), Labels: []string{"ubuntu-latest"}})
		assert.LessOrEqual(t, len(sc.trig.pending), maxPendingTriggers)
	}
	jobs, all = sc.takeTriggered()
	assert.True(t, all, "past the bound every group is served")
	assert.Empty(t, jobs)
	jobs, all = sc.takeTriggered()
	assert.Empty(t, jobs)
	assert.False(t, all, "taken")
}
