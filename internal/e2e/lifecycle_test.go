//go:build e2e

// The runner lifecycle on the bed's real Gitea with Gitea's real runner: an idle
// runner whose job went away is reaped, a runner Job whose pod cannot start
// is freed with the pod's reason, and a registration whose pod was deleted
// is removed from Gitea. Each test runs the scaler's passes itself, with the
// lifecycle's timeouts set small by flags.

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// lifecyclePass runs one pass over ns with the lifecycle's timeouts.
func (b *bed) lifecyclePass(ctx context.Context, t *testing.T, ns string, idle, start time.Duration) passResult {
	t.Helper()
	r := b.pass(ctx, t, passOpts{namespaces: []string{ns}, args: []string{
		"--runner-idle-timeout", idle.String(), "--runner-start-timeout", start.String()}})
	requireSanePass(t, r, "lifecycle pass")
	return r
}

// orgRunners lists the org's runners registered in Gitea, by name.
func (b *bed) orgRunners(ctx context.Context, t *testing.T, org string) map[string]gitea.Runner {
	t.Helper()
	c, err := gitea.NewClient(b.gitea.admin.URL(), b.gitea.adminToken, gitea.Options{})
	require.NoError(t, err)
	list, err := c.(gitea.Runners).ListRunners(ctx, scope.New("", gitea.ScopeOrg, org, ""))
	require.NoError(t, err)
	out := map[string]gitea.Runner{}
	for _, r := range list {
		out[r.Name] = r
	}
	return out
}

// idleRegisteredRunner makes a group whose one runner Job registered a
// runner in Gitea that has nothing to do: its Gitea job is queued while a
// quota keeps the pod from starting, then the job goes away (its
// repository is deleted, which removes its runs as a cancel would leave
// nothing queued), then the quota is lifted. It returns the namespace, the
// runner Job and the runner's name.
func (b *bed) idleRegisteredRunner(ctx context.Context, t *testing.T, prefix string, idle time.Duration) (string, scopeFixture, batchv1.Job, string) {
	t.Helper()
	fx := b.newOrgScope(ctx, t, uniq(prefix))
	label := uniq(prefix)
	b.queueJobs(ctx, t, fx, "idle.yml", map[string]int{label: 1})
	ns := b.quietNamespace(ctx, t, prefix)
	b.faultGroup(ctx, t, ns, "idle", fx, b.gitea.admin.URL(), 2, label)
	b.lifecyclePass(ctx, t, ns, idle, 10*time.Minute)
	jobs, err := b.runnerJobs(ctx, ns, "idle")
	require.NoError(t, err)
	require.Len(t, jobs, 1, "one runner Job for the one queued job")
	job := jobs[0]
	runner := runnerjob.RunnerNameOf(&job)

	require.NoError(t, b.gitea.admin.DeleteRepo(ctx, fx.repo), "the job goes away before the runner can take it")
	require.NoError(t, b.kube.CoreV1().ResourceQuotas(ns).Delete(ctx, "no-pods", metav1.DeleteOptions{}))
	waitUntil(ctx, t, stepWait, "runner "+runner+" registered in Gitea", nil, func(ctx context.Context) (bool, string, error) {
		rs := b.orgRunners(ctx, t, fx.spec.Org)
		_, ok := rs[runner]
		return ok, fmt.Sprintf("runners: %v", keysOf(rs)), nil
	})
	return ns, fx, job, runner
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// An idle runner beyond the demand is disabled or deleted in Gitea and its
// runner Job deleted within two passes after the idle timeout.
func TestLifecycleIdleRunnerIsReaped(t *testing.T) {
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 6*time.Minute)
	const idle = 20 * time.Second
	ns, fx, job, runner := b.idleRegisteredRunner(ctx, t, "e2e-idle", idle)

	time.Sleep(time.Until(job.CreationTimestamp.Add(idle)))
	var passes int
	for passes = 1; passes <= 2; passes++ {
		b.lifecyclePass(ctx, t, ns, idle, 10*time.Minute)
		jobs, err := b.runnerJobs(ctx, ns, "idle")
		require.NoError(t, err)
		if len(jobs) == 0 {
			break
		}
	}
	require.LessOrEqual(t, passes, 2, "the idle runner Job is deleted within two passes after the idle timeout")
	r, still := b.orgRunners(ctx, t, fx.spec.Org)[runner]
	require.True(t, !still || r.Disabled, "the runner is deleted or disabled in Gitea: %+v", r)
	rg, err := b.group(ctx, ns, "idle")
	require.NoError(t, err)
	require.EqualValues(t, 1, rg.Status.ReapedRunners, statusLine(rg))
	t.Logf("idle runner %s reaped by pass %d after the %s idle timeout", runner, passes, idle)
}

// A runner Job whose pod a ResourceQuota refuses (FailedCreate) is deleted
// after the start timeout, with the pod's reason on the group, and the job
// it was for waits a back-off before its next runner.
func TestLifecycleRunnerThatNeverStartsIsFreed(t *testing.T) {
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 4*time.Minute)
	fx := b.newOrgScope(ctx, t, uniq("e2e-stuck"))
	label := uniq("e2e-stuck")
	b.queueJobs(ctx, t, fx, "stuck.yml", map[string]int{label: 1})
	ns := b.quietNamespace(ctx, t, "e2e-stuck")
	b.faultGroup(ctx, t, ns, "stuck", fx, b.gitea.admin.URL(), 2, label)
	const start = 15 * time.Second

	b.lifecyclePass(ctx, t, ns, 0, start)
	jobs, err := b.runnerJobs(ctx, ns, "stuck")
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	eventually(ctx, t, "the Job controller's FailedCreate event", func(ctx context.Context) (bool, error) {
		evs, err := b.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
		return err == nil && len(evs.Items) > 0, err
	})
	time.Sleep(time.Until(jobs[0].CreationTimestamp.Add(start + time.Second)))

	b.lifecyclePass(ctx, t, ns, 0, start)
	left, err := b.runnerJobs(ctx, ns, "stuck")
	require.NoError(t, err)
	require.Empty(t, jobNames(left), "the runner Job that did not start is deleted")
	rg, err := b.group(ctx, ns, "stuck")
	require.NoError(t, err)
	sc := condition(rg, "ScalingActive")
	require.NotNil(t, sc, statusLine(rg))
	require.Equal(t, "RunnerStartTimeout", sc.Reason, statusLine(rg))
	require.Contains(t, sc.Message, "FailedCreate", statusLine(rg))
	require.Contains(t, sc.Message, "exceeded quota", statusLine(rg))
	require.EqualValues(t, 1, rg.Status.StuckRunners)
	evs, err := b.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=RunnerStartTimeout"})
	require.NoError(t, err)
	require.Len(t, evs.Items, 1)
	require.Equal(t, corev1.EventTypeWarning, evs.Items[0].Type)

	b.lifecyclePass(ctx, t, ns, 0, start)
	left, err = b.runnerJobs(ctx, ns, "stuck")
	require.NoError(t, err)
	require.Empty(t, jobNames(left), "the job's next runner waits for the back-off (the spawn TTL)")
}

// A registered runner whose pod was deleted with its Job is removed from
// Gitea once Gitea shows it offline.
func TestLifecycleOrphanRegistrationIsRemoved(t *testing.T) {
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 6*time.Minute)
	ns, fx, job, runner := b.idleRegisteredRunner(ctx, t, "e2e-orphan", time.Hour)

	bg := metav1.DeletePropagationBackground
	require.NoError(t, b.kube.BatchV1().Jobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &bg}))
	b.passUntilRunnerRemoved(ctx, t, ns, fx.spec.Org, runner, 4*time.Minute, "runner "+runner+" removed from Gitea")
	require.Contains(t, b.reapedMessages(ctx, t, ns), "Removed runner "+runner+" from Gitea")
}

// passUntilRunnerRemoved runs lifecycle passes over ns (an hour's idle
// timeout) until the org's runner is no longer registered in Gitea.
func (b *bed) passUntilRunnerRemoved(ctx context.Context, t *testing.T, ns, org, runner string, timeout time.Duration, what string) {
	t.Helper()
	waitUntil(ctx, t, timeout, what, nil, func(ctx context.Context) (bool, string, error) {
		b.lifecyclePass(ctx, t, ns, time.Hour, 10*time.Minute)
		r, ok := b.orgRunners(ctx, t, org)[runner]
		return !ok, fmt.Sprintf("runner %+v", r), nil
	})
}

// reapedMessages are the messages of ns's RunnerReaped events, a line each.
func (b *bed) reapedMessages(ctx context.Context, t *testing.T, ns string) string {
	t.Helper()
	evs, err := b.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=RunnerReaped"})
	require.NoError(t, err)
	var said []string
	for _, ev := range evs.Items {
		said = append(said, ev.Message)
	}
	return strings.Join(said, "\n")
}
