package scaler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/assign"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
)

func TestPausedGroupStartsNothing(t *testing.T) {
	e := newEnv(t, newGroup("ci", 0))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}

	sum := e.pass()

	assert.NoError(t, sum.Err())
	assert.Empty(t, e.jobs())
	st := e.group("ci").Status
	assert.EqualValues(t, 1, st.QueuedJobs)
	scaling := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionScalingActive)
	require.NotNil(t, scaling)
	assert.Equal(t, metav1.ConditionFalse, scaling.Status)
	assert.Equal(t, v1alpha1.ReasonPaused, scaling.Reason)
}

// spec.suspend pauses a group as a cap of 0 does, keeping the cap and the
// warm pool in the spec for when it is resumed; resumed, it serves again.
func TestSuspendedGroupStartsNothingAndKeepsItsCap(t *testing.T) {
	rg := newGroup("ci", 5)
	rg.Spec.MinIdleRunners = 2
	rg.Spec.Suspend = true
	e := newEnv(t, rg)
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}

	sum := e.pass()

	assert.NoError(t, sum.Err())
	assert.Empty(t, e.jobs(), "no runner for the job, no warm pool")
	got := e.group("ci")
	assert.EqualValues(t, 5, got.Spec.MaxActiveRunners)
	assert.EqualValues(t, 0, got.Status.WarmRunners)
	scaling := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionScalingActive)
	require.NotNil(t, scaling)
	assert.Equal(t, metav1.ConditionFalse, scaling.Status)
	assert.Equal(t, v1alpha1.ReasonPaused, scaling.Reason)
	assert.Contains(t, scaling.Message, "spec.suspend")

	e.editGroupSpec("ci", func(rg *v1alpha1.RunnerGroup) { rg.Spec.Suspend = false })
	e.pass()
	assert.Len(t, e.jobs(), 3, "resumed: a runner for the job and the warm pool of 2")
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
	assert.Equal(t, v1alpha1.ReasonGiteaTimeout, meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady).Reason)
	assert.Len(t, e.jobs(), 1)
}

// statusPatches counts the status patches the passes since the last call
// sent, by group name.
func (e *env) statusPatches() map[string]int {
	e.t.Helper()
	out := map[string]int{}
	for _, a := range e.dyn.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			out[a.(k8stesting.PatchAction).GetName()]++
		}
	}
	e.dyn.ClearActions()
	return out
}

// kubeWrites counts the writes to the Kubernetes API (ConfigMaps, Jobs,
// Events) since the last call. A SelfSubjectRulesReview is a create that
// stores nothing (the pass asking what it may do in a namespace), so it is
// not a write.
func (e *env) kubeWrites() []string {
	e.t.Helper()
	var out []string
	for _, a := range e.kube.Actions() {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
			if strings.HasPrefix(a.GetResource().Resource, "selfsubject") {
				continue
			}
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	e.kube.ClearActions()
	return out
}

func TestSteadyPassPatchesOnlyTheStatusesThatChanged(t *testing.T) {
	e := newEnv(t, newGroup("a", 5), newGroup("b", 5))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "gpu")}}

	e.pass()
	assert.Equal(t, map[string]int{"a": 1, "b": 1}, e.statusPatches(), "the first pass records every group")
	e.kubeWrites()
	first := e.group("a").Status.LastCheckTime

	e.pass()
	assert.Empty(t, e.statusPatches(), "nothing changed: no status written")
	assert.Empty(t, e.kubeWrites(), "nothing changed: no ConfigMap, Job or Event written")
	assert.Equal(t, first, e.group("a").Status.LastCheckTime, "lastCheckTime stays while nothing else changes")

	u, err := e.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Get(context.Background(), "b", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedField(u.Object, int64(7), "spec", "maxActiveRunners"))
	_, err = e.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Update(context.Background(), u, metav1.UpdateOptions{})
	require.NoError(t, err)
	e.dyn.ClearActions()
	e.pass()
	assert.Equal(t, map[string]int{"b": 1}, e.statusPatches(), "only the group whose status changed (its cap in ScalingActive's message)")
	assert.NotEqual(t, first, e.group("b").Status.LastCheckTime, "a changed status carries the pass's lastCheckTime")

	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "gpu"), queued(2, "gpu")}}
	e.pass()
	assert.Empty(t, e.statusPatches(), "a job no group serves changes no status")

	e.ticks.Add(int64(assign.StatusHeartbeat / time.Second))
	e.pass()
	assert.Equal(t, map[string]int{"a": 1, "b": 1}, e.statusPatches(), "past the heartbeat lastCheckTime is refreshed though nothing else changed")
	assert.True(t, e.group("a").Status.LastCheckTime.After(first.Time))
}

func TestStatusChangedIgnoresOnlyAFreshLastCheckTime(t *testing.T) {
	const uid = types.UID("0f3c9a52-1d4e-4b7a-8c2f-6e5d4c3b2a19")
	checked := metav1.NewTime(t0)
	base := v1alpha1.RunnerGroupStatus{QueuedJobs: 2, LastCheckTime: &checked, ObservedGeneration: 3,
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReconciled, Message: "m", LastTransitionTime: checked}}}
	tests := []struct {
		name   string
		mutate func(*v1alpha1.RunnerGroupStatus)
		now    time.Time
		want   bool
	}{
		{"only lastCheckTime moved", func(s *v1alpha1.RunnerGroupStatus) {
			later := metav1.NewTime(t0.Add(time.Minute))
			s.LastCheckTime = &later
		}, t0.Add(time.Minute), false},
		{"a count changed", func(s *v1alpha1.RunnerGroupStatus) { s.QueuedJobs = 3 }, t0.Add(time.Second), true},
		{"a condition's message changed", func(s *v1alpha1.RunnerGroupStatus) { s.Conditions[0].Message = "n" }, t0.Add(time.Second), true},
		{"the generation moved", func(s *v1alpha1.RunnerGroupStatus) { s.ObservedGeneration = 4 }, t0.Add(time.Second), true},
		{"the heartbeat is due", func(*v1alpha1.RunnerGroupStatus) {}, t0.Add(heartbeatOf(uid)), true},
		{"not yet", func(*v1alpha1.RunnerGroupStatus) {}, t0.Add(heartbeatOf(uid) - time.Second), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := *base.DeepCopy()
			tt.mutate(&next)
			assert.Equal(t, tt.want, statusChanged(uid, &base, &next, tt.now))
		})
	}
	assert.True(t, statusChanged(uid, &v1alpha1.RunnerGroupStatus{}, &base, t0), "a group never checked is recorded")
}

// TestHeartbeatsOfGroupsServedTogetherSpread: groups first served by one
// pass do not all fall due in one later pass. Each group's heartbeat is
// fixed by its UID within the last quarter of assign.StatusHeartbeat, so the
// served-within rule (ServedWithin) still holds, and 1,500 groups spread
// over that quarter: no 10 s pass (the loop's interval) gets more than a
// few times its share.
func TestHeartbeatsOfGroupsServedTogetherSpread(t *testing.T) {
	const groups, pass = 1500, 10 * time.Second
	perPass := map[time.Duration]int{}
	for i := range groups {
		uid := types.UID(fmt.Sprintf("5f0c%04d-7b1e-4c2a-9d3e-%012d", i, i*7919))
		h := heartbeatOf(uid)
		require.GreaterOrEqual(t, h, assign.StatusHeartbeat*3/4, uid)
		require.LessOrEqual(t, h, assign.StatusHeartbeat, uid)
		assert.Equal(t, h, heartbeatOf(uid), "fixed per group")
		perPass[h/pass]++
	}
	share := groups / int(assign.StatusHeartbeat/4/pass)
	assert.GreaterOrEqual(t, len(perPass), int(assign.StatusHeartbeat/4/pass)-1, "the heartbeats fall in every pass of the quarter")
	for slot, n := range perPass {
		assert.LessOrEqual(t, n, 3*share, "pass %d after 3m45s gets %d heartbeats; its share is %d", slot, n, share)
	}
}
