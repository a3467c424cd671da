package gitea

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// A job cancelled while its runner still cleans up is in no list of the
// snapshot on either release: 1.26 ends it at once (completed), 1.27 keeps
// it cancelling, which it shows as in_progress but which no status filter
// selects. So the snapshot cannot say that its runner is still at work;
// the runners API's busy flag can (TestListRunnersReadsBusy).
func TestSnapshotDoesNotSeeACancellingJob(t *testing.T) {
	scene := fixtureScene()
	scene.Jobs = append(scene.Jobs, giteatest.Job{ID: 7, Owner: "acme", Repo: "app", RunID: 3, Name: "long",
		Labels: []string{"ubuntu-latest"}, Status: giteatest.StatusCancelling, RunnerID: 4, RunnerName: "rg-ci-abc12"})
	f := newFake(t, scene)
	c := newTestClient(t, f.URL, adminToken, Options{})
	snap, err := c.Snapshot(t.Context(), scope.New("", ScopeOrg, "acme", ""))
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 3, 4}, ids(snap.Queued))
	assert.Empty(t, snap.Running, "job 7 is not running, on either release")
	assert.Empty(t, snap.Blocked)
}

// Busy is Gitea's "active" status: the runner reported on a task in the
// last seconds (models/actions/runner.go, ActionRunner.Status; 1.27 persists
// that report at most every 5 s, well inside the 10 s it counts).
func TestListRunnersReadsBusy(t *testing.T) {
	scene := fixtureScene()
	scene.Runners = []giteatest.Runner{
		{ID: 1, Name: "cleaning-up", Owner: "acme", Online: true, Active: true, Ephemeral: true},
		{ID: 2, Name: "waiting", Owner: "acme", Online: true, Ephemeral: true},
	}
	f := newFake(t, scene)
	c := newTestClient(t, f.URL, adminToken, Options{}).(Runners)
	got, err := c.ListRunners(t.Context(), scope.New("", ScopeOrg, "acme", ""))
	require.NoError(t, err)
	assert.ElementsMatch(t, []Runner{
		{ID: 1, Name: "cleaning-up", Online: true, Busy: true, Ephemeral: true},
		{ID: 2, Name: "waiting", Online: true, Ephemeral: true},
	}, got)
}
