//go:build e2e

// The runner lifecycle on the bed's real Gitea with Gitea's real runner: an idle
// runner whose job went away is reaped, a runner Job whose pod cannot start
// is freed with the pod's reason, and a registration whose pod was deleted
// is removed from Gitea. Each test runs the scaler's passes itself, with the
// lifecycle's timeouts set small by flags.

package lifecycle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// idleRegisteredRunner makes a group whose one runner Job registered a
// runner in Gitea that has nothing to do: its Gitea job is queued while a
// quota keeps the pod from starting, then the job goes away (its
// repository is deleted, which removes its runs as a cancel would leave
// nothing queued), then the quota is lifted. It returns the namespace, the
// runner Job and the runner's name.
func idleRegisteredRunner(b *e2e.Testbed, ctx context.Context, t *testing.T, prefix string, idle time.Duration) (string, e2e.ScopeFixture, batchv1.Job, string) {
	t.Helper()
	fx := b.NewOrgScope(ctx, t, e2e.Uniq(prefix))
	label := e2e.Uniq(prefix)
	b.QueueJobs(ctx, t, fx, "idle.yml", map[string]int{label: 1})
	ns := b.QuietNamespace(ctx, t, prefix)
	b.FaultGroup(ctx, t, ns, "idle", fx, b.Gitea.Admin.URL(), 2, label)
	b.LifecyclePass(ctx, t, ns, idle, 10*time.Minute)
	jobs, err := b.RunnerJobs(ctx, ns, "idle")
	require.NoError(t, err)
	require.Len(t, jobs, 1, "one runner Job for the one queued job")
	job := jobs[0]
	runner := runnerjob.RunnerNameOf(&job)

	require.NoError(t, b.Gitea.Admin.DeleteRepo(ctx, fx.Repo), "the job goes away before the runner can take it")
	require.NoError(t, b.Kube.CoreV1().ResourceQuotas(ns).Delete(ctx, "no-pods", metav1.DeleteOptions{}))
	e2e.WaitUntil(ctx, t, e2e.StepWait, "runner "+runner+" registered in Gitea", nil, func(ctx context.Context) (bool, string, error) {
		rs := b.OrgRunners(ctx, t, fx.Spec.Org)
		_, ok := rs[runner]
		return ok, fmt.Sprintf("runners: %v", e2e.KeysOf(rs)), nil
	})
	return ns, fx, job, runner
}

// An idle runner beyond the demand is disabled or deleted in Gitea and its
// runner Job deleted within two passes after the idle timeout.
func TestLifecycleIdleRunnerIsReaped(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 6*time.Minute)
	const idle = 20 * time.Second
	ns, fx, job, runner := idleRegisteredRunner(b, ctx, t, "e2e-idle", idle)

	time.Sleep(time.Until(job.CreationTimestamp.Add(idle)))
	var passes int
	for passes = 1; passes <= 2; passes++ {
		b.LifecyclePass(ctx, t, ns, idle, 10*time.Minute)
		jobs, err := b.RunnerJobs(ctx, ns, "idle")
		require.NoError(t, err)
		if len(jobs) == 0 {
			break
		}
	}
	require.LessOrEqual(t, passes, 2, "the idle runner Job is deleted within two passes after the idle timeout")
	r, still := b.OrgRunners(ctx, t, fx.Spec.Org)[runner]
	require.True(t, !still || r.Disabled, "the runner is deleted or disabled in Gitea: %+v", r)
	rg, err := b.Group(ctx, ns, "idle")
	require.NoError(t, err)
	require.EqualValues(t, 1, rg.Status.ReapedRunners, e2e.StatusLine(rg))
	t.Logf("idle runner %s reaped by pass %d after the %s idle timeout", runner, passes, idle)
}

// A runner Job whose pod a ResourceQuota refuses (FailedCreate) is deleted
// after the start timeout, with the pod's reason on the group, and the job
// it was for waits a back-off before its next runner.
func TestLifecycleRunnerThatNeverStartsIsFreed(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 4*time.Minute)
	fx := b.NewOrgScope(ctx, t, e2e.Uniq("e2e-stuck"))
	label := e2e.Uniq("e2e-stuck")
	b.QueueJobs(ctx, t, fx, "stuck.yml", map[string]int{label: 1})
	ns := b.QuietNamespace(ctx, t, "e2e-stuck")
	b.FaultGroup(ctx, t, ns, "stuck", fx, b.Gitea.Admin.URL(), 2, label)
	const start = 15 * time.Second

	b.LifecyclePass(ctx, t, ns, 0, start)
	jobs, err := b.RunnerJobs(ctx, ns, "stuck")
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	e2e.Eventually(ctx, t, "the Job controller's FailedCreate event", func(ctx context.Context) (bool, error) {
		evs, err := b.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
		return err == nil && len(evs.Items) > 0, err
	})
	time.Sleep(time.Until(jobs[0].CreationTimestamp.Add(start + time.Second)))

	b.LifecyclePass(ctx, t, ns, 0, start)
	left, err := b.RunnerJobs(ctx, ns, "stuck")
	require.NoError(t, err)
	require.Empty(t, e2e.JobNames(left), "the runner Job that did not start is deleted")
	rg, err := b.Group(ctx, ns, "stuck")
	require.NoError(t, err)
	sc := e2e.Condition(rg, "ScalingActive")
	require.NotNil(t, sc, e2e.StatusLine(rg))
	require.Equal(t, "RunnerStartTimeout", sc.Reason, e2e.StatusLine(rg))
	require.Contains(t, sc.Message, "FailedCreate", e2e.StatusLine(rg))
	require.Contains(t, sc.Message, "exceeded quota", e2e.StatusLine(rg))
	require.EqualValues(t, 1, rg.Status.StuckRunners)
	evs, err := b.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=RunnerStartTimeout"})
	require.NoError(t, err)
	require.Len(t, evs.Items, 1)
	require.Equal(t, corev1.EventTypeWarning, evs.Items[0].Type)

	b.LifecyclePass(ctx, t, ns, 0, start)
	left, err = b.RunnerJobs(ctx, ns, "stuck")
	require.NoError(t, err)
	require.Empty(t, e2e.JobNames(left), "the job's next runner waits for the back-off (the spawn TTL)")
}

// A registered runner whose pod was deleted with its Job is removed from
// Gitea once Gitea shows it offline.
func TestLifecycleOrphanRegistrationIsRemoved(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 6*time.Minute)
	ns, fx, job, runner := idleRegisteredRunner(b, ctx, t, "e2e-orphan", time.Hour)
	// A pass that lists the Job drops its claim: until then the claim
	// says the Job may be on its way, and its registration is kept for
	// the spawn TTL (TestARegistrationWhoseJobARacingPassIsCreatingIsKept).
	b.LifecyclePass(ctx, t, ns, time.Hour, 10*time.Minute)

	bg := metav1.DeletePropagationBackground
	require.NoError(t, b.Kube.BatchV1().Jobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &bg}))
	passUntilRunnerRemoved(b, ctx, t, ns, fx.Spec.Org, runner, 4*time.Minute, "runner "+runner+" removed from Gitea")
	require.Contains(t, b.ReapedMessages(ctx, t, ns), "Removed runner "+runner+" from Gitea")
}

// passUntilRunnerRemoved runs lifecycle passes over ns (an hour's idle
// timeout) until the org's runner is no longer registered in Gitea.
func passUntilRunnerRemoved(b *e2e.Testbed, ctx context.Context, t *testing.T, ns, org, runner string, timeout time.Duration, what string) {
	t.Helper()
	e2e.WaitUntil(ctx, t, timeout, what, nil, func(ctx context.Context) (bool, string, error) {
		b.LifecyclePass(ctx, t, ns, time.Hour, 10*time.Minute)
		r, ok := b.OrgRunners(ctx, t, org)[runner]
		return !ok, fmt.Sprintf("runner %+v", r), nil
	})
}
