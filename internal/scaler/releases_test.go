package scaler

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// A runner that cleans up after a cancelled job runs no job any listing
// shows, yet it is at work: Gitea's busy flag is the one sign of it. It is
// not reaped until the flag has been clear for the idle timeout.
func TestBusyRunnerIsNotReapedThoughNoJobListsIt(t *testing.T) {
	rg := newGroup("ci", 3)
	e, g, set := lifecycleEnv(t, rg)
	j := e.addRunner(rg, "ci-aaaaa", 1, 20*time.Minute, podRunning)
	g.register(runnerjob.RunnerNameOf(j), true)
	g.runners[0].Busy = true

	e.pass(set)

	assert.Equal(t, []string{"ci-aaaaa"}, jobNamesOf(e))
	assert.Equal(t, []string{"list"}, g.calls, "neither disabled nor deleted")
	assert.EqualValues(t, 1, e.group("ci").Status.IdleRunners, "it still counts as idle: no job of the group runs on it")

	g.runners[0].Busy = false
	e.pass(set, at(5*time.Minute))
	assert.Equal(t, []string{"ci-aaaaa"}, jobNamesOf(e), "idle for less than the timeout since it was seen busy")
	e.pass(set, at(11*time.Minute))
	assert.Empty(t, jobNamesOf(e), "reaped once the flag cleared for the timeout")
}

// The lifecycle of one runner through a job that is cancelled while it
// runs, against the HTTP fake answering as each Gitea release through the
// real client: the running job keeps its runner, the cleanup after the
// cancel keeps it too (1.27 shows the job as cancelling, which no listing
// selects; 1.26 shows it completed), and once idle the runner is reaped.
func TestRunnerLifecycleThroughACancelPerGiteaRelease(t *testing.T) {
	for _, v := range giteatest.Versions() {
		t.Run("gitea "+string(v), func(t *testing.T) {
			rg := newGroup("ci", 3)
			e, _, set := lifecycleEnv(t, rg)
			job := e.addRunner(rg, "ci-aaaaa", 1, 20*time.Minute, podRunning)
			name := runnerjob.RunnerNameOf(job)

			srv, real := releaseFake(t, v, giteatest.Scene{
				Orgs:  []giteatest.Org{{Name: "acme"}},
				Repos: []giteatest.Repo{{Owner: "acme", Name: "app"}},
				Jobs: []giteatest.Job{{ID: 1, Owner: "acme", Repo: "app", RunID: 1, Name: "build", Labels: []string{"ubuntu-latest"},
					Status: giteatest.StatusInProgress, RunnerID: 1, RunnerName: name}},
				Runners: []giteatest.Runner{{ID: 1, Name: name, Owner: "acme", Online: true, Active: true, Ephemeral: true}},
			}, set)
			step := func(status string, active bool, after time.Duration) {
				t.Helper()
				require.NoError(t, srv.UpdateJob(1, func(j *giteatest.Job) {
					j.Status = status
					if status == giteatest.StatusCompleted {
						j.Conclusion = "cancelled"
					}
				}))
				require.Len(t, srv.Runners(), 1)
				r := srv.Runners()[0]
				r.Active = active
				require.NoError(t, srv.AddRunner(r))
				srv.ResetRequests()
				e.pass(real, at(after))
			}
			changes := func() []string {
				var out []string
				for _, r := range srv.Requests() {
					// The check of the registration token changes
					// nothing (the scope has its token).
					if r[:3] != "GET" && !strings.HasSuffix(r, "/registration-token") {
						out = append(out, r)
					}
				}
				return out
			}

			step(giteatest.StatusInProgress, true, 0)
			assert.Equal(t, []string{"ci-aaaaa"}, jobNamesOf(e), "running its job")
			assert.Empty(t, changes())

			step(giteatest.StatusCancelling, true, time.Minute)
			assert.Equal(t, []string{"ci-aaaaa"}, jobNamesOf(e), "cleaning up after the cancel")
			assert.Empty(t, changes(), "neither disabled nor deleted")

			step(giteatest.StatusCompleted, false, 11*time.Minute)
			assert.Empty(t, jobNamesOf(e), "idle past the timeout since it was last at work: reaped")
			assert.Equal(t, []string{"PATCH /api/v1/orgs/acme/actions/runners/1", "DELETE /api/v1/orgs/acme/actions/runners/1"}, changes())
			assert.Empty(t, srv.Runners())
		})
	}
}

// releaseFake starts the HTTP fake answering as v with the scene, and a
// setup that points the scaler at it through the real client (after the
// given setups).
func releaseFake(t *testing.T, v giteatest.Version, scene giteatest.Scene, setups ...setup) (*giteatest.Server, setup) {
	t.Helper()
	srv := giteatest.New()
	t.Cleanup(srv.Close)
	require.NoError(t, srv.AnswerAs(v))
	srv.AddToken(secretToken, "admin", true)
	require.NoError(t, srv.Load(scene))
	scopeTokens(srv, scene)
	return srv, func(d *Deps, c *Config) {
		for _, set := range setups {
			set(d, c)
		}
		d.Gitea = func(_, token string) (gitea.Client, error) {
			return gitea.NewClient(srv.URL, token, gitea.Options{Timeout: 20 * time.Second})
		}
	}
}

// Demand reads the same on both releases: a job without runs-on labels
// gets no runner (on 1.27 that is what a reusable-workflow caller looks
// like while its called jobs wait, and no runner is ever given one), and a
// rerun gets exactly one, whether it comes back under its own ID (1.26) or
// a new one (1.27).
func TestDemandPerGiteaRelease(t *testing.T) {
	for _, v := range giteatest.Versions() {
		t.Run("gitea "+string(v), func(t *testing.T) {
			e := newEnv(t, newGroup("ci", 5))
			srv, real := releaseFake(t, v, giteatest.Scene{
				Orgs:  []giteatest.Org{{Name: "acme"}},
				Repos: []giteatest.Repo{{Owner: "acme", Name: "app"}},
				Jobs: []giteatest.Job{
					{ID: 1, Owner: "acme", Repo: "app", RunID: 1, Name: "build", Labels: []string{"ubuntu-latest"},
						Status: giteatest.StatusCompleted, Conclusion: "failure", RunnerID: 9, RunnerName: "gone", RunAttempt: 1},
					{ID: 2, Owner: "acme", Repo: "app", RunID: 2, Name: "call", Status: giteatest.StatusQueued},
					{ID: 3, Owner: "acme", Repo: "app", RunID: 2, Name: "test", Labels: []string{"ubuntu-latest"}, Status: giteatest.StatusQueued},
				},
			})

			assert.Equal(t, 1, e.pass(real).Created)
			assert.Equal(t, map[int64]int{3: 1}, e.giteaJobsServed(), "the job without labels gets none")

			rerun, err := srv.Rerun(1)
			require.NoError(t, err)
			assert.Equal(t, 1, e.pass(real).Created)
			assert.Equal(t, map[int64]int{3: 1, rerun: 1}, e.giteaJobsServed(), "the rerun gets one runner")
			assert.Zero(t, e.pass(real).Created, "and no second")
		})
	}
}

// A runner cleaning up after a cancelled job shows neither running nor
// busy once Gitea 1.27.3 stops calling it busy, 5 to 10 s after
// gitea-runner 3.1.0's last report. Its idle time counts from when a pass
// last saw it at work, a sighting the group's state keeps from one pass to
// the next, so a CronJob's single passes give its cleanup the idle timeout
// as a loop does. The state is written for a sighting only when the kept
// one is half the idle timeout old: a runner at work costs one write per
// five minutes, not one per pass, and its cleanup has at least half the
// timeout. A sighting of a runner Job that is gone leaves at that write.
func TestAPassCountsARunnersIdleTimeFromWhenAPassLastSawItAtWork(t *testing.T) {
	tests := []struct {
		name string
		mode setup
	}{
		{"a loop", asLoop},
		{"single passes", func(*Deps, *Config) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := newGroup("ci", 3)
			e, g, set := lifecycleEnv(t, rg)
			j := e.addRunner(rg, "ci-aaaaa", 1, 20*time.Minute, podRunning)
			name := runnerjob.RunnerNameOf(j)
			g.register(name, true)
			clock := t0
			sc := e.scaler(set, tt.mode, func(d *Deps, _ *Config) { d.Now = func() time.Time { return clock } })
			pass := func(at time.Duration) {
				t.Helper()
				clock = t0.Add(at)
				_, err := sc.Pass(context.Background())
				require.NoError(t, err)
			}
			kept := func() state.AtWork {
				t.Helper()
				l, err := state.Store{Client: e.kube}.Load(context.Background(), stateOwner(rg))
				require.NoError(t, err)
				return l.AtWork
			}
			e.seedAtWork(rg, state.AtWork{"uid-of-a-gone-job": t0.Add(-time.Hour)})

			e.gitea.snap.Running = []gitea.Job{{ID: 1, RunnerName: name}}
			pass(0)
			require.Equal(t, []string{"ci-aaaaa"}, jobNamesOf(e), "running its job")
			assert.Equal(t, state.AtWork{j.UID: t0}, kept(), "seen at work, and the gone Job's sighting dropped")
			pass(time.Minute)
			assert.Equal(t, state.AtWork{j.UID: t0}, kept(), "a minute later: not written again")
			pass(6 * time.Minute)
			assert.Equal(t, state.AtWork{j.UID: t0.Add(6 * time.Minute)}, kept(), "half the idle timeout later: written again")

			e.gitea.snap.Running = nil // cancelled: cleaning up, not busy
			pass(7 * time.Minute)
			assert.Equal(t, []string{"ci-aaaaa"}, jobNamesOf(e), "idle for a minute since it was last seen at work")
			pass(15 * time.Minute)
			assert.Equal(t, []string{"ci-aaaaa"}, jobNamesOf(e), "idle for 9 minutes since then")
			pass(16 * time.Minute)
			assert.Empty(t, jobNamesOf(e), "idle past the timeout since then: reaped")
		})
	}
}

// A sighting more than a minute ahead of now (a hand-edited state, a
// clock that jumped back) is no sighting: the runner's idle time counts
// from its Job's creation. One a few seconds ahead, as another listener's
// clock may write it, still counts.
func TestASightingFarAheadOfNowIsNone(t *testing.T) {
	tests := []struct {
		name   string
		ahead  time.Duration
		reaped bool
	}{
		{"a year ahead", 365 * 24 * time.Hour, true},
		{"seconds ahead", 30 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg, e, _, set, j := registeredIdleRunner(t)
			e.seedAtWork(rg, state.AtWork{j.UID: t0.Add(tt.ahead)})

			e.pass(set, at(0))
			if tt.reaped {
				assert.Empty(t, jobNamesOf(e), "idle since its Job's creation: reaped")
			} else {
				assert.Equal(t, []string{"ci-aaaaa"}, jobNamesOf(e), "seen at work just now")
			}
		})
	}
}

// registeredIdleRunner is a group's runner Job of 20 minutes, its pod
// running and its runner registered in Gitea, running no job.
func registeredIdleRunner(t *testing.T) (*v1alpha1.RunnerGroup, *env, *runnersGitea, setup, *batchv1.Job) {
	t.Helper()
	rg := newGroup("ci", 3)
	e, g, set := lifecycleEnv(t, rg)
	j := e.addRunner(rg, "ci-aaaaa", 1, 20*time.Minute, podRunning)
	g.register(runnerjob.RunnerNameOf(j), true)
	return rg, e, g, set, j
}

// A runner disabled in Gitea (a reap that stopped after the disable) while
// it was at work may still run a cancelled job's cleanup after Gitea stops
// calling it busy (5 to 10 s after its last report on Gitea 1.27.3): a
// cleanup that started late outlasted the flag and its runner Job was
// deleted mid-cleanup (TestACancelledJobsRunnerFinishesItsCleanupBeforeItsJobGoes/
// disabled, red once in CI). Like an idle runner, it goes only once no
// pass has seen it at work for the idle timeout; one never seen at work
// goes at once, as before.
func TestADisabledRunnerSeenAtWorkIsKeptForTheIdleTimeout(t *testing.T) {
	tests := []struct {
		name     string
		sighting time.Duration // before now; 0 for none
		reaped   bool
	}{
		{"never seen at work", 0, true},
		{"seen at work 10 s ago", 10 * time.Second, false},
		{"seen at work 9 minutes ago", 9 * time.Minute, false},
		{"seen at work 11 minutes ago", 11 * time.Minute, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg, e, g, set, j := registeredIdleRunner(t)
			g.runners[0].Disabled = true
			if tt.sighting > 0 {
				e.seedAtWork(rg, state.AtWork{j.UID: t0.Add(time.Hour - tt.sighting)})
			}
			e.pass(set, at(time.Hour))
			if tt.reaped {
				assert.Empty(t, jobNamesOf(e), "reaped")
				return
			}
			assert.Equal(t, []string{"ci-aaaaa"}, jobNamesOf(e), "kept: it may be cleaning up")
			assert.Contains(t, e.logs.String(), "a disabled runner seen at work")
		})
	}
}
