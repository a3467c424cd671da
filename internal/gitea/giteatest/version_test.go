package giteatest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startAs starts a fake answering as v.
func startAs(t *testing.T, v Version, sc Scene) *Server {
	t.Helper()
	s := start(t, sc)
	require.NoError(t, s.AnswerAs(v))
	return s
}

type listedJob struct {
	ID         int64  `json:"id"`
	Status     string `json:"status"`
	Conclusion string `json:"conclusion"`
	RunnerName string `json:"runner_name"`
	RunAttempt int64  `json:"run_attempt"`
}

func listJobsOf(t *testing.T, s *Server, query string) []listedJob {
	t.Helper()
	a := get(t, s, "/api/v1/repos/root/r/actions/jobs"+query, token)
	require.Equal(t, http.StatusOK, a.status, a.body)
	var body struct {
		Jobs []listedJob `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal([]byte(a.body), &body))
	return body.Jobs
}

func idsOf(jobs []listedJob) []int64 {
	out := []int64{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

func TestAnswerAsRefusesAnUnknownVersion(t *testing.T) {
	s := start(t, Scene{})
	assert.ErrorContains(t, s.AnswerAs("1.25"), `unknown Gitea version "1.25"`)
	assert.NoError(t, s.AnswerAs(Gitea127))
}

// A cancelled job whose runner still cleans up: Gitea 1.27 shows it as
// in_progress but no status filter selects it; 1.26 never has it, the
// cancel ends it at once.
func TestCancellingJob(t *testing.T) {
	sc := Scene{Users: []string{"root"}, Repos: []Repo{{Owner: "root", Name: "r"}}, Jobs: []Job{
		{ID: 1, Owner: "root", Repo: "r", Status: StatusCancelling, RunnerID: 7, RunnerName: "rn"},
		{ID: 2, Owner: "root", Repo: "r", Status: StatusInProgress, RunnerID: 8, RunnerName: "rm"},
	}}
	tests := []struct {
		version Version
		all     listedJob
		filters map[string][]int64
	}{
		{version: Gitea126, all: listedJob{ID: 1, Status: "completed", Conclusion: "cancelled", RunnerName: "rn"},
			filters: map[string][]int64{"in_progress": {2}, "completed": {1}, "cancelled": {1}, "queued": {}, "waiting": {}}},
		{version: Gitea127, all: listedJob{ID: 1, Status: "in_progress", RunnerName: "rn"},
			filters: map[string][]int64{"in_progress": {2}, "completed": {}, "cancelled": {}, "queued": {}, "waiting": {}}},
	}
	for _, tt := range tests {
		t.Run(string(tt.version), func(t *testing.T) {
			s := startAs(t, tt.version, sc)
			all := listJobsOf(t, s, "")
			require.Len(t, all, 2)
			assert.Equal(t, tt.all, all[0])
			for filter, want := range tt.filters {
				assert.Equal(t, want, idsOf(listJobsOf(t, s, "?status="+filter)), "status=%s", filter)
			}
		})
	}
}

func TestErrorBodiesPerVersion(t *testing.T) {
	sc := Scene{Orgs: []Org{{Name: "acme"}}, Users: []string{"root"}, Repos: []Repo{{Owner: "root", Name: "r"}}}
	tests := []struct {
		path   string
		status int
		want   map[Version]string
	}{
		{path: "/api/v1/repos/root/r/actions/jobs?status=running", status: http.StatusBadRequest, want: map[Version]string{
			Gitea126: `{"message":"Invalid status running","url":"URL/api/swagger"}`,
			Gitea127: `{"message":"invalid status running","url":"URL/api/swagger"}`,
		}},
		{path: "/api/v1/orgs/nope/actions/jobs", status: http.StatusNotFound, want: map[Version]string{
			Gitea126: `{"errors":["org does not exist [id: 0, name: nope]"],"message":"GetOrgByName","url":"URL/api/swagger"}`,
			Gitea127: `{"message":"not found","url":"URL/api/swagger"}`,
		}},
		{path: "/api/v1/orgs/nope/actions/runners", status: http.StatusNotFound, want: map[Version]string{
			Gitea126: `{"errors":["org does not exist [id: 0, name: nope]"],"message":"GetOrgByName","url":"URL/api/swagger"}`,
			Gitea127: `{"message":"not found","url":"URL/api/swagger"}`,
		}},
		{path: "/api/v1/repos/root/nope/actions/jobs", status: http.StatusNotFound, want: map[Version]string{
			Gitea126: `{"errors":null,"message":"not found","url":"URL/api/swagger"}`,
			Gitea127: `{"message":"not found","url":"URL/api/swagger"}`,
		}},
		{path: "/api/v1/admin/actions/runners/42", status: http.StatusNotFound, want: map[Version]string{
			Gitea126: `{"errors":null,"message":"Runner not found","url":"URL/api/swagger"}`,
			Gitea127: `{"message":"runner with id 42: resource does not exist","url":"URL/api/swagger"}`,
		}},
	}
	for _, v := range Versions() {
		for _, tt := range tests {
			t.Run(string(v)+tt.path, func(t *testing.T) {
				s := startAs(t, v, sc)
				a := get(t, s, tt.path, token)
				assert.Equal(t, tt.status, a.status)
				assert.JSONEq(t, strings.ReplaceAll(tt.want[v], "URL", s.URL), a.body)
			})
		}
	}
}

func TestRunnerListingOrderAndBusyPerVersion(t *testing.T) {
	sc := Scene{Users: []string{"root"}, Runners: []Runner{
		{ID: 1, Name: "idle-old", Online: true},
		{ID: 2, Name: "offline", Online: false, Active: true},
		{ID: 3, Name: "active", Online: true, Active: true},
		{ID: 4, Name: "idle-disabled", Online: true, Disabled: true},
		{ID: 5, Name: "idle-new", Online: true},
	}}
	tests := []struct {
		version Version
		want    []string
	}{
		// 1.26: last_online DESC alone; the fake puts online runners first,
		// newest first.
		{version: Gitea126, want: []string{"idle-new", "idle-disabled", "active", "idle-old", "offline"}},
		// 1.27: active, idle, offline; enabled before disabled; then ID.
		{version: Gitea127, want: []string{"active", "idle-old", "idle-new", "idle-disabled", "offline"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.version), func(t *testing.T) {
			s := startAs(t, tt.version, sc)
			a := get(t, s, "/api/v1/admin/actions/runners", token)
			require.Equal(t, http.StatusOK, a.status, a.body)
			var body struct {
				Runners []struct {
					Name   string `json:"name"`
					Status string `json:"status"`
					Busy   bool   `json:"busy"`
				} `json:"runners"`
			}
			require.NoError(t, json.Unmarshal([]byte(a.body), &body))
			var names []string
			busy := map[string]bool{}
			for _, r := range body.Runners {
				names = append(names, r.Name)
				busy[r.Name] = r.Busy
			}
			assert.Equal(t, tt.want, names)
			assert.Equal(t, map[string]bool{"active": true, "idle-old": false, "idle-new": false, "idle-disabled": false, "offline": false}, busy,
				"busy is Gitea's active status, which an offline runner never has")
		})
	}
}

func TestJobsSortParametersPerVersion(t *testing.T) {
	sc := queuedScene(3)
	tests := []struct {
		query  string
		status map[Version]int
		want   map[Version][]int64
	}{
		{query: "?sort=id&order=desc", status: map[Version]int{Gitea126: 200, Gitea127: 200},
			want: map[Version][]int64{Gitea126: {1, 2, 3}, Gitea127: {3, 2, 1}}},
		{query: "?sort=id", status: map[Version]int{Gitea126: 200, Gitea127: 200},
			want: map[Version][]int64{Gitea126: {1, 2, 3}, Gitea127: {1, 2, 3}}},
		{query: "?sort=name", status: map[Version]int{Gitea126: 200, Gitea127: 422}},
		{query: "?sort=id&order=up", status: map[Version]int{Gitea126: 200, Gitea127: 422}},
	}
	for _, v := range Versions() {
		for _, tt := range tests {
			t.Run(string(v)+tt.query, func(t *testing.T) {
				s := startAs(t, v, sc)
				a := get(t, s, "/api/v1/repos/root/r/actions/jobs"+tt.query, token)
				require.Equal(t, tt.status[v], a.status, a.body)
				if want := tt.want[v]; want != nil {
					assert.Equal(t, want, idsOf(listJobsOf(t, s, tt.query)))
				}
			})
		}
	}
}

func TestRerunPerVersion(t *testing.T) {
	sc := Scene{Users: []string{"root"}, Repos: []Repo{{Owner: "root", Name: "r"}}, Jobs: []Job{
		{ID: 1, Owner: "root", Repo: "r", Status: StatusCompleted, Conclusion: "failure", RunnerID: 3, RunnerName: "rn", RunAttempt: 1},
		{ID: 2, Owner: "root", Repo: "r", Status: StatusQueued},
	}}
	tests := []struct {
		version Version
		wantID  int64
		want    []listedJob
	}{
		{version: Gitea126, wantID: 1, want: []listedJob{
			{ID: 1, Status: "queued", RunAttempt: 2}, {ID: 2, Status: "queued"}}},
		{version: Gitea127, wantID: 3, want: []listedJob{
			{ID: 1, Status: "completed", Conclusion: "failure", RunnerName: "rn", RunAttempt: 1}, {ID: 2, Status: "queued"}, {ID: 3, Status: "queued", RunAttempt: 2}}},
	}
	for _, tt := range tests {
		t.Run(string(tt.version), func(t *testing.T) {
			s := startAs(t, tt.version, sc)
			_, err := s.Rerun(2)
			assert.ErrorContains(t, err, "job 2 is queued, not done")
			id, err := s.Rerun(1)
			require.NoError(t, err)
			assert.Equal(t, tt.wantID, id)
			assert.Equal(t, tt.want, listJobsOf(t, s, ""))
		})
	}
}
