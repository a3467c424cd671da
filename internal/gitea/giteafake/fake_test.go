package giteafake

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const token = "fake-test-token"

func start(t *testing.T, sc Scene) *Server {
	t.Helper()
	s := New()
	t.Cleanup(s.Close)
	s.AddToken(token, "root", true)
	require.NoError(t, s.Load(sc))
	return s
}

type answer struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, s *Server, path, tok string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL+path, nil)
	require.NoError(t, err)
	if tok != "" {
		req.Header.Set("Authorization", "token "+tok)
	}
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func queuedScene(n int) Scene {
	sc := Scene{Users: []string{"root"}, Repos: []Repo{{Owner: "root", Name: "r"}}}
	for i := range n {
		sc.Jobs = append(sc.Jobs, Job{ID: int64(i + 1), Owner: "root", Repo: "r", Name: "j", Status: StatusQueued})
	}
	return sc
}

func TestMiddlePageHasAllLinks(t *testing.T) {
	s := start(t, queuedScene(5))
	a := get(t, s, "/api/v1/repos/root/r/actions/jobs?status=queued&limit=2&page=2", token)
	require.Equal(t, http.StatusOK, a.status)
	base := s.URL + "/api/v1/repos/root/r/actions/jobs?limit=2&page="
	assert.Equal(t,
		`<`+base+`3&status=queued>; rel="next",<`+base+`3&status=queued>; rel="last",`+
			`<`+base+`1&status=queued>; rel="first",<`+base+`1&status=queued>; rel="prev"`,
		a.header.Get("Link"))
	assert.Equal(t, "5", a.header.Get("X-Total-Count"))
}

func TestLimitDefaultsAndCap(t *testing.T) {
	tests := []struct {
		query string
		want  int
	}{
		{query: "", want: DefaultPageSize},
		{query: "?limit=0", want: DefaultPageSize},
		{query: "?limit=7", want: 7},
		{query: "?limit=500", want: MaxPageSize},
	}
	s := start(t, queuedScene(60))
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			a := get(t, s, "/api/v1/admin/actions/jobs"+tt.query, token)
			var body struct {
				Jobs       []json.RawMessage `json:"jobs"`
				TotalCount int               `json:"total_count"`
			}
			require.NoError(t, json.Unmarshal([]byte(a.body), &body))
			assert.Len(t, body.Jobs, tt.want)
			assert.Equal(t, 60, body.TotalCount)
		})
	}
}

func TestStatusFilters(t *testing.T) {
	sc := Scene{Users: []string{"root"}, Repos: []Repo{{Owner: "root", Name: "r"}}, Jobs: []Job{
		{ID: 1, Owner: "root", Repo: "r", Status: StatusBlocked},
		{ID: 2, Owner: "root", Repo: "r", Status: StatusQueued},
		{ID: 3, Owner: "root", Repo: "r", Status: StatusInProgress},
		{ID: 4, Owner: "root", Repo: "r", Status: StatusCompleted, Conclusion: "failure"},
	}}
	tests := []struct {
		query  string
		status int
		want   []int64
	}{
		{query: "", status: 200, want: []int64{1, 2, 3, 4}},
		{query: "?status=pending", status: 200, want: []int64{1}},
		{query: "?status=waiting", status: 200, want: []int64{1}},
		{query: "?status=pending&status=waiting", status: 200, want: []int64{1}},
		{query: "?status=queued&status=in_progress", status: 200, want: []int64{2, 3}},
		{query: "?status=completed", status: 200, want: []int64{4}},
		{query: "?status=failure", status: 200, want: []int64{4}},
		{query: "?status=success", status: 200, want: []int64{}},
		{query: "?status=running", status: 400},
		{query: "?status=queued&status=bogus", status: 400},
	}
	s := start(t, sc)
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			a := get(t, s, "/api/v1/repos/root/r/actions/jobs"+tt.query, token)
			require.Equal(t, tt.status, a.status, a.body)
			if tt.status != 200 {
				assert.Contains(t, a.body, `"message":"Invalid status`)
				return
			}
			var body struct {
				Jobs []struct {
					ID int64 `json:"id"`
				} `json:"jobs"`
			}
			require.NoError(t, json.Unmarshal([]byte(a.body), &body))
			got := []int64{}
			for _, j := range body.Jobs {
				got = append(got, j.ID)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestAuthAndRouting(t *testing.T) {
	s := start(t, queuedScene(1))
	tests := []struct {
		name, path, tok string
		status          int
		contentType     string
	}{
		{name: "missing token", path: "/api/v1/admin/actions/jobs", status: 401, contentType: "application/json;charset=utf-8"},
		{name: "unknown route needs no token", path: "/api/v1/users/root/actions/jobs", status: 404, contentType: "text/plain; charset=utf-8"},
		{name: "outside the API", path: "/root/r", tok: token, status: 404, contentType: "text/plain; charset=utf-8"},
		{name: "version needs no token", path: "/api/v1/version", status: 200, contentType: "application/json;charset=utf-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := get(t, s, tt.path, tt.tok)
			assert.Equal(t, tt.status, a.status)
			assert.Equal(t, tt.contentType, a.header.Get("Content-Type"))
		})
	}
}

func TestFaultsApplyToTheNextRequestsInOrder(t *testing.T) {
	s := start(t, queuedScene(1))
	s.InjectFault(2, Fault{Status: 500})
	s.InjectFault(1, Fault{Status: 200, Body: "garbage", ContentType: "text/plain"})

	var got []int
	for range 4 {
		got = append(got, get(t, s, "/api/v1/admin/actions/jobs", token).status)
	}
	assert.Equal(t, []int{500, 500, 200, 200}, got)
	assert.Equal(t, 4, s.RequestCount())
	s.ResetRequests()
	assert.Zero(t, s.RequestCount())
	assert.Empty(t, s.Requests())
}

func TestDelayFaultHoldsTheAnswer(t *testing.T) {
	s := start(t, queuedScene(1))
	s.InjectFault(1, Fault{Delay: 100 * time.Millisecond})
	begin := time.Now()
	a := get(t, s, "/api/v1/admin/actions/jobs", token)
	assert.Equal(t, http.StatusOK, a.status)
	assert.GreaterOrEqual(t, time.Since(begin), 100*time.Millisecond)
}

func TestSceneChecks(t *testing.T) {
	tests := []struct {
		name  string
		scene Scene
	}{
		{name: "repo of unknown owner", scene: Scene{Repos: []Repo{{Owner: "x", Name: "r"}}}},
		{name: "duplicate owner", scene: Scene{Orgs: []Org{{Name: "a"}}, Users: []string{"a"}}},
		{name: "duplicate repo", scene: Scene{Users: []string{"a"}, Repos: []Repo{{Owner: "a", Name: "r"}, {Owner: "a", Name: "r"}}}},
		{name: "job in unknown repo", scene: Scene{Users: []string{"a"}, Jobs: []Job{{ID: 1, Owner: "a", Repo: "r", Status: StatusQueued}}}},
		{name: "job with API-invalid status", scene: Scene{Users: []string{"a"}, Repos: []Repo{{Owner: "a", Name: "r"}},
			Jobs: []Job{{ID: 1, Owner: "a", Repo: "r", Status: "running"}}}},
		{name: "duplicate job", scene: Scene{Users: []string{"a"}, Repos: []Repo{{Owner: "a", Name: "r"}},
			Jobs: []Job{{ID: 1, Owner: "a", Repo: "r", Status: StatusQueued}, {ID: 1, Owner: "a", Repo: "r", Status: StatusQueued}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Error(t, New().Load(tt.scene))
		})
	}
}

func TestJobChanges(t *testing.T) {
	s := start(t, queuedScene(1))
	assert.Error(t, s.SetJobStatus(99, StatusQueued, ""), "unknown job")
	assert.Error(t, s.SetJobStatus(1, "running", ""), "unknown status")
	require.NoError(t, s.SetJobStatus(1, StatusInProgress, "rg-abcde"))
	require.NoError(t, s.AddJob(Job{ID: 2, Owner: "root", Repo: "r", Status: StatusBlocked}))
	assert.Error(t, s.AddJob(Job{ID: 3, Owner: "root", Repo: "missing", Status: StatusBlocked}))

	a := get(t, s, "/api/v1/admin/actions/jobs?status=in_progress", token)
	assert.Contains(t, a.body, `"runner_name":"rg-abcde"`)
	assert.Contains(t, a.body, `"runner_id":1001`)

	s.RemoveJob(1)
	a = get(t, s, "/api/v1/admin/actions/jobs", token)
	assert.Equal(t, "1", a.header.Get("X-Total-Count"))
}
