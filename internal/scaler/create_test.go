package scaler

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
)

func TestFailedJobCreationReleasesTheClaim(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
	e.kube.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("admission webhook denied the request")
	})

	sum := e.pass()

	assert.Equal(t, []string{"runners/ci"}, sum.Failed)
	assert.Empty(t, e.claims("ci"), "the next pass retries at once instead of after the TTL")
	ready := meta.FindStatusCondition(e.group("ci").Status.Conditions, ConditionReady)
	assert.Equal(t, ReasonJobCreateFailed, ready.Reason)
	assert.Contains(t, ready.Message, "admission webhook denied the request")
}
