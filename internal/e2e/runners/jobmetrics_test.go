//go:build e2e

package runners

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// jobMetricsHold is how long the job's step is held once it runs, so its
// execution time is at least that.
const jobMetricsHold = 3 * time.Second

// TestJobHistogramsHoldARealJobsTimesOnce runs one job on Gitea's real
// runner under a looping scaler with its webhook, and reads the group's job
// histograms: one startup sample, Gitea's started_at minus its created_at,
// and one execution sample, completed_at minus started_at from the
// completed delivery, each still one after more passes; the runner Job's
// creation counts in the group's created counter.
func TestJobHistogramsHoldARealJobsTimesOnce(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 5*time.Minute)
	const group = "jobmetrics"
	fx := b.NewOrgScope(ctx, t, e2e.Uniq("e2e-jobmetrics"))
	label := e2e.Uniq("e2e-jobmetrics")
	ns := b.Namespace(ctx, t, "e2e-jobmetrics", nil)
	dump := func() string { return b.DumpNamespaces(ns) + b.Gitea.JobsLine(fx.Repo) }
	b.TokenSecret(ctx, t, ns, e2e.GroupSecret(group), fx.RegToken, fx.APIToken)
	spec := b.GroupSpec(fx, e2e.GroupSecret(group), 1, label)
	spec.Gitea.URL = b.Gitea.Admin.URL()
	b.CreateGroup(ctx, t, ns, group, nil, spec)
	scaler := b.StartLoopScaler(ctx, t, ns, group, fx, 2*time.Second)

	key := e2e.JobKey("jobmetrics")
	e2e.PushJobs(ctx, t, b, fx, "metrics.yml", []string{key}, e2e.WfJob{Key: key, RunsOn: []string{label}})
	id := e2e.IDsOf(b.Gitea.WaitJobs(ctx, t, fx.Repo, 1), key)[key]
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the job's step runs", dump, func(context.Context) (bool, string, error) {
		_, err := os.Stat(e2e.StepStarted(key))
		return err == nil, fmt.Sprint(err), nil
	})
	e2e.SleepCtx(ctx, jobMetricsHold)
	b.Release(t, key)
	var job giteasetup.Job
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the job succeeds", dump, func(ctx context.Context) (bool, string, error) {
		var err error
		job, err = b.GiteaJob(ctx, fx.Repo, id)
		return job.State() == "completed/success", job.State(), err
	})
	rg, err := b.Group(ctx, ns, group)
	require.NoError(t, err)
	_, own := runnerjob.JobOfRunner(rg, job.RunnerName)
	require.True(t, own, "the job ran on the group's runner, not %q", job.RunnerName)
	require.False(t, job.StartedAt.Before(job.CreatedAt), "Gitea's times: created %s, started %s", job.CreatedAt, job.StartedAt)

	of := map[string]string{"namespace": ns, "name": group}
	read := func(ctx context.Context, metric string) map[string]float64 {
		s, err := scaler.Samples(ctx, metric, of)
		require.NoError(t, err)
		return s
	}
	e2e.WaitUntil(ctx, t, e2e.StepWait, "one startup and one execution sample", dump, func(ctx context.Context) (bool, string, error) {
		startup, execution := read(ctx, "giteascaler_job_startup_duration_seconds"), read(ctx, "giteascaler_job_execution_duration_seconds")
		return startup["giteascaler_job_startup_duration_seconds_count"] == 1 && execution["giteascaler_job_execution_duration_seconds_count"] == 1,
			fmt.Sprintf("startup %v, execution %v", startup, execution), nil
	})
	// Two more passes see nothing new of the job.
	passes := func(ctx context.Context) float64 {
		s, err := scaler.Samples(ctx, "giteascaler_passes_total", map[string]string{"result": "ok"})
		require.NoError(t, err)
		return s["giteascaler_passes_total"]
	}
	before := passes(ctx)
	e2e.WaitUntil(ctx, t, e2e.StepWait, "two more passes", dump, func(ctx context.Context) (bool, string, error) {
		n := passes(ctx)
		return n >= before+2, fmt.Sprintf("%v passes, %v before", n, before), nil
	})
	startup, execution := read(ctx, "giteascaler_job_startup_duration_seconds"), read(ctx, "giteascaler_job_execution_duration_seconds")
	assert.InDelta(t, 1, startup["giteascaler_job_startup_duration_seconds_count"], 0, "the job counted once")
	assert.InDelta(t, job.StartedAt.Sub(job.CreatedAt).Seconds(), startup["giteascaler_job_startup_duration_seconds_sum"], 0,
		"startup is Gitea's started_at minus created_at")
	assert.InDelta(t, 1, execution["giteascaler_job_execution_duration_seconds_count"], 0, "the job counted once")
	took := execution["giteascaler_job_execution_duration_seconds_sum"]
	assert.GreaterOrEqual(t, took, jobMetricsHold.Seconds(), "execution covers the held step")
	if !job.CompletedAt.IsZero() && job.CompletedAt.Unix() > 0 {
		assert.InDelta(t, job.CompletedAt.Sub(job.StartedAt).Seconds(), took, 0, "execution is completed_at minus started_at")
	}
	created := read(ctx, "giteascaler_runners_created_total")
	assert.InDelta(t, 1, created["giteascaler_runners_created_total"], 0, "the group's one runner Job")
	t.Logf("startup %.0fs, execution %.0fs (Gitea: created %s, started %s, completed %s)", startup["giteascaler_job_startup_duration_seconds_sum"], took,
		job.CreatedAt, job.StartedAt, job.CompletedAt)
}
