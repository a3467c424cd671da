package giteatest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

func TestPathFaultAppliesOnlyToItsPath(t *testing.T) {
	s := start(t, Scene{Orgs: []Org{{Name: "a"}, {Name: "b"}}})
	s.InjectFault(1, Fault{Path: "/api/v1/orgs/b/", Status: 503})

	assert.Equal(t, http.StatusOK, get(t, s, "/api/v1/orgs/a/actions/jobs", token).status, "another path passes the fault by")
	assert.Equal(t, http.StatusServiceUnavailable, get(t, s, "/api/v1/orgs/b/actions/jobs", token).status)
	assert.Equal(t, http.StatusOK, get(t, s, "/api/v1/orgs/b/actions/jobs", token).status, "used up")
}

func TestLargeBodyFault(t *testing.T) {
	const size = 3<<20 + 17
	tests := []struct {
		name          string
		declareLength bool
		wantLength    int64
	}{
		{name: "chunked, no Content-Length", wantLength: -1},
		{name: "with Content-Length", declareLength: true, wantLength: size},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t, queuedScene(1))
			s.InjectFault(1, Fault{LargeBody: size, DeclareLength: tt.declareLength})

			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL+"/api/v1/admin/actions/jobs", nil)
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)

			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, tt.wantLength, resp.ContentLength)
			assert.Len(t, body, size)
			var listing struct {
				TotalCount int   `json:"total_count"`
				Jobs       []any `json:"jobs"`
			}
			require.NoError(t, json.Unmarshal(body, &listing), "a valid, empty listing: only its size is wrong")
			assert.Empty(t, listing.Jobs)
		})
	}
}

func TestBeforeFaultChangesTheSceneBetweenPages(t *testing.T) {
	s := start(t, queuedScene(3))
	s.InjectFault(1, Fault{Path: "/api/v1/admin/"})
	s.InjectFault(1, Fault{Path: "/api/v1/admin/", Before: func() { s.RemoveJob(1) }})

	first := get(t, s, "/api/v1/admin/actions/jobs?limit=1&page=1", token)
	second := get(t, s, "/api/v1/admin/actions/jobs?limit=1&page=2", token)

	assert.Contains(t, first.body, `"id":1,`)
	assert.Contains(t, second.body, `"id":3,`, "job 1 went between the pages, so job 2 moved to page 1 and was never read")
}

func TestRewriteQueryFaultIsAProxyThatDropsTheStatusFilter(t *testing.T) {
	s := start(t, queuedScene(2))
	require.NoError(t, s.SetJobStatus(2, StatusCompleted, "r1"))
	s.InjectFault(1, Fault{RewriteQuery: func(q url.Values) { q.Del("status") }})

	a := get(t, s, "/api/v1/admin/actions/jobs?status=queued&status=in_progress", token)

	assert.Contains(t, a.body, `"status":"completed"`, "the finished job, which the filter would have left out")
}
