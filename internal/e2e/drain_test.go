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
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 6*time.Minute)
	s := b.servedGroup(ctx, t, sceneOpts{name: "drain", max: 2})

	key := jobKey("drain")
	pushJobs(ctx, t, b, s.fx, "drain.yml", []string{key}, wfJob{key: key, runsOn: []string{s.label}})
	id := idsOf(b.gitea.waitJobs(ctx, t, s.fx.repo, 1), key)[key]
	runner := b.runnerRunningStep(ctx, t, s, key, id)
	pods, err := b.jobPods(ctx, s.ns, runner.Name)
	require.NoError(t, err)
	require.Len(t, pods, 1)
	pod := pods[0]
	require.Equal(t, int64(runnerjob.DefaultTerminationGracePeriodSeconds), *pod.Spec.TerminationGracePeriodSeconds)
	require.Equal(t, "false", pod.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"])

	// What kubectl drain does to the pod.
	require.NoError(t, b.kube.PolicyV1().Evictions(s.ns).Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: s.ns}}))
	logFile := filepath.Join(b.dir, "logs", "pods", s.ns+"_"+pod.Name+"_runner.log")
	waitUntil(ctx, t, stepWait, "the runner's log says it waits for its job before it shuts down", s.dump, func(context.Context) (bool, string, error) {
		raw, err := os.ReadFile(logFile)
		return err == nil && strings.Contains(string(raw), "shutdown initiated, waiting 3h0m0s for running jobs to complete"), fmt.Sprintf("log %s: %v", logFile, err), nil
	})
	gj, err := b.giteaJob(ctx, s.fx.repo, id)
	require.NoError(t, err)
	require.Equal(t, "in_progress", gj.Status, "the job still runs while its pod is being evicted")

	// The job ends by itself within the grace period.
	b.release(t, key)
	waitUntil(ctx, t, stepWait, "Gitea records the job's own end", s.dump, func(ctx context.Context) (bool, string, error) {
		gj, err = b.giteaJob(ctx, s.fx.repo, id)
		return err == nil && gj.Status == "completed", gj.State(), nil
	})
	require.Equal(t, "completed/success", gj.State())
	waitUntil(ctx, t, stepWait, "the evicted pod gone", s.dump, func(ctx context.Context) (bool, string, error) {
		_, err := b.kube.CoreV1().Pods(s.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err != nil, fmt.Sprintf("pod %s: %v", pod.Name, err), nil
	})
	raw, err := os.ReadFile(logFile)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "cancelled in progress jobs during shutdown", "the runner finished the job instead of cancelling it")
	t.Logf("Gitea job %d of an evicted runner ended %s after the runner finished it", id, gj.State())
}
