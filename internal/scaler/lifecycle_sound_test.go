package scaler

import (
	"cmp"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// TestTheReaperDeletesNothingItCannotConfirmIdle: the pass's own listing of
// Gitea's jobs may have missed the job a runner runs (a listing of several
// pages skips a job when another ends between pages); the reaper and the
// orphan removal delete only on the sound confirmation (InProgress), and
// any doubt keeps the runner.
func TestTheReaperDeletesNothingItCannotConfirmIdle(t *testing.T) {
	tests := []struct {
		name  string
		setup func(g *runnersGitea, runner string)
	}{
		{name: "the pass's listing missed the job the runner runs; the confirmation has it", setup: func(g *runnersGitea, runner string) {
			g.inProgress = []gitea.Job{{ID: 9, RunnerName: runner}}
		}},
		{name: "the confirmation does not settle", setup: func(g *runnersGitea, _ string) {
			g.inProgressErr = gitea.ErrUnsettled
		}},
		{name: "the confirmation fails half-way or over the body bound", setup: func(g *runnersGitea, _ string) {
			g.inProgressErr = &gitea.APIError{Kind: gitea.ErrBadResponse, URL: "/api/v1/orgs/acme/actions/jobs?page=2", Message: "body over 2097152 bytes"}
		}},
	}
	for _, tt := range tests {
		t.Run("idle runner: "+tt.name, func(t *testing.T) {
			rg := newGroup("ci", 3)
			e, g, set := lifecycleEnv(t, rg)
			j := e.addRunner(rg, "ci-aaaaa", 1, 20*time.Minute, podRunning)
			g.register(runnerjob.RunnerNameOf(j), true)
			tt.setup(g, runnerjob.RunnerNameOf(j))

			e.pass(set)

			assert.Equal(t, []string{"ci-aaaaa"}, jobNamesOf(e), "the runner Job is kept")
			assert.Equal(t, []string{runnerjob.RunnerNameOf(j)}, g.names(), "and its registration")
			assert.Zero(t, e.group("ci").Status.ReapedRunners)
		})
		t.Run("orphan registration: "+tt.name, func(t *testing.T) {
			rg := newGroup("ci", 3)
			e, g, set := lifecycleEnv(t, rg)
			orphan := runnerjob.RunnerName(rg, "ci-gone1")
			g.register(orphan, false)
			tt.setup(g, orphan)

			e.pass(set)

			assert.Equal(t, []string{orphan}, g.names(), "the registration is kept")
		})
	}
}

// TestAnInterruptedReapStrandsNothing: a reap that stopped after the
// disable (or, on a Gitea without the disable endpoint, after deleting the
// registration) leaves a runner that can take no work. It is not supply,
// so a queued job gets a runner, and the next pass reaps it.
func TestAnInterruptedReapStrandsNothing(t *testing.T) {
	tests := []struct {
		name string
		// age of the runner Job; registered and disabled say what Gitea
		// holds of its runner; running says it runs a Gitea job.
		age                  time.Duration
		registered, disabled bool
		running              bool
		// runningFor is how long its runner container runs (default: as
		// long as the Job exists, less a minute).
		runningFor  time.Duration
		wantCreated int
		wantKept    bool
	}{
		{name: "left disabled: a new runner for the queued job, and the disabled one reaped",
			age: 20 * time.Minute, registered: true, disabled: true, wantCreated: 1},
		{name: "registration deleted (no disable endpoint), started long ago: a new runner, and the unregistered one reaped",
			age: 20 * time.Minute, wantCreated: 1},
		{name: "started and not registered yet, within the start timeout: it will take the job",
			age: 2 * time.Minute, wantCreated: 0, wantKept: true},
		{name: "not registered, its runner container started just now (restarted): it will register",
			age: 20 * time.Minute, runningFor: 10 * time.Second, wantCreated: 0, wantKept: true},
		{name: "left disabled while it runs a job: left alone, it exits after the job",
			age: 20 * time.Minute, registered: true, disabled: true, running: true, wantCreated: 1, wantKept: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := newGroup("ci", 3)
			e, g, set := lifecycleEnv(t, rg)
			runningFor := cmp.Or(tt.runningFor, tt.age-time.Minute)
			j := e.addRunner(rg, "ci-aaaaa", 7, tt.age, runnerRunningSince(t0.Add(-runningFor)))
			name := runnerjob.RunnerNameOf(j)
			if tt.registered {
				g.register(name, true)
				g.runners[0].Disabled = tt.disabled
			}
			e.gitea.snap.Queued = []gitea.Job{queued(1, "ubuntu-latest")}
			if tt.running {
				e.gitea.snap.Running = []gitea.Job{{ID: 7, RunnerName: name}}
			}

			sum := e.pass(set)

			assert.Equal(t, tt.wantCreated, sum.Created)
			if tt.wantKept {
				assert.Contains(t, jobNamesOf(e), "ci-aaaaa")
				return
			}
			assert.NotContains(t, jobNamesOf(e), "ci-aaaaa", "reaped")
			assert.NotContains(t, g.names(), name, "with its registration")
			assert.Contains(t, g.calls, "confirm", "after the confirmation")
		})
	}
}

// TestAStuckRunnerIsCheckedAgainJustBeforeItIsDeleted: the pass decides
// on pods, registrations and running jobs it read before it served any
// group; a runner whose pod started since has registered and may have
// taken its job. It is deleted only when every fresh reading says it has
// not started, with --runner-idle-timeout 0 as well.
func TestAStuckRunnerIsCheckedAgainJustBeforeItIsDeleted(t *testing.T) {
	type change func(t *testing.T, e *env, g *runnersGitea, j *batchv1.Job)
	podStarted := func(t *testing.T, e *env, _ *runnersGitea, j *batchv1.Job) {
		e.gitea.barrier = func() {
			p, err := e.kube.CoreV1().Pods(ns).Get(context.Background(), j.Name+"-pod", metav1.GetOptions{})
			require.NoError(t, err)
			p.Status = *podRunning
			_, err = e.kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
	}
	jobReady := func(t *testing.T, e *env, _ *runnersGitea, j *batchv1.Job) {
		e.gitea.barrier = func() {
			cur, err := e.kube.BatchV1().Jobs(ns).Get(context.Background(), j.Name, metav1.GetOptions{})
			require.NoError(t, err)
			cur.Status.Ready = ptr.To[int32](1)
			_, err = e.kube.BatchV1().Jobs(ns).UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
	}
	registeredLate := func(_ *testing.T, _ *env, g *runnersGitea, j *batchv1.Job) {
		// After the pass's own listing, if it makes one: Gitea has it by
		// the time the runner Job is read again.
		g.onList = func(n int) {
			if n == g.freshList {
				g.register(runnerjob.RunnerNameOf(j), true)
			}
		}
	}
	runsItsJob := func(_ *testing.T, _ *env, g *runnersGitea, j *batchv1.Job) {
		g.inProgress = []gitea.Job{{ID: 1, RunnerName: runnerjob.RunnerNameOf(j)}}
	}
	confirmFails := func(_ *testing.T, _ *env, g *runnersGitea, _ *batchv1.Job) {
		g.inProgressErr = gitea.ErrUnsettled
	}
	tests := []struct {
		name       string
		change     change
		wantDelete bool
	}{
		{name: "nothing changed: deleted", change: func(*testing.T, *env, *runnersGitea, *batchv1.Job) {}, wantDelete: true},
		{name: "its pod started since the pass read the pods", change: podStarted},
		{name: "the Job says a pod is ready", change: jobReady},
		{name: "it registered with Gitea since", change: registeredLate},
		{name: "Gitea shows it running its job", change: runsItsJob},
		{name: "which jobs run is not known", change: confirmFails},
	}
	for _, idleTimeout := range []time.Duration{10 * time.Minute, 0} {
		for _, tt := range tests {
			t.Run(tt.name+", idle timeout "+idleTimeout.String(), func(t *testing.T) {
				rg := newGroup("ci", 3)
				e, g, set := lifecycleEnv(t, rg)
				g.freshList = 1
				if idleTimeout > 0 {
					g.freshList = 2
				}
				j := e.addRunner(rg, "ci-aaaaa", 1, 11*time.Minute, podPullError)
				e.gitea.snap.Queued = []gitea.Job{queued(1, "ubuntu-latest")}
				tt.change(t, e, g, j)

				e.pass(set, func(_ *Deps, c *Config) { c.RunnerIdleTimeout = idleTimeout })

				if tt.wantDelete {
					assert.Empty(t, jobNamesOf(e))
					assert.EqualValues(t, 1, e.group("ci").Status.StuckRunners)
					return
				}
				assert.Equal(t, []string{"ci-aaaaa"}, jobNamesOf(e), "kept")
				assert.Zero(t, e.group("ci").Status.StuckRunners)
			})
		}
	}
}

// runnerRunningSince is a running runner pod whose runner container
// started at since.
func runnerRunningSince(since time.Time) *corev1.PodStatus {
	return &corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
		{Name: runnerjob.ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(since)}}},
	}}
}

// podWithSidecar is a runner pod whose runner container has ended after
// its job while a regular sidecar (docker:dind) keeps the pod Running.
var podWithSidecar = &corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
	{Name: runnerjob.ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}},
	{Name: "dind", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
}}

// TestASpentRunnerIsJudgedByItsRunnerContainer: a runner is judged by its
// runner container, not by the pod's phase.
func TestASpentRunnerIsJudgedByItsRunnerContainer(t *testing.T) {
	rg := newGroup("ci", 3)
	e, _, set := lifecycleEnv(t, rg)
	e.addRunner(rg, "ci-aaaaa", 1, 20*time.Minute, podWithSidecar)
	e.gitea.snap.Queued = []gitea.Job{queued(2, "ubuntu-latest")}

	sum := e.pass(set)

	assert.Equal(t, 1, sum.Created, "the spent runner is no supply: the queued job gets a runner")
	assert.NotContains(t, jobNamesOf(e), "ci-aaaaa", "and the spent runner's Job is deleted, ending its sidecar")
	assert.Zero(t, e.group("ci").Status.IdleRunners)
}

// A pod whose only container has just ended still shows Running until
// the kubelet's next status update: that runner is finishing, not kept up
// by a sidecar, and its Job, about to complete, is left alone (deleting it
// would race the Job controller and lose the Job's Complete condition).
func TestARunnerWhosePodPhaseLagsIsNotSpent(t *testing.T) {
	rg := newGroup("ci", 3)
	e, _, set := lifecycleEnv(t, rg)
	e.addRunner(rg, "ci-aaaaa", 1, 20*time.Minute, &corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
		{Name: runnerjob.ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}},
	}})

	e.pass(set)

	assert.Contains(t, jobNamesOf(e), "ci-aaaaa", "a runner Job whose pod is about to succeed is not deleted")
	assert.Zero(t, e.group("ci").Status.ReapedRunners)
}

// TestTheWarmPoolKeepsItsReadyRunner: the warm pool's only ready runner is
// kept while another is still starting.
func TestTheWarmPoolKeepsItsReadyRunner(t *testing.T) {
	rg := newGroup("ci", 3)
	rg.Spec.MinIdleRunners = 1
	e, g, set := lifecycleEnv(t, rg)
	ready := e.addRunner(rg, "ci-aaaaa", 0, 20*time.Minute, podRunning)
	g.register(runnerjob.RunnerNameOf(ready), true)
	e.addRunner(rg, "ci-bbbbb", 0, 2*time.Minute, podPullError)

	e.pass(set)

	assert.Contains(t, jobNamesOf(e), "ci-aaaaa", "the ready runner is kept")
	assert.Zero(t, e.group("ci").Status.ReapedRunners)
}

// TestRunnerCountsAreNeverAFalseZero: a runners listing that fails does
// not make the status say 0 idle and 0 starting runners; a pods listing
// that fails leaves the counts as they were (not known in this pass).
func TestRunnerCountsAreNeverAFalseZero(t *testing.T) {
	t.Run("runners listing fails: the counts come from the pods", func(t *testing.T) {
		rg := newGroup("ci", 3)
		e, g, set := lifecycleEnv(t, rg)
		e.addRunner(rg, "ci-aaaaa", 1, 20*time.Minute, podRunning)
		e.addRunner(rg, "ci-bbbbb", 2, 2*time.Minute, podPullError)
		e.gitea.snap.Queued = []gitea.Job{queued(1, "ubuntu-latest"), queued(2, "ubuntu-latest")}
		g.listErr = &gitea.APIError{Kind: gitea.ErrServer, Status: 500, URL: "/api/v1/orgs/acme/actions/runners"}

		e.pass(set)

		st := e.group("ci").Status
		assert.EqualValues(t, 1, st.IdleRunners)
		assert.EqualValues(t, 1, st.StartingRunners)
		ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
		require.NotNil(t, ready)
		assert.Equal(t, v1alpha1.ReasonRunnerReapFailed, ready.Reason)
	})
	t.Run("pods listing fails: the counts keep their last value", func(t *testing.T) {
		rg := newGroup("ci", 3)
		rg.Status.IdleRunners, rg.Status.StartingRunners = 2, 1
		e, _, set := lifecycleEnv(t, rg)
		e.addRunner(rg, "ci-aaaaa", 1, 20*time.Minute, podRunning)
		e.kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("etcd is down")
		})

		e.pass(set)

		st := e.group("ci").Status
		assert.EqualValues(t, 2, st.IdleRunners)
		assert.EqualValues(t, 1, st.StartingRunners)
	})
}
