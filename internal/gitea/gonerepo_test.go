package gitea

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// A job whose repository is gone fails every instance listing page that
// holds it with 500. The listing still reads every other job, leaves
// that one out and counts it, instead of leaving the whole scope without
// runners.
func TestAJobWhoseRepositoryIsGoneLeavesTheOthersListed(t *testing.T) {
	scene := func() giteatest.Scene {
		return giteatest.Scene{
			Orgs:  []giteatest.Org{{Name: "acme"}},
			Users: []string{"root", "alice"},
			Repos: []giteatest.Repo{{Owner: "acme", Name: "app"}, {Owner: "acme", Name: "gone"}},
			Jobs: append(append(manyJobs("acme", "app", 10, 5, giteatest.StatusQueued),
				manyJobs("acme", "gone", 15, 1, giteatest.StatusQueued)...),
				manyJobs("acme", "app", 16, 6, giteatest.StatusQueued)...),
		}
	}
	others := []int64{10, 11, 12, 13, 14, 16, 17, 18, 19, 20, 21}
	tests := []struct {
		name         string
		place        scope.Place
		pageSize     int
		wantUnlisted int
	}{
		{"instance, the bad job mid-page", scope.New("", ScopeGlobal, "", ""), 50, 1},
		{"instance, pages of 4", scope.New("", ScopeGlobal, "", ""), 4, 1},
		{"instance, pages of 1", scope.New("", ScopeGlobal, "", ""), 1, 1},
		{"org: Gitea leaves it out itself", scope.New("", ScopeOrg, "acme", ""), 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, scene())
			require.NoError(t, f.DeleteRepoKeepingJobs("acme", "gone"))
			c := newTestClient(t, f.URL, adminToken, Options{PageSize: tt.pageSize})

			snap, err := c.Snapshot(t.Context(), tt.place)
			require.NoError(t, err)
			assert.ElementsMatch(t, others, ids(snap.Queued))
			assert.Equal(t, tt.wantUnlisted, snap.Unlisted)
		})
	}
}

// When every piece of a page fails, Gitea is broken, not one job: the
// listing fails with the page's error, after a bounded number of requests.
func TestAListingWhoseEveryPieceFailsFails(t *testing.T) {
	f := newFake(t, giteatest.Scene{
		Orgs:  []giteatest.Org{{Name: "acme"}},
		Users: []string{"root", "alice"},
		Repos: []giteatest.Repo{{Owner: "acme", Name: "app"}},
		Jobs:  manyJobs("acme", "app", 10, 3, giteatest.StatusQueued),
	})
	f.InjectFault(1000, giteatest.Fault{Status: http.StatusInternalServerError, Body: `{"message":"database is locked"}`})
	c := newTestClient(t, f.URL, adminToken, Options{})

	_, err := c.Snapshot(t.Context(), scope.New("", ScopeGlobal, "", ""))
	var apiErr *APIError
	require.True(t, errors.As(err, &apiErr), "%v", err)
	assert.Equal(t, http.StatusInternalServerError, apiErr.Status)
	assert.Contains(t, apiErr.URL, "limit=50&page=1&")
	// The page, then a few pieces per job left out, until more than
	// maxUnlisted are.
	assert.LessOrEqual(t, f.RequestCount(), 16)
}

// Other failures are not read around: a 502 from a proxy, or a 500 for one
// repository's own listing (which renders its jobs with the repository it
// was asked for, so a gone repository cannot be the cause).
func TestOnlyAnInstanceOrOrgPage500IsReadAround(t *testing.T) {
	tests := []struct {
		name   string
		place  scope.Place
		status int
	}{
		{"instance, 502", scope.New("", ScopeGlobal, "", ""), http.StatusBadGateway},
		{"repo, 500", scope.New("", ScopeRepo, "acme", "app"), http.StatusInternalServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, fixtureScene())
			f.InjectFault(1, giteatest.Fault{Status: tt.status})
			c := newTestClient(t, f.URL, adminToken, Options{})

			_, err := c.Snapshot(t.Context(), tt.place)
			require.Error(t, err)
			listings := 0
			for _, r := range f.Requests() {
				if strings.Contains(r, "/actions/jobs") {
					listings++
				}
			}
			assert.Equal(t, 1, listings, "%q", f.Requests())
		})
	}
}

// The pieces a failed page is read in are pages a limit can ask for:
// each offset a multiple of its size, together covering the page once.
func TestAlignedPieces(t *testing.T) {
	tests := []struct {
		start, end int
		want       []piece
	}{
		{0, 50, []piece{{0, 32}, {32, 16}, {48, 2}}},
		{50, 100, []piece{{50, 2}, {52, 4}, {56, 8}, {64, 32}, {96, 4}}},
		{6, 9, []piece{{6, 2}, {8, 1}}},
		{0, 1, []piece{{0, 1}}},
		{3, 3, nil},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, alignedPieces(tt.start, tt.end), "[%d, %d)", tt.start, tt.end)
	}
}

// Many jobs whose repository is gone, wherever they sit in the listing,
// leave the others listed: Gitea names each such job in its 500, so they
// are told apart from a Gitea that fails everything, however many there
// are (up to maxUnlisted) and in either release's words.
func TestManyJobsWhoseRepositoryIsGoneLeaveTheOthersListed(t *testing.T) {
	tests := []struct {
		name          string
		gone, healthy []giteatest.Job
		pageSize      int
	}{
		{"six gone before the others", manyJobs("acme", "gone", 10, 6, giteatest.StatusQueued),
			manyJobs("acme", "app", 30, 3, giteatest.StatusQueued), 50},
		{"six gone after the others", manyJobs("acme", "gone", 30, 6, giteatest.StatusQueued),
			manyJobs("acme", "app", 10, 3, giteatest.StatusQueued), 50},
		{"twenty gone around the others, pages of 8", append(manyJobs("acme", "gone", 10, 10, giteatest.StatusQueued),
			manyJobs("acme", "gone", 30, 10, giteatest.StatusQueued)...),
			manyJobs("acme", "app", 20, 2, giteatest.StatusQueued), 8},
		{"only gone ones", manyJobs("acme", "gone", 10, 7, giteatest.StatusQueued), nil, 50},
	}
	for _, v := range giteatest.Versions() {
		for _, tt := range tests {
			t.Run(string(v)+"/"+tt.name, func(t *testing.T) {
				f := newFakeAs(t, v, giteatest.Scene{
					Orgs:  []giteatest.Org{{Name: "acme"}},
					Users: []string{"root", "alice"},
					Repos: []giteatest.Repo{{Owner: "acme", Name: "app"}, {Owner: "acme", Name: "gone"}},
					Jobs:  append(append([]giteatest.Job{}, tt.gone...), tt.healthy...),
				})
				require.NoError(t, f.DeleteRepoKeepingJobs("acme", "gone"))
				c := newTestClient(t, f.URL, adminToken, Options{PageSize: tt.pageSize})

				snap, err := c.Snapshot(t.Context(), scope.New("", ScopeGlobal, "", ""))
				require.NoError(t, err)
				want := []int64{}
				for _, j := range tt.healthy {
					want = append(want, j.ID)
				}
				assert.ElementsMatch(t, want, ids(snap.Queued))
				assert.Equal(t, len(tt.gone), snap.Unlisted)
			})
		}
	}
}

// Reading around costs a few requests per job left out, so it is bounded:
// past maxUnlisted the listing fails, and says what to do about it.
func TestAListingWithMoreJobsWhoseRepositoryIsGoneThanTheBoundFails(t *testing.T) {
	f := newFake(t, giteatest.Scene{
		Orgs:  []giteatest.Org{{Name: "acme"}},
		Users: []string{"root", "alice"},
		Repos: []giteatest.Repo{{Owner: "acme", Name: "app"}, {Owner: "acme", Name: "gone"}},
		Jobs: append(manyJobs("acme", "gone", 10, maxUnlisted+1, giteatest.StatusQueued),
			manyJobs("acme", "app", 1000, 2, giteatest.StatusQueued)...),
	})
	require.NoError(t, f.DeleteRepoKeepingJobs("acme", "gone"))
	c := newTestClient(t, f.URL, adminToken, Options{})

	_, err := c.Snapshot(t.Context(), scope.New("", ScopeGlobal, "", ""))
	var apiErr *APIError
	require.True(t, errors.As(err, &apiErr), "%v", err)
	assert.ErrorIs(t, err, ErrServer)
	assert.Contains(t, apiErr.Message, "repository is gone")
	assert.Contains(t, apiErr.Message, "delete them")
}
