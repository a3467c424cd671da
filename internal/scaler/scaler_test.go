package scaler

import (
	"context"
	"errors"
	"strings"
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
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

func TestPassServesQueuedMatchingJobsOnly(t *testing.T) {
	rg := newGroup("ci", 5)
	e := newEnv(t, rg)
	e.gitea.snap = gitea.Snapshot{
		Queued:  []gitea.Job{queued(1, "ubuntu-latest"), queued(2, "self-hosted", "gpu")},
		Blocked: []gitea.Job{{ID: 3, Labels: []string{"ubuntu-latest"}}, {ID: 5, Labels: []string{"gpu"}}},
		Running: []gitea.Job{{ID: 4, RunnerName: "ci-x2v7k"}, {ID: 6, RunnerName: "ci-gpu-x2v7k"}},
	}

	sum := e.pass()

	assert.Equal(t, Summary{Groups: 1, Created: 1}, sum)
	assert.Equal(t, map[int64]int{1: 1}, e.giteaJobsServed(), "one runner for the matching queued job; none for gpu or blocked jobs")
	assert.Equal(t, []gitea.Target{{Scope: gitea.ScopeOrg, Owner: "acme"}}, e.gitea.seen)
	assert.Equal(t, []string{secretToken}, e.tokens, "Gitea is asked with the authToken")

	st := e.group("ci").Status
	assert.EqualValues(t, 1, st.ActiveRunners)
	assert.EqualValues(t, 1, st.QueuedJobs)
	assert.EqualValues(t, 1, st.BlockedJobs, "only blocked jobs the group could serve")
	assert.EqualValues(t, 1, st.RunningJobs, "only jobs on this group's runners (ci-gpu-x2v7k is not ours)")
	assert.EqualValues(t, 3, st.ObservedGeneration)
	require.NotNil(t, st.LastCheckTime)
	ready := meta.FindStatusCondition(st.Conditions, ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Equal(t, ReasonReconciled, ready.Reason)

	claims := e.state("ci")
	require.Contains(t, claims, int64(1))
	assert.Equal(t, e.jobs()[0].Name, claims[1].JobName)

	evs := e.events()
	require.Len(t, evs, 1)
	assert.Equal(t, ReasonRunnerCreated, evs[0].Reason)
	assert.Equal(t, "ci", evs[0].InvolvedObject.Name)
}

func TestSecondPassDoesNotDuplicate(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest"), queued(2, "ubuntu-latest")}}

	e.pass()
	e.pass()
	e.pass()

	assert.Equal(t, map[int64]int{1: 1, 2: 1}, e.giteaJobsServed())
}

func TestMaxActiveRunnersHolds(t *testing.T) {
	rg := newGroup("ci", 2)
	e := newEnv(t, rg)
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest"), queued(2, "ubuntu-latest"), queued(3, "ubuntu-latest")}}

	e.pass()
	assert.Equal(t, map[int64]int{1: 1, 2: 1}, e.giteaJobsServed())
	scaling := meta.FindStatusCondition(e.group("ci").Status.Conditions, ConditionScalingActive)
	require.NotNil(t, scaling)
	assert.Equal(t, ReasonAtCapacity, scaling.Reason)

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
	assert.NotContains(t, e.state("ci"), int64(1), "the claim of a job no longer queued is dropped")
	assert.EqualValues(t, 2, e.group("ci").Status.ActiveRunners)
}

func TestFailedRunnerJobDoesNotHoldASlot(t *testing.T) {
	rg := newGroup("ci", 1)
	e := newEnv(t, rg)
	e.addJob(rg, "ci-fail1", 9, t0.Add(-time.Hour), batchv1.JobFailed)
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}

	e.pass()

	assert.Equal(t, map[int64]int{9: 1, 1: 1}, e.giteaJobsServed())
}

func TestPausedGroupStartsNothing(t *testing.T) {
	e := newEnv(t, newGroup("ci", 0))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}

	sum := e.pass()

	assert.NoError(t, sum.Err())
	assert.Empty(t, e.jobs())
	st := e.group("ci").Status
	assert.EqualValues(t, 1, st.QueuedJobs)
	scaling := meta.FindStatusCondition(st.Conditions, ConditionScalingActive)
	require.NotNil(t, scaling)
	assert.Equal(t, metav1.ConditionFalse, scaling.Status)
	assert.Equal(t, ReasonPaused, scaling.Reason)
}

func TestOneBrokenGroupDoesNotStopTheOthers(t *testing.T) {
	tests := []struct {
		name       string
		broken     *v1alpha1.RunnerGroup
		giteaErr   error
		wantReason string
		wantMsg    string
	}{
		{
			name:       "missing auth Secret",
			broken:     newGroup("bad", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.AuthToken.SecretRef.Name = "nope" }),
			wantReason: ReasonSecretNotFound, wantMsg: "spec.authToken: Secret runners/nope not found",
		},
		{
			name:       "missing key in the registration Secret",
			broken:     newGroup("bad", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.RegistrationToken.SecretRef.Key = "other" }),
			wantReason: ReasonSecretKeyMissing, wantMsg: `spec.registrationToken: Secret runners/reg has no key "other"`,
		},
		{
			name:       "invalid spec admitted before the CRD had a rule",
			broken:     newGroup("bad", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "" }),
			wantReason: ReasonInvalidSpec, wantMsg: "spec.org is required for scope org",
		},
		{
			name:       "Gitea refuses the token",
			broken:     newGroup("bad", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "other" }),
			giteaErr:   &gitea.APIError{Kind: gitea.ErrUnauthorized, URL: "/api/v1/orgs/other/actions/jobs", Status: 401, Message: "invalid username, password or token"},
			wantReason: ReasonGiteaUnauthorized, wantMsg: "cannot list Gitea jobs of org other at https://gitea.example.com",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.broken, newGroup("good", 5))
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
			if tt.giteaErr != nil {
				ok := e.gitea
				e.gitea = &fakeGitea{err: tt.giteaErr}
				defer func() { e.gitea = ok }()
			}
			bad := e.gitea
			sum, err := e.scaler(func(s *Scaler) {
				s.Gitea = func(url, token string) (gitea.Client, error) {
					return perOrg{"other": bad, "acme": &fakeGitea{snap: gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}}}, nil
				}
			}).Pass(context.Background())
			require.NoError(t, err)

			assert.Equal(t, []string{"runners/bad"}, sum.Failed)
			assert.ErrorContains(t, sum.Err(), "1 of 2 RunnerGroups failed: runners/bad")
			assert.Equal(t, 1, sum.Created, "the good group is served")
			for _, j := range e.jobs() {
				assert.Equal(t, "good", j.Labels[v1alpha1.LabelRunnerGroupName])
			}

			ready := meta.FindStatusCondition(e.group("bad").Status.Conditions, ConditionReady)
			require.NotNil(t, ready)
			assert.Equal(t, metav1.ConditionFalse, ready.Status)
			assert.Equal(t, tt.wantReason, ready.Reason)
			assert.Contains(t, ready.Message, tt.wantMsg)
			assert.NotContains(t, ready.Message, secretToken)

			var warned bool
			for _, ev := range e.events() {
				assert.NotContains(t, ev.Message, secretToken)
				warned = warned || (ev.InvolvedObject.Name == "bad" && ev.Type == "Warning" && ev.Reason == tt.wantReason)
			}
			assert.True(t, warned, "a Warning event explains the failure")
			assert.NotContains(t, e.logs.String(), secretToken)
		})
	}
}

// perOrg routes Snapshot calls by org, so one pass can see one failing and
// one healthy Gitea target.
type perOrg map[string]*fakeGitea

func (p perOrg) Snapshot(ctx context.Context, t gitea.Target) (gitea.Snapshot, error) {
	return p[t.Owner].Snapshot(ctx, t)
}

func TestGiteaFailureKeepsLastObservation(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
	e.pass()
	e.gitea.err = &gitea.APIError{Kind: gitea.ErrTimeout, URL: "/api/v1/orgs/acme/actions/jobs"}

	sum := e.pass()

	assert.Equal(t, []string{"runners/ci"}, sum.Failed)
	st := e.group("ci").Status
	assert.EqualValues(t, 1, st.QueuedJobs, "an outage does not show as an empty queue")
	assert.Equal(t, ReasonGiteaTimeout, meta.FindStatusCondition(st.Conditions, ConditionReady).Reason)
	assert.Len(t, e.jobs(), 1)
}

func TestCorruptStateIsRebuiltFromJobs(t *testing.T) {
	rg := newGroup("ci", 5)
	e := newEnv(t, rg)
	e.addJob(rg, "ci-old01", 1, t0.Add(-time.Minute))
	e.cms.write(t, e.kube, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: state.ConfigMapName("ci"), Namespace: ns,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "gitea.bpg.pw/v1alpha1", Kind: "RunnerGroup", Name: "ci", UID: rg.UID}}},
		Data: map[string]string{state.DataKey: "}}garbage{{"},
	})
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest"), queued(2, "ubuntu-latest")}}

	sum := e.pass()

	assert.NoError(t, sum.Err())
	assert.Equal(t, map[int64]int{1: 1, 2: 1}, e.giteaJobsServed(), "job 1 already had a runner: no second one")
	claims := e.state("ci")
	assert.Equal(t, "ci-old01", claims[1].JobName)
	assert.Contains(t, claims, int64(2))
	var rebuilt bool
	for _, ev := range e.events() {
		rebuilt = rebuilt || ev.Reason == ReasonStateRebuilt
	}
	assert.True(t, rebuilt)
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
	assert.Equal(t, ReasonStateNotOwned, meta.FindStatusCondition(e.group("ci").Status.Conditions, ConditionReady).Reason)
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
	claims := e.state("ci")
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
		sums := make([]Summary, 2)
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

func TestFailedJobCreationReleasesTheClaim(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
	e.kube.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("admission webhook denied the request")
	})

	sum := e.pass()

	assert.Equal(t, []string{"runners/ci"}, sum.Failed)
	assert.Empty(t, e.state("ci"), "the next pass retries at once instead of after the TTL")
	ready := meta.FindStatusCondition(e.group("ci").Status.Conditions, ConditionReady)
	assert.Equal(t, ReasonJobCreateFailed, ready.Reason)
	assert.Contains(t, ready.Message, "admission webhook denied the request")
}

func TestDryRunWritesNothing(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}
	e.kube.ClearActions()
	e.dyn.ClearActions()

	sum := e.pass(func(s *Scaler) { s.Config.DryRun = true })

	assert.NoError(t, sum.Err())
	for _, a := range append(e.kube.Actions(), e.dyn.Actions()...) {
		assert.Contains(t, []string{"get", "list"}, a.GetVerb(), "dry run must not %s %s", a.GetVerb(), a.GetResource().Resource)
	}
	assert.Contains(t, e.out.String(), "would create runner Job ci-n0001 for Gitea job 7")
}

func TestSelectorsPickGroups(t *testing.T) {
	label := func(k, v string) func(*v1alpha1.RunnerGroup) {
		return func(rg *v1alpha1.RunnerGroup) { rg.Labels = map[string]string{k: v} }
	}
	tests := []struct {
		name     string
		selector string
		excludes []string
		want     []string
	}{
		{name: "all", want: []string{"a", "b", "c"}},
		{name: "selector", selector: "pool=gpu", want: []string{"b"}},
		{name: "excluded by an additional listener", excludes: []string{"pool=gpu"}, want: []string{"a", "c"}},
		{name: "several excludes", excludes: []string{"pool=gpu", "pool in (arm)"}, want: []string{"a"}},
		{name: "JSON selector", selector: `{"matchExpressions":[{"key":"pool","operator":"Exists"}]}`, want: []string{"b", "c"}},
		{name: "JSON exclude", excludes: []string{`{"matchLabels":{"pool":"arm"}}`}, want: []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, newGroup("a", 1), newGroup("b", 1, label("pool", "gpu")), newGroup("c", 1, label("pool", "arm")))
			e.pass(func(s *Scaler) { s.Config.Selector, s.Config.ExcludeSelectors = tt.selector, tt.excludes })
			var served []string
			for _, name := range []string{"a", "b", "c"} {
				if e.group(name).Status.LastCheckTime != nil {
					served = append(served, name)
				}
			}
			assert.Equal(t, tt.want, served)
		})
	}
}

func TestJobsOfAnotherOwnerAreNotCounted(t *testing.T) {
	rg := newGroup("ci", 1)
	e := newEnv(t, rg)
	stranger := newGroup("ci", 1, func(r *v1alpha1.RunnerGroup) { r.UID = "uid-old-incarnation" })
	e.addJob(stranger, "ci-stale", 99, t0.Add(-time.Minute))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}

	e.pass()

	assert.Equal(t, map[int64]int{99: 1, 1: 1}, e.giteaJobsServed())
}

func TestNewRejectsBadSelectors(t *testing.T) {
	_, err := New(Scaler{Config: Config{Selector: "a in (", SpawnTTL: time.Minute}})
	assert.ErrorContains(t, err, "invalid selector")
	_, err = New(Scaler{Config: Config{ExcludeSelectors: []string{""}, SpawnTTL: time.Minute}})
	assert.ErrorContains(t, err, "would exclude every RunnerGroup")
}

func TestSecretsNeverReachStatusEventsOrLogs(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	e.gitea.err = errors.New("dial tcp: connection refused")
	e.pass()
	st := e.group("ci").Status
	for _, c := range st.Conditions {
		assert.False(t, strings.Contains(c.Message, secretToken))
	}
	for _, j := range e.jobs() {
		for _, env := range j.Spec.Template.Spec.Containers[0].Env {
			assert.NotContains(t, env.Value, secretToken)
		}
	}
	assert.NotContains(t, e.logs.String(), secretToken)
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
		Running: []gitea.Job{{ID: 2, RunnerName: "ci-abcde"}},
	}

	sum := e.pass()

	assert.Equal(t, 1, sum.Created)
	assert.Equal(t, map[int64]int{1: 2}, e.giteaJobsServed(), "a second runner for job 1: the first one is busy with job 2")
	assert.NotEqual(t, "ci-abcde", e.state("ci")[1].JobName)
	assert.EqualValues(t, 1, e.group("ci").Status.RunningJobs)
}

func TestOneSecretHoldingBothTokensIsReadOnce(t *testing.T) {
	e := newEnv(t, newGroup("ci", 1, func(rg *v1alpha1.RunnerGroup) {
		rg.Spec.RegistrationToken.SecretRef = v1alpha1.SecretRef{Name: "api", Key: "token"}
	}))
	e.kube.ClearActions()

	e.pass()

	gets := 0
	for _, a := range e.kube.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "secrets" {
			gets++
		}
	}
	assert.Equal(t, 1, gets)
}
