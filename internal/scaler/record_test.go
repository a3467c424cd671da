package scaler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	scaling := meta.FindStatusCondition(st.Conditions, ConditionScalingActive)
	require.NotNil(t, scaling)
	assert.Equal(t, metav1.ConditionFalse, scaling.Status)
	assert.Equal(t, ReasonPaused, scaling.Reason)
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
