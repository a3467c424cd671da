package scaler

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

func running(id int64, runner string) gitea.Job {
	return gitea.Job{ID: id, Labels: []string{"ubuntu-latest"}, RunnerName: runner}
}

// Runners of a group are interchangeable; each pass counts the runners that
// are starting or idle against the queued jobs, whatever job each runner was
// started for.
func TestThePoolNeitherDuplicatesNorStrandsRunners(t *testing.T) {
	t.Run("runners that swapped jobs leave no surplus runner", func(t *testing.T) {
		rg := newGroup("ci", 5)
		e := newEnv(t, rg)
		e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest"), queued(8, "ubuntu-latest")}}
		require.Equal(t, 2, e.pass().Created)
		r7, r8 := jobFor(t, e, 7), jobFor(t, e, 8)
		// Gitea gives job 8 to job 7's runner; job 8's runner is still starting.
		e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}, Running: []gitea.Job{running(8, runnerOf(t, e, r7))}}
		assert.Zero(t, e.pass().Created, "%s is still starting and will take job 7", r8)
		assert.Len(t, e.jobs(), 2)
	})
	t.Run("a job missed by one listing keeps its runner, and gets no second one when it is seen again", func(t *testing.T) {
		e := newEnv(t, newGroup("ci", 5))
		e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest"), queued(2, "ubuntu-latest")}}
		require.Equal(t, 2, e.pass().Created)
		e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(2, "ubuntu-latest")}} // job 1 slid off page 1
		assert.Zero(t, e.pass().Created)
		e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest"), queued(2, "ubuntu-latest")}}
		assert.Zero(t, e.pass().Created)
		assert.Equal(t, map[int64]int{1: 1, 2: 1}, e.giteaJobsServed())
	})
	t.Run("a runner Job deleted by hand is replaced by the next pass", func(t *testing.T) {
		e := newEnv(t, newGroup("ci", 4))
		var jobs []gitea.Job
		for id := int64(1); id <= 4; id++ {
			jobs = append(jobs, queued(id, "ubuntu-latest"))
		}
		e.gitea.snap = gitea.Snapshot{Queued: jobs}
		require.Equal(t, 4, e.pass().Created)
		require.Zero(t, e.pass().Created, "a pass that sees the Jobs drops their claims")
		require.NoError(t, e.kube.BatchV1().Jobs(ns).Delete(context.Background(), jobFor(t, e, 3), metav1.DeleteOptions{}))
		assert.Equal(t, 1, e.pass().Created, "not after the spawn TTL: the Job was seen and is gone")
		assert.Len(t, e.jobs(), 4)
	})
	t.Run("a runner busy with another job is no supply: the queued job gets a runner at once", func(t *testing.T) {
		e := newEnv(t, newGroup("ci", 5))
		e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
		require.Equal(t, 1, e.pass().Created)
		e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}, Running: []gitea.Job{running(9, runnerOf(t, e, jobFor(t, e, 1)))}}
		assert.Equal(t, 1, e.pass().Created)
	})
}

// runnerOf is the name a runner Job's runner registered with in Gitea.
func runnerOf(t *testing.T, e *env, job string) string {
	t.Helper()
	for i, j := range e.jobs() {
		if j.Name == job {
			return runnerjob.RunnerNameOf(&e.jobs()[i])
		}
	}
	t.Fatalf("no runner Job %s", job)
	return ""
}

// jobFor names the runner Job started for a Gitea job.
func jobFor(t *testing.T, e *env, giteaJob int64) string {
	t.Helper()
	for _, j := range e.jobs() {
		if j.Labels[v1alpha1.LabelGiteaJobID] == strconv.FormatInt(giteaJob, 10) {
			return j.Name
		}
	}
	t.Fatalf("no runner Job for Gitea job %d", giteaJob)
	return ""
}
