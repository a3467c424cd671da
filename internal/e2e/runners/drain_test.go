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
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// TestAnEvictedRunnerFinishesItsJobWithinTheGrace (issue 22.3): a runner
// pod evicted while its job runs (what kubectl drain does, through the
// Eviction API) gets SIGTERM and the pod's grace period (the built-in
// 10920 s), and the shutdown_timeout the scaler renders from it (3 h), so
// Gitea's real runner finishes the job before it exits, and Gitea records the job's own
// success, not a cancel (compare TestRunnerJobDeletedWhileItsJobRunsIsNeitherRepeatedNorLost,
// with the default shutdown_timeout of 0).
func TestAnEvictedRunnerFinishesItsJobWithinTheGrace(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 6*time.Minute)
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "drain", Max: 2})

	key := e2e.JobKey("drain")
	e2e.PushJobs(ctx, t, b, s.Fx, "drain.yml", []string{key}, e2e.WfJob{Key: key, RunsOn: []string{s.Label}})
	id := e2e.IDsOf(b.Gitea.WaitJobs(ctx, t, s.Fx.Repo, 1), key)[key]
	runner := runnerRunningStep(b, ctx, t, s, key, id)
	pods, err := b.JobPods(ctx, s.NS, runner.Name)
	require.NoError(t, err)
	require.Len(t, pods, 1)
	pod := pods[0]
	require.Equal(t, int64(runnerjob.DefaultTerminationGracePeriodSeconds), *pod.Spec.TerminationGracePeriodSeconds)
	require.Equal(t, "false", pod.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"])

	// What kubectl drain does to the pod.
	require.NoError(t, b.Kube.PolicyV1().Evictions(s.NS).Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: s.NS}}))
	logFile := filepath.Join(b.Dir, "logs", "pods", s.NS+"_"+pod.Name+"_runner.log")
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the runner's log says it waits for its job before it shuts down", s.Dump, func(context.Context) (bool, string, error) {
		raw, err := os.ReadFile(logFile)
		return err == nil && strings.Contains(string(raw), "shutdown initiated, waiting 3h0m0s for running jobs to complete"), fmt.Sprintf("log %s: %v", logFile, err), nil
	})
	gj, err := b.GiteaJob(ctx, s.Fx.Repo, id)
	require.NoError(t, err)
	require.Equal(t, "in_progress", gj.Status, "the job still runs while its pod is being evicted")

	// The job ends by itself within the grace period.
	b.Release(t, key)
	e2e.WaitUntil(ctx, t, e2e.StepWait, "Gitea records the job's own end", s.Dump, func(ctx context.Context) (bool, string, error) {
		gj, err = b.GiteaJob(ctx, s.Fx.Repo, id)
		return err == nil && gj.Status == "completed", gj.State(), nil
	})
	require.Equal(t, "completed/success", gj.State())
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the evicted pod gone", s.Dump, func(ctx context.Context) (bool, string, error) {
		_, err := b.Kube.CoreV1().Pods(s.NS).Get(ctx, pod.Name, metav1.GetOptions{})
		return err != nil, fmt.Sprintf("pod %s: %v", pod.Name, err), nil
	})
	raw, err := os.ReadFile(logFile)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "cancelled in progress jobs during shutdown", "the runner finished the job instead of cancelling it")
	t.Logf("Gitea job %d of an evicted runner ended %s after the runner finished it", id, gj.State())
}
