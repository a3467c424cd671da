package giteatest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

// A job whose repository is gone fails, with 500 and the release's
// message, every page of the instance's listing that holds it, and only
// those; an org's listing leaves it out, as the bed's Gitea 1.26 does
// (internal/e2e/faults/gonerepo_test.go).
func TestAJobWhoseRepositoryIsGoneFailsThePagesThatHoldIt(t *testing.T) {
	sc := Scene{Orgs: []Org{{Name: "acme"}}, Users: []string{"root"},
		Repos: []Repo{{Owner: "acme", Name: "app"}, {Owner: "acme", Name: "gone"}},
		Jobs: []Job{
			{ID: 1, Owner: "acme", Repo: "app", Status: StatusQueued},
			{ID: 2, Owner: "acme", Repo: "gone", Status: StatusQueued},
			{ID: 3, Owner: "acme", Repo: "app", Status: StatusQueued},
		}}
	for _, v := range Versions() {
		t.Run(string(v), func(t *testing.T) {
			s := start(t, sc)
			require.NoError(t, s.AnswerAs(v))
			require.NoError(t, s.DeleteRepoKeepingJobs("acme", "gone"))
			want := map[Version]string{
				Gitea126: "repository does not exist [id: 2, uid: 0, owner_name: , name: ]",
				Gitea127: "job 2 is missing its run or repository",
			}[v]
			tests := []struct {
				path   string
				status int
			}{
				{"/api/v1/admin/actions/jobs", 500},
				{"/api/v1/admin/actions/jobs?limit=1&page=2", 500},
				{"/api/v1/admin/actions/jobs?limit=1&page=1", 200},
				{"/api/v1/admin/actions/jobs?limit=1&page=3", 200},
				{"/api/v1/orgs/acme/actions/jobs", 200},
				{"/api/v1/repos/acme/app/actions/jobs", 200},
				{"/api/v1/repos/acme/gone/actions/jobs", 404},
			}
			for _, tt := range tests {
				a := get(t, s, tt.path, token)
				assert.Equal(t, tt.status, a.status, "%s: %s", tt.path, a.body)
				if tt.status == 500 {
					assert.Contains(t, a.body, want, tt.path)
				}
			}
		})
	}
}
