//go:build e2e

package runners

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// TestRunnerJobDeletedWhileItsJobRunsIsNeitherRepeatedNorLost: a runner
// Job deleted while its Gitea job runs (what a node drain, an eviction or a
// user's kubectl delete does) sends Gitea's real runner SIGTERM through the
// pod's deletion. The runner waits its shutdown_timeout for the job (the
// scaler sets it to the pod's grace less 120s, README "Runner
// configuration"; this group's template sets a grace of 2m, so 1m, which
// the held step outlasts), then cancels
// the job and reports it, so Gitea records the job as ended, not
// running for ever (on Gitea 1.26 the runner reports it as a success,
// 3.1.0 as 1.0.8 did: pinned below); and the looping scaler's next
// passes start no second runner for it (the job is not queued again) while a job pushed after it is served as
// usual.
func TestRunnerJobDeletedWhileItsJobRunsIsNeitherRepeatedNorLost(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 6*time.Minute)
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "term", Max: 2,
		Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](120)}}})

	key := e2e.JobKey("term")
	e2e.PushJobs(ctx, t, b, s.Fx, "term.yml", []string{key}, e2e.WfJob{Key: key, RunsOn: []string{s.Label}})
	id := e2e.IDsOf(b.Gitea.WaitJobs(ctx, t, s.Fx.Repo, 1), key)[key]

	// Gitea shows the job in_progress as soon as it hands it out; the
	// runner runs it once its step has started. (A runner stopped between
	// the two drops the task it was given, and Gitea shows the job
	// in_progress until its zombie-task timeout: what we saw first.)
	runner := runnerRunningStep(b, ctx, t, s, key, id)

	// What a drain or a kubectl delete does: the Job and so its pod go.
	require.NoError(t, b.Kube.BatchV1().Jobs(s.NS).Delete(ctx, runner.Name,
		metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
	var ended giteasetup.Job
	e2e.WaitUntil(ctx, t, e2e.StepWait, "Gitea records the job as ended", s.Dump, func(ctx context.Context) (bool, string, error) {
		gj, err := b.GiteaJob(ctx, s.Fx.Repo, id)
		ended = gj
		return err == nil && gj.Status == "completed", gj.State(), nil
	})
	t.Logf("Gitea job %d of a runner whose pod got SIGTERM ended %s", id, ended.State())
	// The runner logs the cancel once it has reported it to Gitea.
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the runner's log says it was stopped mid-job", s.Dump, func(context.Context) (bool, string, error) {
		logs, err := filepath.Glob(filepath.Join(b.Dir, "logs", "pods", s.NS+"_"+runner.Name+"-*_runner.log"))
		if err != nil || len(logs) != 1 {
			return false, fmt.Sprintf("runner logs %v: %v", logs, err), nil
		}
		raw, err := os.ReadFile(logs[0])
		return err == nil && strings.Contains(string(raw), "cancelled in progress jobs during shutdown"), "", nil
	})
	// What the runner (3.1.0, as 1.0.8 before it) reports for the job it
	// cancelled at shutdown, on Gitea 1.26: success (its step was killed
	// while it waited). Pinned, so that a runner or Gitea that reports it otherwise
	// is noticed: the README and the fixtures README say so.
	require.Equal(t, "success", ended.Conclusion, "what Gitea records for a job whose runner was stopped mid-job changed: update the README's runner pods section and internal/gitea/testdata/README.md")

	// A job pushed now is served, and over those passes the stopped job got
	// no runner Job besides the deleted one.
	next := e2e.JobKey("term-next")
	e2e.PushJobs(ctx, t, b, s.Fx, "next.yml", nil, e2e.WfJob{Key: next, RunsOn: []string{s.Label}})
	nextID := e2e.IDsOf(b.Gitea.WaitJobs(ctx, t, s.Fx.Repo, 2), next)[next]
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the next job served", s.Dump, func(ctx context.Context) (bool, string, error) {
		gj, err := b.GiteaJob(ctx, s.Fx.Repo, nextID)
		return err == nil && gj.State() == "completed/success", gj.State(), err
	})
	jobs, err := b.RunnerJobs(ctx, s.NS, s.Group)
	require.NoError(t, err)
	for _, j := range e2e.ByGiteaJob(jobs)[id] {
		require.Equal(t, runner.Name, j.Name, "the stopped job got a second runner Job")
	}
}

// runnerRunningStep waits until the Gitea job id (workflow job key) is
// in_progress with its step started, and returns the runner Job of the
// runner Gitea gave it to.
func runnerRunningStep(b *e2e.Testbed, ctx context.Context, t *testing.T, s e2e.Scene, key string, id int64) batchv1.Job {
	t.Helper()
	var runner batchv1.Job
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the held job's step running on its runner", s.Dump, func(ctx context.Context) (bool, string, error) {
		gj, err := b.GiteaJob(ctx, s.Fx.Repo, id)
		if err != nil || gj.Status != "in_progress" || gj.RunnerName == "" {
			return false, fmt.Sprintf("job %s err=%v", gj.State(), err), nil
		}
		if _, err := os.Stat(e2e.StepStarted(key)); err != nil {
			return false, "step not started", nil
		}
		jobs, err := b.RunnerJobs(ctx, s.NS, s.Group)
		if err != nil {
			return false, "", err
		}
		for i := range jobs {
			if runnerjob.RunnerNameOf(&jobs[i]) == gj.RunnerName {
				runner = jobs[i]
				return true, "", nil
			}
		}
		return false, "runner " + gj.RunnerName + " has no runner Job", nil
	})
	return runner
}
