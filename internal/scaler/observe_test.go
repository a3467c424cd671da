package scaler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
)

func TestJobsOfAnotherOwnerAreNotCounted(t *testing.T) {
	rg := newGroup("ci", 1)
	e := newEnv(t, rg)
	stranger := newGroup("ci", 1, func(r *v1alpha1.RunnerGroup) { r.UID = "uid-old-incarnation" })
	e.addJob(stranger, "ci-stale", 99, t0.Add(-time.Minute))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}

	e.pass()

	assert.Equal(t, map[int64]int{99: 1, 1: 1}, e.giteaJobsServed())
}

func TestFailedRunnerJobDoesNotHoldASlot(t *testing.T) {
	rg := newGroup("ci", 1)
	e := newEnv(t, rg)
	e.addJob(rg, "ci-fail1", 9, t0.Add(-time.Hour), batchv1.JobFailed)
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}

	e.pass()

	assert.Equal(t, map[int64]int{9: 1, 1: 1}, e.giteaJobsServed())
}
