//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
// running for ever (gitea-runner v1.0.8 reports it as a success: pinned
// below); and the looping scaler's next passes start no second runner for
// it (the job is not queued again) while a job pushed after it is served as
// usual.
func TestRunnerJobDeletedWhileItsJobRunsIsNeitherRepeatedNorLost(t *testing.T) {
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 6*time.Minute)
	s := b.servedGroup(ctx, t, sceneOpts{name: "term", max: 2,
		template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](120)}}})

	key := jobKey("term")
	pushJobs(ctx, t, b, s.fx, "term.yml", []string{key}, wfJob{key: key, runsOn: []string{s.label}})
	id := idsOf(b.gitea.waitJobs(ctx, t, s.fx.repo, 1), key)[key]

	// Gitea shows the job in_progress as soon as it hands it out; the
	// runner runs it once its step has started. (A runner stopped between
	// the two drops the task it was given, and Gitea shows the job
	// in_progress until its zombie-task timeout: what we saw first.)
	runner := b.runnerRunningStep(ctx, t, s, key, id)

	// What a drain or a kubectl delete does: the Job and so its pod go.
	require.NoError(t, b.kube.BatchV1().Jobs(s.ns).Delete(ctx, runner.Name,
		metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
	var ended giteasetup.Job
	waitUntil(ctx, t, stepWait, "Gitea records the job as ended", s.dump, func(ctx context.Context) (bool, string, error) {
		gj, err := b.giteaJob(ctx, s.fx.repo, id)
		ended = gj
		return err == nil && gj.Status == "completed", gj.State(), nil
	})
	t.Logf("Gitea job %d of a runner whose pod got SIGTERM ended %s", id, ended.State())
	// The runner logs the cancel once it has reported it to Gitea.
	waitUntil(ctx, t, stepWait, "the runner's log says it was stopped mid-job", s.dump, func(context.Context) (bool, string, error) {
		logs, err := filepath.Glob(filepath.Join(b.dir, "logs", "pods", s.ns+"_"+runner.Name+"-*_runner.log"))
		if err != nil || len(logs) != 1 {
			return false, fmt.Sprintf("runner logs %v: %v", logs, err), nil
		}
		raw, err := os.ReadFile(logs[0])
		return err == nil && strings.Contains(string(raw), "cancelled in progress jobs during shutdown"), "", nil
	})
	// What gitea-runner v1.0.8 reports for the job it cancelled at
	// shutdown, on Gitea 1.26: success (its step was killed while it
	// waited). Pinned, so that a runner or Gitea that reports it otherwise
	// is noticed: the README and the fixtures README say so.
	require.Equal(t, "success", ended.Conclusion, "what Gitea records for a job whose runner was stopped mid-job changed: update the README's runner pods section and internal/gitea/testdata/README.md")

	// A job pushed now is served, and over those passes the stopped job got
	// no runner Job besides the deleted one.
	next := jobKey("term-next")
	pushJobs(ctx, t, b, s.fx, "next.yml", nil, wfJob{key: next, runsOn: []string{s.label}})
	nextID := idsOf(b.gitea.waitJobs(ctx, t, s.fx.repo, 2), next)[next]
	waitUntil(ctx, t, stepWait, "the next job served", s.dump, func(ctx context.Context) (bool, string, error) {
		gj, err := b.giteaJob(ctx, s.fx.repo, nextID)
		return err == nil && gj.State() == "completed/success", gj.State(), err
	})
	jobs, err := b.runnerJobs(ctx, s.ns, s.group)
	require.NoError(t, err)
	for _, j := range byGiteaJob(jobs)[id] {
		require.Equal(t, runner.Name, j.Name, "the stopped job got a second runner Job")
	}
}

// runnerRunningStep waits until the Gitea job id (workflow job key) is
// in_progress with its step started, and returns the runner Job of the
// runner Gitea gave it to.
func (b *bed) runnerRunningStep(ctx context.Context, t *testing.T, s scene, key string, id int64) batchv1.Job {
	t.Helper()
	var runner batchv1.Job
	waitUntil(ctx, t, stepWait, "the held job's step running on its runner", s.dump, func(ctx context.Context) (bool, string, error) {
		gj, err := b.giteaJob(ctx, s.fx.repo, id)
		if err != nil || gj.Status != "in_progress" || gj.RunnerName == "" {
			return false, fmt.Sprintf("job %s err=%v", gj.State(), err), nil
		}
		if _, err := os.Stat(stepStarted(key)); err != nil {
			return false, "step not started", nil
		}
		jobs, err := b.runnerJobs(ctx, s.ns, s.group)
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
