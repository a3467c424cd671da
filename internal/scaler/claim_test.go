package scaler

import (
	"context"
	"sync"
	"sync/atomic"
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
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

func TestMaxActiveRunnersHolds(t *testing.T) {
	rg := newGroup("ci", 2)
	e := newEnv(t, rg)
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest"), queued(2, "ubuntu-latest"), queued(3, "ubuntu-latest")}}

	e.pass()
	assert.Equal(t, map[int64]int{1: 1, 2: 1}, e.giteaJobsServed())
	scaling := meta.FindStatusCondition(e.group("ci").Status.Conditions, v1alpha1.ConditionScalingActive)
	require.NotNil(t, scaling)
	assert.Equal(t, v1alpha1.ReasonAtCapacity, scaling.Reason)

	// Job 1's runner finishes and Gitea moves job 1 on: the freed slot
	// goes to job 3 in the next pass.
	for _, j := range e.jobs() {
		if j.Labels[v1alpha1.LabelGiteaJobID] == "1" {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
			_, err := e.kube.BatchV1().Jobs(ns).UpdateStatus(context.Background(), &j, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
	}
	e.gitea.snap.Queued = []gitea.Job{queued(2, "ubuntu-latest"), queued(3, "ubuntu-latest")}
	e.pass()
	assert.Equal(t, map[int64]int{1: 1, 2: 1, 3: 1}, e.giteaJobsServed())
	assert.NotContains(t, e.claims("ci"), int64(1), "the claim of a job no longer queued is dropped")
	assert.EqualValues(t, 2, e.group("ci").Status.ActiveRunners)
}

// Regression (found end to end): Gitea gave the runner started for job 1
// an older queued job, so job 1 stayed queued for a whole spawn TTL while a
// slot was free. A claim whose runner runs another job is spent.
func TestClaimSpentOnAnotherJobIsServedAgainAtOnce(t *testing.T) {
	rg := newGroup("ci", 2)
	e := newEnv(t, rg)
	e.addJob(rg, "ci-abcde", 1, t0)
	e.cms.write(t, e.kube, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: state.ConfigMapName("ci"), Namespace: ns,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "gitea.bpg.pw/v1alpha1", Kind: "RunnerGroup", Name: "ci", UID: rg.UID}}},
		Data: state.Encode(state.Claims{1: {ClaimedAt: t0, JobName: "ci-abcde"}}),
	})
	e.gitea.snap = gitea.Snapshot{
		Queued:  []gitea.Job{queued(1, "ubuntu-latest")},
		Running: []gitea.Job{{ID: 2, RunnerName: runnerjob.RunnerName(rg, "ci-abcde")}},
	}

	sum := e.pass()

	assert.Equal(t, 1, sum.Created)
	assert.Equal(t, map[int64]int{1: 2}, e.giteaJobsServed(), "a second runner for job 1: the first one is busy with job 2")
	assert.NotEqual(t, "ci-abcde", e.claims("ci")[1].JobName)
	assert.EqualValues(t, 1, e.group("ci").Status.RunningJobs)
}

// Untrusted state (garbage, its key gone, or the ConfigMap deleted after the
// group was served) is rebuilt from the Jobs, and the pass that finds it
// creates nothing: a pass creating runners right now wrote claims it can no
// longer see. The next pass serves what is still missing, once.
func TestUntrustedStateIsRebuiltAndNothingIsServedTwice(t *testing.T) {
	owner := func(rg *v1alpha1.RunnerGroup) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "gitea.bpg.pw/v1alpha1", Kind: "RunnerGroup", Name: rg.Name, UID: rg.UID}}
	}
	tests := []struct {
		name  string
		spoil func(e *env, rg *v1alpha1.RunnerGroup)
	}{
		{"garbage", func(e *env, rg *v1alpha1.RunnerGroup) {
			e.cms.write(e.t.(*testing.T), e.kube, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: state.ConfigMapName("ci"), Namespace: ns, OwnerReferences: owner(rg)},
				Data: map[string]string{state.DataKey: "}}garbage{{"}})
		}},
		{"its key removed", func(e *env, rg *v1alpha1.RunnerGroup) {
			e.cms.write(e.t.(*testing.T), e.kube, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: state.ConfigMapName("ci"), Namespace: ns, OwnerReferences: owner(rg)}})
		}},
		{"deleted", func(e *env, rg *v1alpha1.RunnerGroup) {
			require.NoError(e.t, e.kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), state.ConfigMapName("ci"), metav1.DeleteOptions{}))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := newGroup("ci", 5)
			e := newEnv(t, rg)
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
			require.Equal(t, 1, e.pass().Created, "the first pass of a new group serves at once")
			tt.spoil(e, rg)
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest"), queued(2, "ubuntu-latest")}}

			sum := e.pass()
			assert.NoError(t, sum.Err())
			assert.Zero(t, sum.Created, "the pass that finds the state untrusted creates nothing")
			assert.Equal(t, map[int64]int{1: 1}, e.giteaJobsServed())
			assert.Empty(t, e.claims("ci"), "the rebuilt state is readable again")
			var rebuilt bool
			for _, ev := range e.events() {
				rebuilt = rebuilt || ev.Reason == v1alpha1.ReasonStateRebuilt
			}
			assert.True(t, rebuilt, "a StateRebuilt event says what happened")

			sum = e.pass()
			assert.Equal(t, 1, sum.Created, "the next pass serves the job still missing a runner")
			assert.Equal(t, map[int64]int{1: 1, 2: 1}, e.giteaJobsServed())
			assert.Zero(t, e.pass().Created, "and then nothing more")
		})
	}
}

func TestStateConfigMapOfSomeoneElseIsLeftAlone(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	e.cms.write(t, e.kube, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: state.ConfigMapName("ci"), Namespace: ns},
		Data:       map[string]string{"theirs": "data"},
	})
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}

	sum := e.pass()

	assert.Equal(t, []string{"runners/ci"}, sum.Failed)
	assert.Empty(t, e.jobs())
	cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), state.ConfigMapName("ci"), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"theirs": "data"}, cm.Data)
	assert.Equal(t, v1alpha1.ReasonStateNotOwned, meta.FindStatusCondition(e.group("ci").Status.Conditions, v1alpha1.ConditionReady).Reason)
}

// Another pass claims job 1 between this pass's read and write of the
// state: this pass must lose the write, re-read, and neither serve job 1
// again nor exceed maxActiveRunners with the other pass's claim counted.
func TestConflictInTheMiddleOfAPassReplans(t *testing.T) {
	rg := newGroup("ci", 2)
	e := newEnv(t, rg)
	e.pass() // creates the (empty) state ConfigMap
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest"), queued(2, "ubuntu-latest"), queued(3, "ubuntu-latest")}}
	e.cms.beforeUpdate = func(*corev1.ConfigMap) {
		cm, err := e.kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("configmaps"), ns, state.ConfigMapName("ci"))
		require.NoError(t, err)
		other := cm.(*corev1.ConfigMap).DeepCopy()
		other.Data = state.Encode(state.Claims{1: {ClaimedAt: t0, JobName: "ci-other"}})
		e.cms.write(t, e.kube, other)
	}

	sum := e.pass()

	assert.NoError(t, sum.Err())
	assert.Equal(t, map[int64]int{2: 1}, e.giteaJobsServed(), "job 1 is the other pass's; one slot was left")
	claims := e.claims("ci")
	assert.Equal(t, "ci-other", claims[1].JobName)
	assert.Contains(t, claims, int64(2))
	assert.NotContains(t, claims, int64(3))
	assert.Contains(t, e.logs.String(), "planning again")
}

// Two passes (the CronJob's and a manual one) run at once against the same
// group, and both have read the state before either writes it: one must
// lose the write, re-plan with the other's claims, and start nothing twice.
func TestRacingPassesStartNoDuplicate(t *testing.T) {
	for _, max := range []int32{2, 10} {
		e := newEnv(t, newGroup("ci", max))
		e.pass()
		e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest"), queued(2, "ubuntu-latest"), queued(3, "ubuntu-latest")}}
		var arrived sync.WaitGroup
		arrived.Add(2)
		var calls atomic.Int32
		var timedOut atomic.Bool
		e.gitea.barrier = func() {
			if calls.Add(1) > 2 {
				return // re-plans after the conflict go straight through
			}
			arrived.Done()
			done := make(chan struct{})
			go func() { arrived.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				timedOut.Store(true)
			}
		}

		var wg sync.WaitGroup
		sums := make([]passreport.Summary, 2)
		for i := range 2 {
			wg.Go(func() {
				s, err := e.scaler().Pass(context.Background())
				assert.NoError(t, err)
				sums[i] = s
			})
		}
		wg.Wait()

		require.False(t, timedOut.Load(), "both passes must have read the state before either wrote it")
		for id, n := range e.giteaJobsServed() {
			assert.Equal(t, 1, n, "max %d: Gitea job %d got %d runners", max, id, n)
		}
		assert.LessOrEqual(t, len(e.jobs()), int(max), "max %d", max)
		assert.Equal(t, min(3, int(max)), sums[0].Created+sums[1].Created, "max %d: together they serve what fits", max)
		assert.Contains(t, e.logs.String(), "planning again", "max %d: one pass lost the race", max)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}
	e.kube.ClearActions()
	e.dyn.ClearActions()

	sum := e.pass(func(_ *Deps, c *Config) { c.DryRun = true })

	assert.NoError(t, sum.Err())
	for _, a := range append(e.kube.Actions(), e.dyn.Actions()...) {
		if a.GetResource().Resource == "selfsubjectrulesreviews" {
			continue // a question to the API server, which stores nothing
		}
		assert.Contains(t, []string{"get", "list"}, a.GetVerb(), "dry run must not %s %s", a.GetVerb(), a.GetResource().Resource)
	}
	assert.Contains(t, e.out.String(), "would create runner Job ci-n0001 for Gitea job 7")
}
