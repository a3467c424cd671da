package gitea

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/giteaurl"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// allReq is the request for one page of all three statuses at once.
func allReq(path string, page, limit int) string {
	return fmt.Sprintf("GET /api/v1%s?limit=%d&page=%d&status=queued&status=waiting&status=in_progress", path, limit, page)
}

// statusReqs are the page-1 listings of one job source: one request for
// the three statuses.
func statusReqs(path string, limit int) []string {
	return []string{allReq(path, 1, limit)}
}

// TestSnapshotScopes reads every scope of the recordings' scene and pins the
// requests one pass costs (no /version request: SetGiteaVersion("")).
func TestSnapshotScopes(t *testing.T) {
	tests := []struct {
		name        string
		target      scope.Place
		token       string
		wantQueued  []int64
		wantBlocked []int64
		wantRunning []int64
		wantReqs    []string
	}{
		{
			name:        "global lists the admin endpoint",
			target:      scope.New("", ScopeGlobal, "", ""),
			token:       adminToken,
			wantQueued:  []int64{2, 3, 4, 5},
			wantBlocked: []int64{6},
			wantRunning: []int64{},
			wantReqs:    statusReqs("/admin/actions/jobs", 50),
		},
		{
			name:        "org lists the org endpoint",
			target:      scope.New("", ScopeOrg, "acme", ""),
			token:       adminToken,
			wantQueued:  []int64{2, 3, 4},
			wantBlocked: []int64{},
			wantRunning: []int64{},
			wantReqs:    statusReqs("/orgs/acme/actions/jobs", 50),
		},
		{
			name:        "repo lists the repo endpoint",
			target:      scope.New("", ScopeRepo, "alice", "tool"),
			token:       aliceToken,
			wantQueued:  []int64{5},
			wantBlocked: []int64{6},
			wantRunning: []int64{},
			wantReqs:    statusReqs("/repos/alice/tool/actions/jobs", 50),
		},
		{
			name:        "user lists the user's repos, then each repo",
			target:      scope.New("", ScopeUser, "alice", ""),
			token:       aliceToken,
			wantQueued:  []int64{5},
			wantBlocked: []int64{6},
			wantRunning: []int64{},
			wantReqs: append([]string{"GET /api/v1/users/alice/repos?limit=50&page=1"},
				statusReqs("/repos/alice/tool/actions/jobs", 50)...),
		},
		{
			name:        "user without repositories costs one request",
			target:      scope.New("", ScopeUser, "root", ""),
			token:       adminToken,
			wantQueued:  []int64{},
			wantBlocked: []int64{},
			wantRunning: []int64{},
			wantReqs:    []string{"GET /api/v1/users/root/repos?limit=50&page=1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, fixtureScene())
			c := newTestClient(t, f.URL, tt.token, Options{})

			snap, err := c.Snapshot(t.Context(), tt.target)
			require.NoError(t, err)

			assert.Equal(t, tt.wantQueued, ids(snap.Queued), "queued")
			assert.Equal(t, tt.wantBlocked, ids(snap.Blocked), "blocked")
			assert.Equal(t, tt.wantRunning, ids(snap.Running), "running")
			assert.ElementsMatch(t, tt.wantReqs, f.Requests())
			assert.Equal(t, len(tt.wantReqs), f.RequestCount())
		})
	}
}

// TestSnapshotAsksOnceForTheThreeStatuses: on every scope of the
// recordings' scene with a running job, one request per job source reads
// its jobs.
func TestSnapshotAsksOnceForTheThreeStatuses(t *testing.T) {
	targets := []struct {
		target scope.Place
		token  string
		path   string
	}{
		{scope.New("", ScopeGlobal, "", ""), adminToken, "/admin/actions/jobs"},
		{scope.New("", ScopeOrg, "acme", ""), adminToken, "/orgs/acme/actions/jobs"},
		{scope.New("", ScopeRepo, "acme", "app"), adminToken, "/repos/acme/app/actions/jobs"},
		{scope.New("", ScopeRepo, "alice", "tool"), aliceToken, "/repos/alice/tool/actions/jobs"},
	}
	for _, tt := range targets {
		t.Run(tt.target.String(), func(t *testing.T) {
			f := newFake(t, fixtureScene())
			require.NoError(t, f.SetJobStatus(2, giteatest.StatusInProgress, "gpu-pool-k2x9q"))

			one, err := newTestClient(t, f.URL, tt.token, Options{}).Snapshot(t.Context(), tt.target)
			require.NoError(t, err)
			assert.Equal(t, statusReqs(tt.path, 50), f.Requests())
			assert.NotEmpty(t, append(append(one.Queued, one.Blocked...), one.Running...))
		})
	}
}

// TestSnapshotJobFields checks that a job carries its raw labels, its
// runner, its repository and its times (no start before a runner took it:
// Gitea sends the epoch).
func TestSnapshotJobFields(t *testing.T) {
	f := newFake(t, fixtureScene())
	require.NoError(t, f.SetJobStatus(2, giteatest.StatusInProgress, "gpu-pool-k2x9q"))
	// As recorded in org-jobs-inprogress.json.
	started := time.Date(2026, time.November, 21, 5, 38, 17, 0, time.UTC)
	require.NoError(t, f.UpdateJob(2, func(j *giteatest.Job) { j.Started = started }))
	c := newTestClient(t, f.URL, adminToken, Options{})

	snap, err := c.Snapshot(t.Context(), scope.New("", ScopeGlobal, "", ""))
	require.NoError(t, err)

	// The recordings' scene was created at this moment (created_at).
	created := time.Date(2026, time.November, 21, 5, 36, 24, 0, time.UTC)
	assert.Equal(t, []Job{{ID: 2, Labels: []string{"self-hosted", "gpu"}, RunnerName: "gpu-pool-k2x9q", Repo: "acme/app", Created: created, Started: started}}, snap.Running)
	assert.Equal(t, []Job{{ID: 6, Labels: []string{"ubuntu-latest", "deploy"}, Repo: "alice/tool", Created: created}}, snap.Blocked)
	assert.Equal(t, Job{ID: 3, Labels: []string{"linux-arm64"}, Repo: "acme/app", Created: created}, snap.Queued[0])
}

// TestSnapshotSeparatesBlockedQueuedRunning follows the recorded repo
// alice/tool (job 6 needs job 5) as its jobs move between passes: a blocked
// job is never demand, and a job moves to exactly one list.
func TestSnapshotSeparatesBlockedQueuedRunning(t *testing.T) {
	f := newFake(t, fixtureScene())
	c := newTestClient(t, f.URL, aliceToken, Options{})
	target := scope.New("", ScopeRepo, "alice", "tool")

	steps := []struct {
		name                 string
		change               func(t *testing.T)
		queued, blocked, run []int64
		runner               string
	}{
		{name: "recorded: lint queued, deploy blocked", change: func(*testing.T) {},
			queued: []int64{5}, blocked: []int64{6}, run: []int64{}},
		{name: "a runner takes lint", change: func(t *testing.T) {
			require.NoError(t, f.SetJobStatus(5, giteatest.StatusInProgress, "rg-ci-b4k7q"))
		}, queued: []int64{}, blocked: []int64{6}, run: []int64{5}, runner: "rg-ci-b4k7q"},
		{name: "lint done, deploy becomes demand", change: func(t *testing.T) {
			require.NoError(t, f.SetJobStatus(5, giteatest.StatusCompleted, "rg-ci-b4k7q"))
			require.NoError(t, f.SetJobStatus(6, giteatest.StatusQueued, ""))
		}, queued: []int64{6}, blocked: []int64{}, run: []int64{}},
	}
	for _, st := range steps {
		st.change(t)
		snap, err := c.Snapshot(t.Context(), target)
		require.NoError(t, err, st.name)
		assert.Equal(t, st.queued, ids(snap.Queued), "%s: queued", st.name)
		assert.Equal(t, st.blocked, ids(snap.Blocked), "%s: blocked", st.name)
		assert.Equal(t, st.run, ids(snap.Running), "%s: running", st.name)
		if st.runner != "" {
			assert.Equal(t, st.runner, snap.Running[0].RunnerName, st.name)
		}
	}
}

// manyJobs adds n jobs with the given status to owner/repo, IDs from first.
func manyJobs(owner, repo string, first int64, n int, status string) []giteatest.Job {
	var out []giteatest.Job
	for i := range int64(n) {
		out = append(out, giteatest.Job{ID: first + i, Owner: owner, Repo: repo, Name: fmt.Sprintf("job-%d", first+i),
			Labels: []string{"ubuntu-latest"}, Status: status})
	}
	return out
}

// TestSnapshotPaginates reads every page and makes no request past the last
// one when Gitea's Link header says there is none.
func TestSnapshotPaginates(t *testing.T) {
	sevenQueued := giteatest.Scene{
		Orgs:  []giteatest.Org{{Name: "acme"}},
		Users: []string{"root", "alice"},
		Repos: []giteatest.Repo{{Owner: "acme", Name: "app"}},
		Jobs: append(manyJobs("acme", "app", 10, 7, giteatest.StatusQueued),
			manyJobs("acme", "app", 20, 2, giteatest.StatusBlocked)...),
	}
	tests := []struct {
		name       string
		scene      giteatest.Scene
		pageSize   int
		wantQueued []int64
		wantReqs   []string
	}{
		{
			name:       "all statuses at once: 4 queued and 1 blocked in pages of 2",
			scene:      fixtureScene(),
			pageSize:   2,
			wantQueued: []int64{2, 3, 4, 5},
			wantReqs: []string{
				allReq("/admin/actions/jobs", 1, 2),
				allReq("/admin/actions/jobs", 2, 2),
				allReq("/admin/actions/jobs", 3, 2),
			},
		},
		{
			name:       "all statuses at once: 7 queued and 2 blocked in pages of 3, last page full",
			scene:      sevenQueued,
			pageSize:   3,
			wantQueued: []int64{10, 11, 12, 13, 14, 15, 16},
			wantReqs: []string{
				allReq("/admin/actions/jobs", 1, 3),
				allReq("/admin/actions/jobs", 2, 3),
				allReq("/admin/actions/jobs", 3, 3),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.scene)
			c := newTestClient(t, f.URL, adminToken, Options{PageSize: tt.pageSize})

			snap, err := c.Snapshot(t.Context(), scope.New("", ScopeGlobal, "", ""))
			require.NoError(t, err)
			assert.Equal(t, tt.wantQueued, ids(snap.Queued))
			assert.ElementsMatch(t, tt.wantReqs, f.Requests())
		})
	}
}

// TestSnapshotUserScopeAcrossRepoPages reads every page of the user's
// repositories and every page of each repository's jobs, skips empty
// repositories and leaves other owners' repositories alone.
func TestSnapshotUserScopeAcrossRepoPages(t *testing.T) {
	scene := giteatest.Scene{
		Users: []string{"root", "bob", "carol"},
		Repos: []giteatest.Repo{
			{Owner: "bob", Name: "r1"}, {Owner: "bob", Name: "r2"}, {Owner: "carol", Name: "other"},
			{Owner: "bob", Name: "r3"}, {Owner: "bob", Name: "empty", Empty: true}, {Owner: "bob", Name: "r5"},
		},
		Jobs: []giteatest.Job{
			{ID: 1, Owner: "bob", Repo: "r1", Name: "a", Labels: []string{"x"}, Status: giteatest.StatusQueued},
			{ID: 2, Owner: "bob", Repo: "r1", Name: "b", Labels: []string{"x"}, Status: giteatest.StatusQueued},
			{ID: 3, Owner: "bob", Repo: "r1", Name: "c", Labels: []string{"x"}, Status: giteatest.StatusQueued},
			{ID: 4, Owner: "bob", Repo: "r2", Name: "d", Labels: []string{"x"}, Status: giteatest.StatusBlocked},
			{ID: 5, Owner: "bob", Repo: "r3", Name: "e", Labels: []string{"x"}, Status: giteatest.StatusInProgress, RunnerName: "rg-1"},
			{ID: 6, Owner: "bob", Repo: "r5", Name: "f", Labels: []string{"x"}, Status: giteatest.StatusQueued},
			{ID: 7, Owner: "carol", Repo: "other", Name: "g", Labels: []string{"x"}, Status: giteatest.StatusQueued},
			{ID: 8, Owner: "bob", Repo: "r5", Name: "h", Labels: []string{"x"}, Status: giteatest.StatusCompleted, Conclusion: "success"},
		},
	}
	f := newFake(t, scene)
	c := newTestClient(t, f.URL, adminToken, Options{PageSize: 2})

	snap, err := c.Snapshot(t.Context(), scope.New("", ScopeUser, "bob", ""))
	require.NoError(t, err)

	assert.Equal(t, []int64{1, 2, 3, 6}, ids(snap.Queued))
	assert.Equal(t, []int64{4}, ids(snap.Blocked))
	assert.Equal(t, []int64{5}, ids(snap.Running))
	assert.Equal(t, "bob/r5", snap.Queued[3].Repo)

	want := []string{
		"GET /api/v1/users/bob/repos?limit=2&page=1",
		"GET /api/v1/users/bob/repos?limit=2&page=2",
		"GET /api/v1/users/bob/repos?limit=2&page=3",
		// r1 has three queued jobs: two pages at limit 2.
		allReq("/repos/bob/r1/actions/jobs", 2, 2),
	}
	for _, r := range []string{"r1", "r2", "r3", "r5"} {
		want = append(want, statusReqs("/repos/bob/"+r+"/actions/jobs", 2)...)
	}
	assert.ElementsMatch(t, want, f.Requests())
	assert.Equal(t, 8, f.RequestCount(), "3 repo pages + 4 repos x 1 request + 1 extra page")
}

// TestSnapshotAgainstDevelopmentBuild guards against the SDK's version check:
// a Gitea built from source says "development", which the SDK cannot parse.
func TestSnapshotAgainstDevelopmentBuild(t *testing.T) {
	f := newFake(t, fixtureScene())
	f.SetVersion("development")
	c := newTestClient(t, f.URL, adminToken, Options{})

	_, err := c.Snapshot(t.Context(), scope.New("", ScopeOrg, "acme", ""))
	require.NoError(t, err)
	for _, r := range f.Requests() {
		assert.NotContains(t, r, "/version")
	}
}

// TestSnapshotErrors checks each error kind, what the error names, and that
// the token never shows up in it.
func TestSnapshotErrors(t *testing.T) {
	org := scope.New("", ScopeOrg, "acme", "")
	tests := []struct {
		name       string
		target     scope.Place
		token      string
		timeout    time.Duration
		fault      *giteatest.Fault
		wantKind   error
		wantStatus int
		wantURL    string // prefix of APIError.URL
		wantMsg    string // part of APIError.Message
	}{
		{name: "bad token", target: org, token: badToken,
			wantKind: ErrUnauthorized, wantStatus: 401, wantURL: "/api/v1/orgs/acme/actions/jobs?limit=50&page=1&status=",
			wantMsg: "invalid username, password or token"},
		{name: "non-admin token on global", target: scope.New("", ScopeGlobal, "", ""), token: aliceToken,
			wantKind: ErrForbidden, wantStatus: 403, wantURL: "/api/v1/admin/actions/jobs?", wantMsg: "user should be the site admin"},
		{name: "non-member token on org", target: org, token: aliceToken,
			wantKind: ErrForbidden, wantStatus: 403, wantURL: "/api/v1/orgs/acme/", wantMsg: "Must be an organization member"},
		{name: "unknown repo", target: scope.New("", ScopeRepo, "acme", "nope"), token: adminToken,
			wantKind: ErrNotFound, wantStatus: 404, wantURL: "/api/v1/repos/acme/nope/actions/jobs?", wantMsg: "not found"},
		{name: "unknown org", target: scope.New("", ScopeOrg, "nope", ""), token: adminToken,
			wantKind: ErrNotFound, wantStatus: 404, wantURL: "/api/v1/orgs/nope/actions/jobs?",
			wantMsg: map[giteatest.Version]string{giteatest.Gitea126: "GetOrgByName", giteatest.Gitea127: "not found"}[fakeVersion]},
		{name: "unknown user", target: scope.New("", ScopeUser, "nobody", ""), token: adminToken,
			wantKind: ErrNotFound, wantStatus: 404, wantURL: "/api/v1/users/nobody/repos?limit=50&page=1",
			wantMsg: "user redirect does not exist [name: nobody]"},
		{name: "server error", target: org, token: adminToken, fault: &giteatest.Fault{Status: 500},
			wantKind: ErrServer, wantStatus: 500, wantURL: "/api/v1/orgs/acme/actions/jobs?", wantMsg: "injected fault"},
		{name: "proxy error page in plain text", target: org, token: adminToken,
			fault:    &giteatest.Fault{Status: 502, Body: "502 Bad Gateway\n", ContentType: "text/plain"},
			wantKind: ErrServer, wantStatus: 502, wantURL: "/api/v1/orgs/acme/"},
		{name: "plain-text 404 from the router", target: org, token: adminToken,
			fault:    &giteatest.Fault{Status: 404, Body: "404 page not found\n", ContentType: "text/plain; charset=utf-8"},
			wantKind: ErrNotFound, wantStatus: 404, wantURL: "/api/v1/orgs/acme/"},
		{name: "rate limited", target: org, token: adminToken, fault: &giteatest.Fault{Status: 429},
			wantKind: ErrServer, wantStatus: 429, wantURL: "/api/v1/orgs/acme/"},
		{name: "rejected query", target: org, token: adminToken,
			fault:    &giteatest.Fault{Status: 400, Body: `{"message":"Invalid status running","url":"x"}`},
			wantKind: ErrBadResponse, wantStatus: 400, wantURL: "/api/v1/orgs/acme/", wantMsg: "Invalid status running"},
		{name: "garbage body", target: org, token: adminToken,
			fault:    &giteatest.Fault{Status: 200, Body: `{"jobs": [{"id": "not a number"`},
			wantKind: ErrBadResponse, wantStatus: 200, wantURL: "/api/v1/orgs/acme/", wantMsg: "cannot decode body"},
		{name: "html login page", target: scope.New("", ScopeUser, "alice", ""), token: adminToken,
			fault:    &giteatest.Fault{Status: 200, Body: "<html>sign in</html>", ContentType: "text/html"},
			wantKind: ErrBadResponse, wantStatus: 200, wantURL: "/api/v1/users/alice/repos?", wantMsg: "cannot decode body"},
		{name: "server echoes the token", target: org, token: adminToken,
			fault:    &giteatest.Fault{Status: 401, Body: `{"message":"token ` + adminToken + ` revoked"}`},
			wantKind: ErrUnauthorized, wantStatus: 401, wantURL: "/api/v1/orgs/acme/", wantMsg: "token [redacted] revoked"},
		{name: "timeout", target: org, token: adminToken, timeout: 50 * time.Millisecond,
			fault:    &giteatest.Fault{Delay: 2 * time.Second},
			wantKind: ErrTimeout, wantURL: "/api/v1/orgs/acme/", wantMsg: "per-request timeout 50ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, fixtureScene())
			if tt.fault != nil {
				// Fail all of the first listings, whichever runs first; a
				// 500 fails every request, as a broken Gitea does, since one
				// failing page is read around (readaround.go).
				f.InjectFault(faultCount(*tt.fault), *tt.fault)
			}
			c := newTestClient(t, f.URL, tt.token, Options{Timeout: tt.timeout})

			start := time.Now()
			_, err := c.Snapshot(t.Context(), tt.target)
			require.Error(t, err)
			assert.Less(t, time.Since(start), time.Second, "failures end the pass quickly")

			assert.ErrorIs(t, err, tt.wantKind)
			var apiErr *APIError
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, tt.wantStatus, apiErr.Status)
			assert.True(t, strings.HasPrefix(apiErr.URL, tt.wantURL), "URL %q should start with %q", apiErr.URL, tt.wantURL)
			assert.Contains(t, apiErr.Message, tt.wantMsg)
			assert.Contains(t, err.Error(), apiErr.URL, "the error names the URL")
			assert.NotContains(t, err.Error(), "://", "the URL is path and query only")

			for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", apiErr), apiErr.Message, apiErr.URL} {
				for _, tok := range []string{adminToken, aliceToken, badToken} {
					assert.NotContains(t, text, tok)
				}
			}
		})
	}
}

// TestSnapshotUnreachable reports a connection failure as ErrServer without
// an HTTP status.
func TestSnapshotUnreachable(t *testing.T) {
	f := giteatest.New()
	url := f.URL
	f.Close()
	c := newTestClient(t, url, adminToken, Options{Timeout: 500 * time.Millisecond})

	_, err := c.Snapshot(t.Context(), scope.New("", ScopeGlobal, "", ""))
	require.ErrorIs(t, err, ErrServer)
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Zero(t, apiErr.Status)
	assert.NotContains(t, err.Error(), adminToken)
	assert.NotContains(t, err.Error(), "://")
}

// TestSnapshotFailsOnLaterPage fails the whole pass when a page after the
// first fails: a partial list must never pass for the demand.
func TestSnapshotFailsOnLaterPage(t *testing.T) {
	f := newFake(t, fixtureScene())
	c := newTestClient(t, f.URL, adminToken, Options{PageSize: 1})

	// The user scope lists repos one page at a time before any job listing,
	// so the second request is deterministic: page 2 of the repos.
	require.NoError(t, f.Load(giteatest.Scene{
		Users: []string{"root", "alice"},
		Repos: []giteatest.Repo{{Owner: "alice", Name: "a"}, {Owner: "alice", Name: "b"}},
	}))
	f.InjectFault(1, giteatest.Fault{}) // first request: normal
	f.InjectFault(1, giteatest.Fault{Status: 503})

	_, err := c.Snapshot(t.Context(), scope.New("", ScopeUser, "alice", ""))
	require.ErrorIs(t, err, ErrServer)
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, "/api/v1/users/alice/repos?limit=1&page=2", apiErr.URL)
}

// TestSnapshotCancelled returns the caller's cancellation as such, not as a
// Gitea failure, and returns promptly.
func TestSnapshotCancelled(t *testing.T) {
	tests := []struct {
		name        string
		cancelAfter time.Duration
	}{
		{name: "cancelled before the pass", cancelAfter: 0},
		{name: "cancelled during a slow request", cancelAfter: 50 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, fixtureScene())
			f.InjectFault(maxConcurrentListings, giteatest.Fault{Delay: 2 * time.Second})
			c := newTestClient(t, f.URL, adminToken, Options{})

			ctx, cancel := context.WithCancel(t.Context())
			if tt.cancelAfter == 0 {
				cancel()
			} else {
				time.AfterFunc(tt.cancelAfter, cancel)
			}
			defer cancel()

			start := time.Now()
			_, err := c.Snapshot(ctx, scope.New("", ScopeGlobal, "", ""))
			require.ErrorIs(t, err, context.Canceled)
			var apiErr *APIError
			assert.NotErrorAs(t, err, &apiErr, "a cancellation is not a Gitea error")
			assert.Less(t, time.Since(start), time.Second)
		})
	}
}

// TestSnapshotConcurrentUse shares one Client between goroutines while the
// scene changes; run with -race.
func TestSnapshotConcurrentUse(t *testing.T) {
	f := newFake(t, fixtureScene())
	c := newTestClient(t, f.URL, adminToken, Options{})
	targets := []scope.Place{
		scope.New("", ScopeGlobal, "", ""), scope.New("", ScopeOrg, "acme", ""),
		scope.New("", ScopeUser, "alice", ""), scope.New("", ScopeRepo, "acme", "app"),
	}

	var wg sync.WaitGroup
	var failures atomic.Int32
	for i := range 8 {
		wg.Go(func() {
			for range 3 {
				if _, err := c.Snapshot(t.Context(), targets[i%len(targets)]); err != nil {
					failures.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 20 {
			status := giteatest.StatusQueued
			if i%2 == 0 {
				status = giteatest.StatusInProgress
			}
			_ = f.SetJobStatus(3, status, "")
		}
	})
	wg.Wait()
	assert.Zero(t, failures.Load())
}

// TestRequestsSendTokenAndUserAgent checks the headers and that
// Options.HTTPClient is the one used, on both ways a request is sent:
// around the SDK (a Snapshot's listing of three statuses) and through it
// (InProgress's listing of one).
func TestRequestsSendTokenAndUserAgent(t *testing.T) {
	snapshot := func(ctx context.Context, c Client) error {
		_, err := c.Snapshot(ctx, scope.New("", ScopeGlobal, "", ""))
		return err
	}
	inProgress := func(ctx context.Context, c Client) error {
		_, err := c.(Runners).InProgress(ctx, scope.New("", ScopeGlobal, "", ""))
		return err
	}
	tests := []struct {
		name     string
		ua       string
		read     func(context.Context, Client) error
		wantUA   string
		wantReqs int
	}{
		{name: "default user agent, one request around the SDK", read: snapshot, wantUA: DefaultUserAgent, wantReqs: 1},
		{name: "custom user agent, one request around the SDK", ua: "scaler/1.2.3", read: snapshot, wantUA: "scaler/1.2.3", wantReqs: 1},
		{name: "default user agent, one request through the SDK", read: inProgress, wantUA: DefaultUserAgent, wantReqs: 1},
		{name: "custom user agent, one request through the SDK", ua: "scaler/1.2.3", read: inProgress, wantUA: "scaler/1.2.3", wantReqs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var auths, uas []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				auths = append(auths, r.Header.Get("Authorization"))
				uas = append(uas, r.Header.Get("User-Agent"))
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"jobs":[],"total_count":0}`))
			}))
			t.Cleanup(srv.Close)
			rt := &countingTransport{next: http.DefaultTransport}
			c := newTestClient(t, srv.URL, adminToken, Options{UserAgent: tt.ua, HTTPClient: &http.Client{Transport: rt}})

			require.NoError(t, tt.read(t.Context(), c))
			assert.Equal(t, int32(tt.wantReqs), rt.n.Load(), "requests went through Options.HTTPClient")
			var wantAuths, wantUAs []string
			for range tt.wantReqs {
				wantAuths, wantUAs = append(wantAuths, "token "+adminToken), append(wantUAs, tt.wantUA)
			}
			assert.Equal(t, wantAuths, auths)
			assert.Equal(t, wantUAs, uas)
		})
	}
}

type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

func TestNewClient(t *testing.T) {
	tests := []struct {
		name     string
		baseURL  string
		token    string
		wantErr  string
		wantBase string // requestURI prefix for a valid URL
	}{
		{name: "plain", baseURL: "http://gitea:3000", token: "t", wantBase: "/api/v1/"},
		{name: "trailing slash", baseURL: "https://gitea.example.com/", token: "t", wantBase: "/api/v1/"},
		{name: "sub-path", baseURL: "https://example.com/git/", token: "t", wantBase: "/git/api/v1/"},
		{name: "credentials in URL", baseURL: "https://user:hunter2@example.com", token: "t", wantErr: "must not carry credentials"},
		{name: "no scheme", baseURL: "gitea:3000", token: "t", wantErr: "scheme must be http or https"},
		{name: "no host", baseURL: "http://", token: "t", wantErr: "no host"},
		{name: "query", baseURL: "http://gitea/?a=b", token: "t", wantErr: "no query"},
		{name: "unparsable", baseURL: "http://us:hunter2@gi tea\x7f", token: "t", wantErr: "invalid base URL"},
		{name: "empty token", baseURL: "http://gitea", token: "", wantErr: "empty API token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewClient(tt.baseURL, tt.token, Options{})
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.NotContains(t, err.Error(), "hunter2")
				return
			}
			require.NoError(t, err)
			impl := c.(*client)
			assert.True(t, strings.HasPrefix(impl.requestURI("/x", nil), tt.wantBase), impl.requestURI("/x", nil))
			assert.Equal(t, DefaultTimeout, impl.opts.Timeout)
			assert.Equal(t, DefaultPageSize, impl.opts.PageSize)
			assert.NotNil(t, impl.opts.HTTPClient)
		})
	}
}

func TestSnapshotRejectsInvalidTargetWithoutRequests(t *testing.T) {
	f := newFake(t, fixtureScene())
	c := newTestClient(t, f.URL, adminToken, Options{})
	_, err := c.Snapshot(t.Context(), scope.New("", ScopeOrg, "", ""))
	require.ErrorContains(t, err, "invalid target")
	assert.Zero(t, f.RequestCount())
}

func TestRepoFromURLs(t *testing.T) {
	tests := []struct {
		name, html, api, want string
	}{
		{name: "recorded html_url", html: "http://gitea.test:3000/acme/app/actions/runs/1/jobs/2", want: "acme/app"},
		{name: "sub-path", html: "https://h/git/acme/app/actions/runs/1/jobs/2", want: "acme/app"},
		{name: "html_url without job part", html: "https://h/acme/app/actions/runs/7", want: "acme/app"},
		{name: "repo named actions", html: "https://h/acme/actions/actions/runs/1/jobs/2", want: "acme/actions"},
		{name: "api url fallback", api: "http://gitea.test:3000/api/v1/repos/alice/tool/actions/jobs/6", want: "alice/tool"},
		{name: "api url under sub-path", html: "garbage", api: "https://h/git/api/v1/repos/alice/tool/actions/jobs/6", want: "alice/tool"},
		{name: "nothing usable", html: "https://h/", api: "https://h/api/v1/", want: ""},
		{name: "empty", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, repoFromURLs(tt.html, tt.api))
		})
	}
}

// The allowed Gitea URLs hold for every request the client sends: a
// redirect out of the list, and a dial to loopback that no entry names,
// are stopped before any request leaves, as ErrURLNotAllowed.
func TestClientRequestsStayWithinTheAllowedURLs(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhere.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jobs":[],"total_count":0}`))
	}))
	t.Cleanup(other.Close)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusFound)
	}))
	t.Cleanup(redirecting.Close)

	onlyRedirecting, err := giteaurl.Parse([]string{redirecting.URL})
	require.NoError(t, err)
	empty, err := giteaurl.Parse(nil)
	require.NoError(t, err)
	tests := []struct {
		name    string
		policy  *giteaurl.Policy
		url     string
		message string
	}{
		{"a redirect to a host not listed", onlyRedirecting, redirecting.URL, "is under none of the allowed Gitea URLs"},
		{"loopback with an empty list", empty, other.URL, "loopback, link-local or metadata address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(t, tt.url, adminToken, Options{HTTPClient: tt.policy.HTTPClient(nil)})
			_, err := c.Snapshot(context.Background(), scope.New("", ScopeOrg, "acme", ""))
			require.ErrorIs(t, err, ErrURLNotAllowed)
			assert.Contains(t, err.Error(), tt.message)
			assert.NotContains(t, err.Error(), adminToken)
			assert.Zero(t, elsewhere.Load(), "no request reached the host the list does not allow")
		})
	}
}
