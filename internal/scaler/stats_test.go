package scaler

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
)

type recordingObserver struct {
	mu   sync.Mutex
	sums []passreport.Summary
}

func (r *recordingObserver) ObservePass(sum passreport.Summary, _ time.Duration, _ error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sums = append(r.sums, sum)
}

// summaries are the passes observed so far.
func (r *recordingObserver) summaries() []passreport.Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]passreport.Summary(nil), r.sums...)
}

type fixedCounter struct{ calls int }

// Requests answers 10 Gitea and 100 Kubernetes requests more per call.
func (f *fixedCounter) Requests() (int64, int64) {
	f.calls++
	return int64(10 * f.calls), int64(100 * f.calls)
}

// TestPassReportsWhatTheMetricsShow: a pass tells its observer each
// group's counts and the time from a job's creation in Gitea to its runner
// Job, and logs one summary line with the same numbers and the requests
// the pass sent.
func TestPassReportsWhatTheMetricsShow(t *testing.T) {
	e := newEnv(t, newGroup("a", 5), newGroup("b", 1, withLabels("gpu")))
	e.gitea.snap = gitea.Snapshot{
		Queued: []gitea.Job{
			{ID: 1, Labels: []string{"ubuntu-latest"}, Created: t0.Add(-30 * time.Second)},
			{ID: 2, Labels: []string{"gpu"}, Created: t0.Add(-90 * time.Second)},
			{ID: 3, Labels: []string{"gpu"}, Created: t0.Add(-60 * time.Second)},
		},
		Blocked: []gitea.Job{{ID: 4, Labels: []string{"ubuntu-latest"}}},
	}
	obs := &recordingObserver{}
	sc := e.scaler(func(d *Deps, _ *Config) { d.Observer, d.Requests = obs, &fixedCounter{} })

	require.NoError(t, sc.Run(context.Background(), RunOptions{}))

	require.Len(t, obs.sums, 1)
	sum := obs.sums[0]
	assert.Equal(t, 2, sum.Created)
	assert.ElementsMatch(t, []passreport.GroupStats{
		{Namespace: ns, Name: "a", Queued: 1, Blocked: 1, Active: 1, Max: 5, Created: 1},
		{Namespace: ns, Name: "b", Queued: 2, Blocked: 1, Active: 1, Max: 1, Created: 1}, // its runners carry the default labels too
	}, sum.GroupStats)
	require.Len(t, sum.QueuedToJob, 2, "one per runner Job created")
	for _, d := range sum.QueuedToJob {
		assert.GreaterOrEqual(t, d, 30*time.Second, "from the job's creation to the runner Job")
	}

	var line map[string]any
	for _, l := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(l, `"msg":"pass finished"`) {
			require.NoError(t, json.Unmarshal([]byte(l), &line))
		}
	}
	require.NotNil(t, line, "a summary line")
	for k, want := range map[string]float64{"groups": 2, "created": 2, "queued": 3, "blocked": 2, "active": 2, "giteaRequests": 10, "kubeRequests": 100} {
		assert.EqualValues(t, want, line[k], k)
	}
	assert.Equal(t, map[string]any{"start_timeout": 0.0, "idle": 0.0, "orphan": 0.0}, line["reaped"])
	assert.Contains(t, line, "queuedToJob")
}
