package scaler

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
)

func TestSummarySaysWhenQueuedJobsWereLeftToIdleRunners(t *testing.T) {
	tests := []struct {
		name   string
		groups []passreport.GroupStats
		want   bool
	}{
		{name: "no group", want: false},
		{name: "a queued job left to an idle runner", groups: []passreport.GroupStats{{Queued: 1, Idle: 1}}, want: true},
		{name: "more queued jobs than runners created, an idle runner", groups: []passreport.GroupStats{{Queued: 3, Created: 2, Idle: 1}}, want: true},
		{name: "every queued job got a new runner", groups: []passreport.GroupStats{{Queued: 2, Created: 2, Idle: 1}}, want: false},
		{name: "a warm runner created takes the queued job", groups: []passreport.GroupStats{{Queued: 1, Created: 1, Idle: 1}}, want: false},
		{name: "jobs waiting for a slot, no idle runner", groups: []passreport.GroupStats{{Queued: 2, Active: 2, Max: 2}}, want: false},
		{name: "idle runners, nothing queued", groups: []passreport.GroupStats{{Idle: 2}}, want: false},
		{name: "a failed group's numbers are not this pass's", groups: []passreport.GroupStats{{Queued: 1, Idle: 1, Failed: true}}, want: false},
		{name: "any one group is enough", groups: []passreport.GroupStats{{Queued: 1, Created: 1}, {Queued: 1, Idle: 1}}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, leftToIdleRunners(passreport.Summary{GroupStats: tt.groups}))
		})
	}
}

func TestFollowUpDelaysDoubleUpToTheIntervalAndReset(t *testing.T) {
	const none = time.Duration(-1)
	tests := []struct {
		name           string
		base, interval time.Duration
		left           []bool
		want           []time.Duration
	}{
		{name: "no follow-up without jobs left to idle runners", base: 2 * time.Second, interval: time.Minute,
			left: []bool{false, false}, want: []time.Duration{none, none}},
		{name: "doubles on each consecutive pass", base: 2 * time.Second, interval: time.Minute,
			left: []bool{true, true, true, true}, want: []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}},
		{name: "capped by the interval", base: 2 * time.Second, interval: 10 * time.Second,
			left: []bool{true, true, true, true, true}, want: []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}},
		{name: "a pass without jobs left to idle runners resets", base: 2 * time.Second, interval: time.Minute,
			left: []bool{true, true, false, true}, want: []time.Duration{2 * time.Second, 4 * time.Second, none, 2 * time.Second}},
		{name: "a base longer than the interval is the interval", base: 2 * time.Second, interval: time.Second,
			left: []bool{true}, want: []time.Duration{time.Second}},
		{name: "no base is the default", interval: time.Minute,
			left: []bool{true, true}, want: []time.Duration{DefaultFollowUp, 2 * DefaultFollowUp}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFollowUps(tt.base, tt.interval)
			var got []time.Duration
			for _, left := range tt.left {
				d, ok := f.after(left)
				if !ok {
					d = none
				}
				got = append(got, d)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// A long run of passes that leave jobs to idle runners must not overflow
// the delay into a negative one (a pass at once, forever).
func TestFollowUpDelayNeverOverflows(t *testing.T) {
	f := newFollowUps(time.Second, 24*time.Hour)
	for range 200 {
		d, ok := f.after(true)
		require.True(t, ok)
		require.Positive(t, d)
		require.LessOrEqual(t, d, 24*time.Hour)
	}
}

// followUpBase is the tests' first follow-up delay: short, so a follow-up
// pass shows within the waits below.
const followUpBase = 20 * time.Millisecond

// leftToIdleEnv is one group of two runners with a runner Job whose pod
// runs and whose runner runs no Gitea job (to the plan, idle: an
// ephemeral runner that just finished its job looks so until its Job
// completes), and queued jobs as given.
func leftToIdleEnv(t *testing.T, queuedJobs ...gitea.Job) *env {
	rg := newGroup("ci", 2)
	e := newEnv(t, rg)
	e.addRunner(rg, "ci-spent", 7, time.Minute, podRunning)
	e.setQueued(queuedJobs...)
	return e
}

func (e *env) setQueued(jobs ...gitea.Job) {
	e.gitea.mu.Lock()
	defer e.gitea.mu.Unlock()
	e.gitea.snap.Queued = jobs
}

func (e *env) giteaCalls() int {
	e.gitea.mu.Lock()
	defer e.gitea.mu.Unlock()
	return e.gitea.calls
}

// TestLoopPassesAgainSoonAfterLeavingAJobToAnIdleRunner: the regular pass
// is an hour away, but a pass that left a queued job to an idle runner
// is followed by another soon.
func TestLoopPassesAgainSoonAfterLeavingAJobToAnIdleRunner(t *testing.T) {
	e := leftToIdleEnv(t, queued(1, "ubuntu-latest"))
	startLoop(t, e.scaler())

	waitFor(t, "a follow-up pass", func() bool { return e.giteaCalls() >= 2 })
	assert.Contains(t, e.logs.String(), `"msg":"follow-up pass"`)
	assert.Len(t, e.jobs(), 1, "no runner Job beside the spent one: it still counts as idle")
}

// TestLoopWaitsForTheIntervalWhenNoJobIsLeftToAnIdleRunner: nothing but
// a job left to an idle runner brings the next pass forward.
func TestLoopWaitsForTheIntervalWhenNoJobIsLeftToAnIdleRunner(t *testing.T) {
	tests := []struct {
		name  string
		setup func(e *env, rg *v1alpha1.RunnerGroup)
	}{
		{name: "nothing queued, an idle runner", setup: func(e *env, rg *v1alpha1.RunnerGroup) {
			e.addRunner(rg, "ci-idle", 7, time.Minute, podRunning)
		}},
		{name: "a queued job gets a new runner", setup: func(e *env, _ *v1alpha1.RunnerGroup) {
			e.setQueued(queued(1, "ubuntu-latest"))
		}},
		{name: "queued jobs wait for a slot while runners start", setup: func(e *env, rg *v1alpha1.RunnerGroup) {
			e.addRunner(rg, "ci-a", 0, time.Second, nil)
			e.addRunner(rg, "ci-b", 0, time.Second, nil)
			e.setQueued(queued(1, "ubuntu-latest"), queued(2, "ubuntu-latest"), queued(3, "ubuntu-latest"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := newGroup("ci", 2)
			e := newEnv(t, rg)
			tt.setup(e, rg)
			startLoop(t, e.scaler())

			waitFor(t, "the first pass", func() bool { return strings.Contains(e.logs.String(), `"msg":"pass finished"`) })
			time.Sleep(20 * followUpBase)
			assert.Equal(t, 1, e.giteaCalls(), "no pass before the interval")
			assert.NotContains(t, e.logs.String(), "follow-up pass")
		})
	}
}

// TestFollowUpsStopOnceNoJobIsLeftToAnIdleRunner: the follow-up pass finds
// the job taken (gone from the queue) and the loop goes back to its
// interval.
func TestFollowUpsStopOnceNoJobIsLeftToAnIdleRunner(t *testing.T) {
	e := leftToIdleEnv(t, queued(1, "ubuntu-latest"))
	e.gitea.barrier = func() {
		if e.giteaCalls() == 1 {
			e.setQueued() // the idle runner took the job before the second pass
		}
	}
	startLoop(t, e.scaler())

	waitFor(t, "the follow-up pass", func() bool { return e.giteaCalls() == 2 })
	waitFor(t, "the follow-up pass to finish", func() bool { return strings.Count(e.logs.String(), `"msg":"pass finished"`) == 2 })
	time.Sleep(20 * followUpBase)
	assert.Equal(t, 2, e.giteaCalls(), "no pass after the follow-up until the interval")
}

// TestWebhookPassLeavingAJobToAnIdleRunnerIsFollowedUp: in webhook mode
// the queued delivery of a needs: chain's next job comes just as its
// predecessor's runner finished; the triggered pass leaves the job to
// that runner, and a follow-up pass comes soon, not at the next poll.
func TestWebhookPassLeavingAJobToAnIdleRunnerIsFollowedUp(t *testing.T) {
	e := leftToIdleEnv(t)
	sc := e.scaler()
	startLoop(t, sc)
	waitFor(t, "the first pass", func() bool { return strings.Contains(e.logs.String(), `"msg":"pass finished"`) })
	require.NotContains(t, e.logs.String(), "follow-up pass", "nothing was queued")

	e.setQueued(queued(1, "ubuntu-latest"))
	sc.Trigger(QueuedJob{Repo: "acme/app", Labels: []string{"ubuntu-latest"}})

	waitFor(t, "the triggered pass and its follow-up", func() bool { return e.giteaCalls() >= 3 })
	assert.Contains(t, e.logs.String(), `"msg":"follow-up pass"`)
}
