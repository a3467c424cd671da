package scaler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// A loop counts each job its group's runners ran once, whether a pass's
// listing or a webhook delivery shows it first; another group's runner's
// jobs are not the group's.
func TestJobTimesCountEachJobOfTheGroupsRunnersOnce(t *testing.T) {
	rg := newGroup("ci", 5)
	e := newEnv(t, rg)
	runner := runnerjob.RunnerName(rg, "ci-x2v7k")
	other := runnerjob.RunnerName(newGroup("ci-gpu", 1), "ci-gpu-x2v7k")
	created := t0.Add(-time.Hour)
	started := created.Add(20 * time.Second)
	e.gitea.snap = gitea.Snapshot{Running: []gitea.Job{
		{ID: 4, RunnerName: runner, Created: created, Started: started},
		{ID: 5, RunnerName: other, Created: created, Started: started.Add(time.Second)},
	}}
	sc := e.scaler(asLoop)

	steps := []struct {
		name           string
		before         func()
		wantStartups   []time.Duration
		wantExecutions []time.Duration
	}{
		{name: "a running job of the group's runner", wantStartups: []time.Duration{20 * time.Second}},
		{name: "the same job in the next pass"},
		{name: "its completed delivery, and a job the listing missed", before: func() {
			e.gitea.snap.Running = nil
			sc.JobRan(RanJob{ID: 4, RunnerName: runner, Created: created, Started: started, Completed: started.Add(90 * time.Second)})
			sc.JobRan(RanJob{ID: 6, RunnerName: runner, Created: created, Started: started.Add(5 * time.Second), Completed: started.Add(4 * time.Second)})
			sc.JobRan(RanJob{ID: 5, RunnerName: other, Created: created, Started: started, Completed: started.Add(time.Minute)})
		}, wantStartups: []time.Duration{25 * time.Second}, wantExecutions: []time.Duration{90 * time.Second}},
		{name: "the same deliveries again", before: func() {
			sc.JobRan(RanJob{ID: 4, RunnerName: runner, Created: created, Started: started, Completed: started.Add(90 * time.Second)})
			sc.JobRan(RanJob{ID: 6, RunnerName: runner, Created: created, Started: started.Add(5 * time.Second), Completed: started.Add(4 * time.Second)})
		}},
		{name: "an in_progress delivery before any start is Gitea's epoch", before: func() {
			sc.JobRan(RanJob{ID: 8, RunnerName: runner, Created: created, Started: time.Unix(0, 0)})
		}},
		{name: "a rerun of the job starts again", before: func() {
			e.gitea.snap.Running = []gitea.Job{{ID: 4, RunnerName: runner, Created: created, Started: started.Add(time.Minute)}}
		}, wantStartups: []time.Duration{80 * time.Second}},
	}
	for _, step := range steps {
		if step.before != nil {
			step.before()
		}
		sum, err := sc.Pass(context.Background())
		require.NoError(t, err, step.name)
		require.Len(t, sum.GroupStats, 1, step.name)
		assert.Equal(t, step.wantStartups, sum.GroupStats[0].Startups, step.name)
		assert.Equal(t, step.wantExecutions, sum.GroupStats[0].Executions, step.name)
	}
}

// A single pass keeps nothing, so it reports no job times: it could not
// tell a job it counted before.
func TestJobTimesAreALoopsOnly(t *testing.T) {
	rg := newGroup("ci", 5)
	e := newEnv(t, rg)
	runner := runnerjob.RunnerName(rg, "ci-x2v7k")
	e.gitea.snap = gitea.Snapshot{Running: []gitea.Job{{ID: 4, RunnerName: runner, Created: t0.Add(-time.Hour), Started: t0.Add(-time.Minute)}}}
	sc := e.scaler()
	sc.JobRan(RanJob{ID: 4, RunnerName: runner, Created: t0.Add(-time.Hour), Started: t0.Add(-time.Minute), Completed: t0})

	sum, err := sc.Pass(context.Background())

	require.NoError(t, err)
	assert.Equal(t, []passreport.GroupStats{{Namespace: ns, Name: "ci", Running: 1, Max: 5}}, sum.GroupStats)
}

// The loop forgets a counted job an hour after it last saw it, and drops
// deliveries no pass took in that time; the held deliveries are bounded.
func TestJobTimesMemoryIsBounded(t *testing.T) {
	now := t0
	rg := newGroup("ci", 5)
	e := newEnv(t, rg)
	sc := e.scaler(asLoop, func(d *Deps, _ *Config) { d.Now = func() time.Time { return now } })
	runner := runnerjob.RunnerName(rg, "ci-x2v7k")
	for i := range maxHeldRuns + 10 {
		sc.JobRan(RanJob{ID: int64(i), RunnerName: runner})
	}
	assert.Equal(t, maxHeldRuns, sc.mem.jobs.nHeld)
	sc.JobRan(RanJob{ID: 1, RunnerName: "not-a-runner-of-ours"})
	assert.Equal(t, maxHeldRuns, sc.mem.jobs.nHeld)

	_, err := sc.Pass(context.Background())
	require.NoError(t, err)
	assert.Zero(t, sc.mem.jobs.nHeld, "the group's pass took them")
	assert.Empty(t, sc.mem.jobs.counted, "none had started")

	sc.JobRan(RanJob{ID: 1, RunnerName: runnerjob.RunnerName(newGroup("elsewhere", 1), "elsewhere-aaaaa")})
	sc.JobRan(RanJob{ID: 2, RunnerName: runner, Created: t0.Add(-time.Minute), Started: t0})
	_, err = sc.Pass(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, sc.mem.jobs.nHeld, "held for a group no pass of this loop serves")
	assert.Len(t, sc.mem.jobs.counted, 1)

	now = now.Add(jobMemoryAge + 2*time.Minute)
	_, err = sc.Pass(context.Background())
	require.NoError(t, err)
	assert.Zero(t, sc.mem.jobs.nHeld)
	assert.Empty(t, sc.mem.jobs.counted)
}
