//go:build e2e

// A runner pod on the real node deleted while its job's container step
// runs, as a drain deletes it: what reaches the runner through the image's
// s6, and whether the job finishes within the grace.

package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRealNodeRunnerPodDeletedMidJob deletes a dind-rootless runner pod
// while its job's container step runs and holds the runner pods' docs to
// their promise: the runner finishes its job within the grace period, and
// Gitea records the job's own result.
func TestRealNodeRunnerPodDeletedMidJob(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	n := readRealNode(b, t)
	im := b.RunnerImages(t)
	ctx := e2e.TestContext(t, 12*time.Minute)
	s := newRunnerScene(b, ctx, t, n, im, "realdrain", "3.1.0", dindRootless)

	key := e2e.JobKey("drained")
	wf := fmt.Sprintf("name: drained\non: [push]\njobs:\n  %s:\n    runs-on: [%s]\n    steps:\n      - run: echo step started; sleep 45; echo step finished\n", key, s.label)
	b.Gitea.PushWorkflow(ctx, t, s.fx.PushAs, s.fx.Repo, "drained.yml", wf)
	b.Gitea.WaitJobs(ctx, t, s.fx.Repo, 1)
	_, pod := s.runnerPod(ctx, t)
	var jobID int64
	e2e.WaitUntil(ctx, t, 5*time.Minute, "the step runs in its container", s.dump, func(ctx context.Context) (bool, string, error) {
		j, st, ok := s.onlyJob(ctx)
		if !ok {
			return false, st, nil
		}
		jobID = j.ID
		log, err := s.jobLog(ctx, j.ID)
		return strings.Contains(log, "step started"), fmt.Sprintf("%s; log %v: %s", st, err, e2e.Tail(log, 3)), nil
	})

	deleted := time.Now()
	require.NoError(t, b.Kube.CoreV1().Pods(s.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}))
	logs := s.podLogs()
	var state string
	e2e.WaitUntil(ctx, t, 3*time.Minute, "the pod gone and its job ended", s.dump, func(ctx context.Context) (bool, string, error) {
		if l := s.podLogs(); strings.Contains(l, pod.Name) {
			logs = l
		}
		_, err := b.Kube.CoreV1().Pods(s.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		_, st, ok := s.onlyJob(ctx)
		if !ok {
			return false, st, nil
		}
		state = st
		return err != nil && strings.HasPrefix(state, "completed/"), fmt.Sprintf("pod: %v; job %s", err, state), nil
	})
	jobLog, err := s.jobLog(ctx, jobID)
	require.NoError(t, err)
	t.Logf("deleted mid-step: pod gone and job %s %s after the delete; the runner's last log lines:\n%s\nthe job's log:\n%s",
		state, time.Since(deleted).Round(time.Second), e2e.Redact(e2e.Tail(logs, 25)), e2e.Tail(jobLog, 15))
	require.Equal(t, "completed/success", state, "the runner finished its job within the grace, as the docs promise")
	require.Contains(t, jobLog, "step finished", "the step ran to its end")
}
