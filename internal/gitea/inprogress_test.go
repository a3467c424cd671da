package gitea

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// runningScene is org acme with n jobs in progress, IDs from 10, job 10+i
// run by runner "r{10+i}".
func runningScene(n int) giteatest.Scene {
	sc := giteatest.Scene{
		Orgs:  []giteatest.Org{{Name: "acme"}},
		Users: []string{"root", "alice"},
		Repos: []giteatest.Repo{{Owner: "acme", Name: "app"}},
	}
	for i := range int64(n) {
		id := 10 + i
		sc.Jobs = append(sc.Jobs, giteatest.Job{ID: id, Owner: "acme", Repo: "app", Name: fmt.Sprintf("job-%d", id),
			Labels: []string{"ubuntu-latest"}, Status: giteatest.StatusInProgress, RunnerID: 1000 + id, RunnerName: fmt.Sprintf("r%d", id)})
	}
	return sc
}

const orgJobs = "/api/v1/orgs/acme/actions/jobs"

// TestInProgressMissesNoRunningJob: the confirmation a runner is deleted
// on. Jobs 10-14 run, in pages of 2; the runner of job 12 is the one the
// reaper asks about.
func TestInProgressMissesNoRunningJob(t *testing.T) {
	target := scope.New("", ScopeOrg, "acme", "")
	tests := []struct {
		name string
		// faults are injected in order, each for one request of the org's
		// job listing.
		faults   func(f *giteatest.Server) []giteatest.Fault
		opts     Options
		wantIDs  []int64
		wantErr  error
		wantReqs int
	}{
		{
			name: "job 10 ends between page 1 and page 2 of the first reading: job 12 moves to page 1 unread, and the next readings find it",
			faults: func(f *giteatest.Server) []giteatest.Fault {
				end10 := func() { _ = f.SetJobStatus(10, giteatest.StatusCompleted, "r10") }
				return []giteatest.Fault{{}, {Before: end10}}
			},
			wantIDs:  []int64{11, 12, 13, 14},
			wantReqs: 2 + 2 + 2, // page 2 of the first reading is its last: 4 jobs are left
		},
		{
			name: "the listing shifts between the pages of every reading: not known",
			faults: func(f *giteatest.Server) []giteatest.Fault {
				next := int64(100)
				shift := func() {
					// One job ends and a new one starts: the total stays 5.
					_ = f.SetJobStatus(next-90, giteatest.StatusCompleted, "")
					_ = f.AddJob(giteatest.Job{ID: next, Owner: "acme", Repo: "app", Name: "n", Status: giteatest.StatusInProgress, RunnerName: "rn"})
					next++
				}
				return []giteatest.Fault{{}, {Before: shift}, {}, {}, {Before: shift}, {}, {}, {Before: shift}}
			},
			wantErr: ErrUnsettled,
		},
		{
			name: "page 2 fails: an error, never the jobs of page 1 alone",
			faults: func(*giteatest.Server) []giteatest.Fault {
				return []giteatest.Fault{{}, {Status: http.StatusServiceUnavailable}}
			},
			wantErr: ErrServer,
		},
		{
			name: "page 2 is over the body bound: an error",
			faults: func(*giteatest.Server) []giteatest.Fault {
				return []giteatest.Fault{{}, {LargeBody: 64 << 10}}
			},
			opts:    Options{MaxResponseBytes: 32 << 10},
			wantErr: ErrBadResponse,
		},
		{
			name: "a proxy drops the status filter: the finished jobs it lets through fail the listing",
			faults: func(f *giteatest.Server) []giteatest.Fault {
				require.NoError(t, f.SetJobStatus(11, giteatest.StatusCompleted, "r11"))
				return []giteatest.Fault{{RewriteQuery: func(q url.Values) { q.Del("status") }}}
			},
			wantErr: ErrBadResponse,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, runningScene(5))
			for _, fault := range tt.faults(f) {
				fault.Path = orgJobs
				f.InjectFault(1, fault)
			}
			opts := tt.opts
			opts.PageSize = 2
			c := newTestClient(t, f.URL, adminToken, opts).(Runners)

			jobs, err := c.InProgress(t.Context(), target)

			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Nil(t, jobs)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantIDs, ids(jobs))
			assert.Contains(t, runnerNames(jobs), "r12")
			assert.Equal(t, tt.wantReqs, f.RequestCount())
			for _, r := range f.Requests() {
				assert.Contains(t, r, "status=in_progress", "one status per request")
				assert.NotContains(t, r, "status=queued")
			}
		})
	}
}

// TestInProgressReadsOnePageOnce: a listing that fits in one page is one
// query, a consistent reading, and is not read again.
func TestInProgressReadsOnePageOnce(t *testing.T) {
	f := newFake(t, runningScene(2))
	c := newTestClient(t, f.URL, adminToken, Options{PageSize: 50}).(Runners)

	jobs, err := c.InProgress(t.Context(), scope.New("", ScopeOrg, "acme", ""))

	require.NoError(t, err)
	assert.Equal(t, []int64{10, 11}, ids(jobs))
	assert.Equal(t, []string{"GET " + orgJobs + "?limit=50&page=1&status=in_progress"}, f.Requests())
}

// TestSnapshotRefusesAListingThatIgnoredItsFilter: a proxy that drops the
// repeated status parameters lets finished jobs through, and the listing
// can no longer be trusted to hold the running ones.
func TestSnapshotRefusesAListingThatIgnoredItsFilter(t *testing.T) {
	f := newFake(t, fixtureScene())
	f.InjectFault(1, giteatest.Fault{RewriteQuery: func(q url.Values) { q.Del("status") }})
	c := newTestClient(t, f.URL, adminToken, Options{})

	_, err := c.Snapshot(t.Context(), scope.New("", ScopeGlobal, "", ""))

	require.ErrorIs(t, err, ErrBadResponse)
	assert.ErrorContains(t, err, `job 1 has status "completed", which the listing did not ask for`)
}

func runnerNames(jobs []Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.RunnerName)
	}
	return out
}
