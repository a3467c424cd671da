package scaler

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// Gitea removes an ephemeral runner's registration once its task is done,
// so a runner Job that completed while its registration is still listed
// ran no job: its pod ended by itself before the runner took one (in the
// DinD images, s6 stops the pod with exit 0 when the Docker daemon dies).
// Without a word, every pass would start another runner for the same job,
// for ever. The group says so, once per such runner, and the registration,
// which no runner will ever use, is removed.
func TestARunnerJobThatCompletedWithoutTakingAJobIsReported(t *testing.T) {
	tests := []struct {
		name string
		// cond is the ended Job's condition; reg what Gitea lists of its
		// runner: "idle", "busy", "running" (an in_progress job names it),
		// "persistent" (not ephemeral) or "" (none).
		cond       batchv1.JobConditionType
		reg        string
		wantReport bool
	}{
		{"completed, registration left idle", batchv1.JobComplete, "idle", true},
		{"completed, registration gone: it ran its job", batchv1.JobComplete, "", false},
		{"completed, Gitea calls it busy", batchv1.JobComplete, "busy", false},
		{"completed, a running job names it", batchv1.JobComplete, "running", false},
		{"completed, a persistent registration", batchv1.JobComplete, "persistent", false},
		{"failed (a drain, a crash): Kubernetes says so itself", batchv1.JobFailed, "idle", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := newGroup("ci", 3)
			e, g, set := lifecycleEnv(t, rg)
			j := e.addRunner(rg, "ci-aaaaa", 1, 5*time.Minute, &corev1.PodStatus{Phase: corev1.PodSucceeded})
			e.endJob(j, tt.cond)
			name := runnerjob.RunnerNameOf(j)
			switch tt.reg {
			case "idle":
				g.register(name, false)
			case "busy":
				g.register(name, true)
				g.runners[0].Busy = true
			case "running":
				g.register(name, true)
				g.inProgress = []gitea.Job{{ID: 9, RunnerName: name}}
			case "persistent":
				g.runners = append(g.runners, gitea.Runner{ID: 99, Name: name})
			}
			before := g.names()

			e.pass(set)

			events := strings.Join(eventReasons(e), "\n")
			scaling := meta.FindStatusCondition(e.group("ci").Status.Conditions, v1alpha1.ConditionScalingActive)
			require.NotNil(t, scaling)
			if !tt.wantReport {
				assert.Equal(t, before, g.names(), "no registration removed")
				assert.NotContains(t, events, v1alpha1.ReasonRunnerEndedWithoutJob)
				assert.NotEqual(t, v1alpha1.ReasonRunnerEndedWithoutJob, scaling.Reason)
				return
			}
			assert.Empty(t, g.names(), "the registration no runner will use is removed")
			assert.Contains(t, events, "Warning RunnerEndedWithoutJob: runner Job ci-aaaaa completed without its runner taking a job")
			assert.Equal(t, metav1.ConditionFalse, scaling.Status)
			assert.Equal(t, v1alpha1.ReasonRunnerEndedWithoutJob, scaling.Reason)
			assert.Contains(t, scaling.Message, "kubectl logs job/ci-aaaaa")

			e.pass(set)
			assert.Equal(t, 1, strings.Count(strings.Join(eventReasons(e), "\n"), "RunnerEndedWithoutJob"), "said once")
		})
	}
	t.Run("a dry run says what it would remove and removes nothing", func(t *testing.T) {
		rg := newGroup("ci", 3)
		e, g, set := lifecycleEnv(t, rg)
		j := e.addRunner(rg, "ci-aaaaa", 1, 5*time.Minute, &corev1.PodStatus{Phase: corev1.PodSucceeded})
		e.endJob(j, batchv1.JobComplete)
		g.register(runnerjob.RunnerNameOf(j), false)

		e.pass(set, func(_ *Deps, c *Config) { c.DryRun = true })

		assert.Len(t, g.names(), 1)
		assert.Contains(t, e.out.String(), "would remove runner "+runnerjob.RunnerNameOf(j))
	})
}

// endJob gives a runner Job the condition that ends it.
func (e *env) endJob(j *batchv1.Job, cond batchv1.JobConditionType) {
	e.t.Helper()
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: cond, Status: corev1.ConditionTrue})
	_, err := e.kube.BatchV1().Jobs(j.Namespace).UpdateStatus(context.Background(), j, metav1.UpdateOptions{})
	require.NoError(e.t, err)
}
