package gitea

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	sdk "code.gitea.io/sdk/gitea"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// page is one scripted answer: how many items, the Link's next page (0: a
// Link without rel="next"; -1: no Link header at all) and X-Total-Count
// ("" for none).
type page struct {
	n     int
	next  int
	total string
	err   error
}

func scripted(pages map[int]page) (pageFunc, *[]int) {
	var asked []int
	return func(_ context.Context, p int) (int, *sdk.Response, error) {
		asked = append(asked, p)
		pg, ok := pages[p]
		if !ok {
			return 0, nil, fmt.Errorf("unexpected page %d", p)
		}
		if pg.err != nil {
			return 0, nil, pg.err
		}
		h := http.Header{}
		if pg.next >= 0 {
			h.Set("Link", `<http://elsewhere/x?page=1>; rel="first"`)
		}
		if pg.total != "" {
			h.Set("X-Total-Count", pg.total)
		}
		next := max(pg.next, 0)
		return pg.n, &sdk.Response{Response: &http.Response{StatusCode: 200, Header: h}, NextPage: next}, nil
	}, &asked
}

func TestPaginate(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name        string
		stopOnEmpty bool
		pages       map[int]page
		wantPages   []int
		wantErr     error
	}{
		{name: "follows rel=next until it is gone", stopOnEmpty: true,
			pages:     map[int]page{1: {n: 2, next: 2}, 2: {n: 2, next: 3}, 3: {n: 1}},
			wantPages: []int{1, 2, 3}},
		{name: "Link may skip pages", stopOnEmpty: true,
			pages:     map[int]page{1: {n: 2, next: 3}, 3: {n: 1}},
			wantPages: []int{1, 3}},
		{name: "an empty page ends a job listing", stopOnEmpty: true,
			pages:     map[int]page{1: {n: 2, next: 2}, 2: {n: 0, next: 3}},
			wantPages: []int{1, 2}},
		{name: "an empty page does not end a filtered listing", stopOnEmpty: false,
			pages:     map[int]page{1: {n: 0, next: 2}, 2: {n: 1}},
			wantPages: []int{1, 2}},
		{name: "no Link header: X-Total-Count decides", stopOnEmpty: true,
			pages:     map[int]page{1: {n: 2, next: -1, total: "5"}, 2: {n: 2, next: -1, total: "5"}, 3: {n: 1, next: -1, total: "5"}},
			wantPages: []int{1, 2, 3}},
		{name: "no Link header and no total: one page", stopOnEmpty: true,
			pages:     map[int]page{1: {n: 2, next: -1}},
			wantPages: []int{1}},
		{name: "a Link naming an earlier page is an error", stopOnEmpty: true,
			pages:     map[int]page{1: {n: 2, next: 2}, 2: {n: 2, next: 1}},
			wantPages: []int{1, 2}, wantErr: ErrBadResponse},
		{name: "a failing page fails the listing", stopOnEmpty: true,
			pages:     map[int]page{1: {n: 2, next: 2}, 2: {err: boom}},
			wantPages: []int{1, 2}, wantErr: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fetch, asked := scripted(tt.pages)
			err := paginate(t.Context(), tt.stopOnEmpty, func(p int) string { return "/x?page=" + strconv.Itoa(p) }, fetch)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantPages, *asked)
		})
	}
}

// TestPaginateStopsEndlessListing guards against a server that names a next
// page forever.
func TestPaginateStopsEndlessListing(t *testing.T) {
	calls := 0
	fetch := func(_ context.Context, p int) (int, *sdk.Response, error) {
		calls++
		h := http.Header{"Link": {"x"}}
		return 1, &sdk.Response{Response: &http.Response{StatusCode: 200, Header: h}, NextPage: p + 1}, nil
	}
	err := paginate(t.Context(), true, func(p int) string { return "/x?page=" + strconv.Itoa(p) }, fetch)
	require.ErrorIs(t, err, ErrBadResponse)
	assert.ErrorContains(t, err, "more than 1000 pages")
	assert.Equal(t, maxPages, calls)
}

// TestBuildSnapshotDedupes keeps one entry per job ID: a job seen twice in a
// listing (the list shifted while we paged) counts once, and a job seen in
// two listings (it moved while we read) counts in its latest state.
func TestBuildSnapshotDedupes(t *testing.T) {
	src := repoSource("acme", "app")
	ls := []listing{{src, []string{statusQueued}}, {src, []string{statusBlocked}}, {src, []string{statusRunning}}}
	j := func(id int64, status string) *sdk.ActionWorkflowJob {
		return &sdk.ActionWorkflowJob{ID: id, Name: "j" + strconv.FormatInt(id, 10), Status: status, Labels: []string{"l"}}
	}
	results := []listed{
		{jobs: []*sdk.ActionWorkflowJob{j(3, "queued"), j(1, "queued"), j(3, "queued"), j(2, "queued"), nil}},
		{jobs: []*sdk.ActionWorkflowJob{j(1, "waiting"), j(4, "waiting")}, unlisted: 2},
		{jobs: []*sdk.ActionWorkflowJob{j(2, "in_progress")}, unlisted: 1},
	}
	snap := buildSnapshot(ls, results)

	assert.Equal(t, []int64{1, 3}, ids(snap.Queued), "1 moved blocked->queued, 3 seen twice")
	assert.Equal(t, []int64{4}, ids(snap.Blocked))
	assert.Equal(t, []int64{2}, ids(snap.Running), "2 moved queued->running")
	assert.Equal(t, "acme/app", snap.Queued[0].Repo, "no URLs: the listing's repository")
	assert.Equal(t, 3, snap.Unlisted, "what the listings could not read adds up")
}

// TestBuildSnapshotPlacesJobsOfOneRequestByTheirStatus reads a listing
// that asked for all three statuses at once: each job goes where its own
// status says, blocked under any name Gitea gives it (waiting in 1.26,
// pending and requested later), a job that finished while we paged is
// dropped, and a job seen twice counts once, in its latest state.
func TestBuildSnapshotPlacesJobsOfOneRequestByTheirStatus(t *testing.T) {
	j := func(id int64, status string) *sdk.ActionWorkflowJob {
		return &sdk.ActionWorkflowJob{ID: id, Status: status}
	}
	ls := []listing{{repoSource("acme", "app"), allStatuses}}
	results := []listed{{jobs: []*sdk.ActionWorkflowJob{
		j(1, "queued"), j(2, "waiting"), j(3, "in_progress"), j(4, "pending"), j(5, "requested"),
		j(6, "completed"), j(7, "queued"), j(7, "in_progress"),
	}}}
	snap := buildSnapshot(ls, results)

	assert.Equal(t, []int64{1}, ids(snap.Queued))
	assert.Equal(t, []int64{2, 4, 5}, ids(snap.Blocked))
	assert.Equal(t, []int64{3, 7}, ids(snap.Running), "7 moved queued->running between pages")
}

// TestNextLinkReadsThePageOfRelNext parses Gitea's Link header the way the
// SDK does for the requests that go around it.
func TestNextLinkReadsThePageOfRelNext(t *testing.T) {
	tests := []struct {
		link string
		want int
	}{
		{`<http://gitea.test:3000/api/v1/admin/actions/jobs?limit=2&page=2&status=queued>; rel="next",<http://gitea.test:3000/api/v1/admin/actions/jobs?limit=2&page=3&status=queued>; rel="last"`, 2},
		{`<http://x/api/v1/a?page=1>; rel="first",<http://x/api/v1/a?page=1>; rel="prev"`, 0},
		{``, 0},
		{`garbage`, 0},
		{`<http://x/a?page=7>; rel=next`, 7},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, nextLink(tt.link), tt.link)
	}
}

// TestBuildSnapshotCopiesLabels makes sure a Job does not share its labels
// slice with the decoded response.
func TestBuildSnapshotCopiesLabels(t *testing.T) {
	src := adminSource()
	raw := &sdk.ActionWorkflowJob{ID: 1, Labels: []string{"a"}}
	snap := buildSnapshot([]listing{{src, []string{statusQueued}}}, []listed{{jobs: []*sdk.ActionWorkflowJob{raw}}})
	raw.Labels[0] = "changed"
	assert.Equal(t, []string{"a"}, snap.Queued[0].Labels)
	assert.Empty(t, snap.Queued[0].Repo)
}

func TestAPIErrorText(t *testing.T) {
	tests := []struct {
		name string
		err  *APIError
		want string
	}{
		{name: "full", err: &APIError{Kind: ErrForbidden, URL: "/api/v1/admin/actions/jobs?limit=50&page=1&status=queued", Status: 403, Message: "user should be the site admin"},
			want: "gitea: GET /api/v1/admin/actions/jobs?limit=50&page=1&status=queued: forbidden (HTTP 403): user should be the site admin"},
		{name: "no status", err: &APIError{Kind: ErrTimeout, URL: "/api/v1/x", Message: "slow"},
			want: "gitea: GET /api/v1/x: timeout: slow"},
		{name: "no kind, no message", err: &APIError{URL: "/api/v1/x", Status: 500},
			want: "gitea: GET /api/v1/x: error (HTTP 500)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.err.Error())
		})
	}
}

func TestTidy(t *testing.T) {
	long := make([]byte, 0, 400)
	for range 200 {
		long = append(long, "é"...)
	}
	tests := []struct {
		name, in, token, want string
	}{
		{name: "one line", in: "a\n  b\tc\n", want: "a b c"},
		{name: "token redacted", in: "bad token s3cr3t!", token: "s3cr3t!", want: "bad token [redacted]"},
		{name: "cut on a rune boundary", in: "a" + string(long), want: "a" + string([]rune(string(long))[:maxMessageRunes-1]) + "…"},
		{name: "short enough", in: string(long), want: string(long)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tidy(tt.in, tt.token))
		})
	}
}

func TestGiteaMessage(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{name: "Gitea's error", body: `{"message":"user should be the site admin","url":"https://gitea.test/api/swagger"}`, want: "user should be the site admin"},
		{name: "plain text", body: "404 page not found\n"},
		{name: "JSON without message", body: `{"error":"x"}`},
		{name: "message not a string", body: `{"message":["a"]}`},
		{name: "JSON array", body: `["message"]`},
		{name: "empty", body: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, giteaMessage([]byte(tt.body)))
		})
	}
}
