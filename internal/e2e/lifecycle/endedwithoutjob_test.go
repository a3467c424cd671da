//go:build e2e

package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// A runner pod that ends by itself before its runner takes a job (in the
// DinD images s6 ends the pod with exit code 0 when the Docker daemon
// dies) would have the group start another runner every pass without a
// word. Gitea removes an ephemeral runner's registration once its task is
// done, so the registration left by a completed runner Job tells it. Here
// the scaler registers a warm runner whose container runs Gitea's real
// runner binary only to print its version and exit, and the group says so;
// beside it a runner that ran its job to the end is not taken for one.
func TestARunnerThatEndsWithoutTakingAJobIsReported(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 5*time.Minute)
	fx := b.NewOrgScope(ctx, t, e2e.Uniq("e2e-unused"))
	ns := b.Namespace(ctx, t, "e2e-unused", nil)

	ranLabel := e2e.Uniq("e2e-ran")
	b.QueueJobs(ctx, t, fx, "ran.yml", map[string]int{ranLabel: 1})
	b.FaultGroup(ctx, t, ns, "ran", fx, b.Gitea.Admin.URL(), 1, ranLabel)

	spec := b.GroupSpec(fx, e2e.GroupSecret("ran"), 1, e2e.Uniq("e2e-nojob"))
	spec.MinIdleRunners = 1
	spec.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name:    runnerjob.ContainerName,
		Command: []string{"gitea-runner", "--version"},
	}}}}
	b.CreateGroup(ctx, t, ns, "exits", nil, spec)

	b.LifecyclePass(ctx, t, ns, 10*time.Minute, 10*time.Minute)
	ran := completedRunnerJob(ctx, t, b, ns, "ran")
	exited := completedRunnerJob(ctx, t, b, ns, "exits")
	exitedRunner := runnerjob.RunnerNameOf(&exited)
	require.Contains(t, b.OrgRunners(ctx, t, fx.Spec.Org), exitedRunner, "the runner that exited left its registration")
	require.NotContains(t, b.OrgRunners(ctx, t, fx.Spec.Org), runnerjob.RunnerNameOf(&ran), "Gitea removed the registration of the runner that ran its job")

	b.LifecyclePass(ctx, t, ns, 10*time.Minute, 10*time.Minute)

	reported := endedWithoutJobMessages(ctx, t, b, ns)
	require.Contains(t, reported, "runner Job "+exited.Name+" completed without its runner taking a job")
	require.NotContains(t, reported, ran.Name, "the runner that ran its job is not reported")
	require.NotContains(t, b.OrgRunners(ctx, t, fx.Spec.Org), exitedRunner, "the registration no runner will use is removed")
	for group, want := range map[string]string{"exits": v1alpha1.ReasonRunnerEndedWithoutJob, "ran": v1alpha1.ReasonScaling} {
		rg, err := b.Group(ctx, ns, group)
		require.NoError(t, err)
		c := meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionScalingActive)
		require.NotNil(t, c, group)
		require.Equal(t, want, c.Reason, "group %s: %s", group, c.Message)
	}
}

// completedRunnerJob waits for the group's one runner Job to complete and
// returns it.
func completedRunnerJob(ctx context.Context, t *testing.T, b *e2e.Testbed, ns, group string) batchv1.Job {
	t.Helper()
	var done batchv1.Job
	e2e.WaitUntil(ctx, t, e2e.StepWait, "a completed runner Job of group "+group, nil, func(ctx context.Context) (bool, string, error) {
		jobs, err := b.RunnerJobs(ctx, ns, group)
		if err != nil {
			return false, "", err
		}
		for _, j := range jobs {
			if runnerjob.Completed(&j) {
				done = j
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d runner Jobs, none completed", len(jobs)), nil
	})
	return done
}

// endedWithoutJobMessages are the messages of ns's RunnerEndedWithoutJob
// events, a line each.
func endedWithoutJobMessages(ctx context.Context, t *testing.T, b *e2e.Testbed, ns string) string {
	t.Helper()
	evs, err := b.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + v1alpha1.ReasonRunnerEndedWithoutJob})
	require.NoError(t, err)
	var out []string
	for _, ev := range evs.Items {
		out = append(out, ev.Message)
	}
	return strings.Join(out, "\n")
}
