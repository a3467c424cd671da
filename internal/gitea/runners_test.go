package gitea

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// runnerRecording is one recorded runners request. The runners recordings
// come in two shapes: the first batch like the job recordings (request and
// response objects), the later one flat ("PATCH /path {body}", status,
// body).
type runnerRecording struct {
	method, path, body string
	status             int
	response           json.RawMessage
}

func loadRunnerRecording(t *testing.T, name string) runnerRecording {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	require.NoError(t, err)
	var flat struct {
		Request json.RawMessage `json:"request"`
		Status  int             `json:"status"`
		Body    json.RawMessage `json:"body"`
	}
	require.NoError(t, json.Unmarshal(raw, &flat))
	var line string
	if json.Unmarshal(flat.Request, &line) == nil {
		method, rest, _ := strings.Cut(line, " ")
		path, body, _ := strings.Cut(rest, " ")
		return runnerRecording{method: method, path: path, body: body, status: flat.Status, response: flat.Body}
	}
	r := loadRecording(t, name, fixtureOrigin)
	return runnerRecording{method: r.Request.Method, path: r.Request.Path, status: r.Response.Status, response: r.Response.Body}
}

// runnerView is what the client reads of a runner.
type runnerView struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	Status    string `json:"status"`
	Busy      bool   `json:"busy"`
	Disabled  bool   `json:"disabled"`
	Ephemeral bool   `json:"ephemeral"`
	Labels    []struct {
		Name string `json:"name"`
	} `json:"labels"`
}

type runnersView struct {
	Runners    []runnerView `json:"runners"`
	TotalCount *int64       `json:"total_count"`
	runnerView
}

func runnerBody(t *testing.T, b []byte) *runnersView {
	t.Helper()
	if len(bytes.TrimSpace(b)) == 0 || string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	var v runnersView
	require.NoError(t, json.Unmarshal(b, &v))
	return &v
}

// The scenes of the runners recordings: org acme's runners (one that never
// got a job and went offline, and one online), and repo acme/app's runner
// while it ran a task and its runner 2 before it was disabled or deleted.
var (
	ubuntuNode20 = []string{"ubuntu-latest:docker://node:20-bookworm", "ubuntu-22.04:docker://node:20"}
	orgOffline   = giteatest.Runner{ID: 1, Name: "rg-ci-abc12", Owner: "acme", Ephemeral: true, Labels: ubuntuNode20}
	orgGPU       = giteatest.Runner{ID: 3, Name: "gpu-pool-k2x9q", Owner: "acme", Online: true, Ephemeral: true, Labels: []string{"self-hosted", "gpu"}}
	repoRunning  = giteatest.Runner{ID: 1, Name: "app-runner-x1y2z", Owner: "acme", Repo: "app", Online: true, Ephemeral: true, Labels: []string{"ubuntu-latest"}}
	repoIdle     = giteatest.Runner{ID: 2, Name: "app-runner-d1s4b", Owner: "acme", Repo: "app", Ephemeral: true, Labels: []string{"ubuntu-latest"}}
)

// TestFakeRunnersAgreeWithRecordings replays each recorded runners request
// against the fake in the scene of the recording and compares the status
// and the runner fields.
func TestFakeRunnersAgreeWithRecordings(t *testing.T) {
	tests := []struct {
		file    string
		runners []giteatest.Runner
	}{
		{"org-runners", []giteatest.Runner{orgOffline}},
		{"org-runners-busy", []giteatest.Runner{orgOffline, orgGPU}},
		{"repo-runners-while-running", []giteatest.Runner{repoRunning}},
		{"repo-runner-disable", []giteatest.Runner{repoIdle}},
		{"repo-runner-delete-while-running", []giteatest.Runner{repoIdle}},
		{"repo-runners-after-ephemeral-done", nil},
	}
	httpc := &http.Client{Timeout: testTimeout}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			scene := fixtureScene()
			scene.Runners = tt.runners
			f := newFakeAs(t, giteatest.Gitea126, scene)
			want := loadRunnerRecording(t, tt.file)

			req, err := http.NewRequestWithContext(t.Context(), want.method, f.URL+want.path, strings.NewReader(want.body))
			require.NoError(t, err)
			req.Header.Set("Authorization", "token "+adminToken)
			resp, err := httpc.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)

			assert.Equal(t, want.status, resp.StatusCode)
			assert.Empty(t, resp.Header.Get("Link"), "Gitea 1.26 pages runners without a Link header")
			assert.Equal(t, runnerBody(t, want.response), runnerBody(t, body))
		})
	}
}

// TestRunnersRecordingsPinTheFacts guards the facts the lifecycle step
// builds on, should someone swap a recording.
func TestRunnersRecordingsPinTheFacts(t *testing.T) {
	running := runnerBody(t, loadRunnerRecording(t, "repo-runners-while-running").response)
	require.Len(t, running.Runners, 1)
	assert.False(t, running.Runners[0].Busy, "busy is false while the runner runs a task: it cannot tell a busy runner")

	disabled := loadRunnerRecording(t, "repo-runner-disable")
	assert.Equal(t, http.MethodPatch, disabled.method)
	assert.Equal(t, http.StatusOK, disabled.status)
	assert.True(t, runnerBody(t, disabled.response).Disabled)

	deleted := loadRunnerRecording(t, "repo-runner-delete-while-running")
	assert.Equal(t, http.StatusNoContent, deleted.status, "Gitea deletes a runner that runs a task: check first")
}

func TestRunnersClientPerScope(t *testing.T) {
	scene := fixtureScene()
	scene.Orgs[0].Owners = []string{"alice"}
	scene.Runners = []giteatest.Runner{
		{ID: 1, Name: "global-1", Ephemeral: true},
		{ID: 2, Name: "org-1", Owner: "acme", Ephemeral: true, Online: true},
		{ID: 3, Name: "repo-1", Owner: "acme", Repo: "app", Disabled: true},
		{ID: 4, Name: "alice-1", Owner: "alice", Ephemeral: true},
	}
	tests := []struct {
		name   string
		target scope.Place
		token  string
		want   []Runner
		path   string
	}{
		{"global lists every runner", scope.New("", ScopeGlobal, "", ""), adminToken, []Runner{
			{ID: 2, Name: "org-1", Online: true, Ephemeral: true}, {ID: 4, Name: "alice-1", Ephemeral: true},
			{ID: 3, Name: "repo-1", Disabled: true}, {ID: 1, Name: "global-1", Ephemeral: true},
		}, "/api/v1/admin/actions/runners"},
		{"org", scope.New("", ScopeOrg, "acme", ""), aliceToken, []Runner{{ID: 2, Name: "org-1", Online: true, Ephemeral: true}}, "/api/v1/orgs/acme/actions/runners"},
		{"repo", scope.New("", ScopeRepo, "acme", "app"), aliceToken, []Runner{{ID: 3, Name: "repo-1", Disabled: true}}, "/api/v1/repos/acme/app/actions/runners"},
		{"user: the token's own", scope.New("", ScopeUser, "alice", ""), aliceToken, []Runner{{ID: 4, Name: "alice-1", Ephemeral: true}}, "/api/v1/user/actions/runners"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, scene)
			c := newTestClient(t, f.URL, tt.token, Options{}).(Runners)
			got, err := c.ListRunners(t.Context(), tt.target)
			require.NoError(t, err)
			// Gitea 1.26 and 1.27 order the listing differently
			// (giteatest.Server.reorderRunners); the client keeps Gitea's
			// order and nothing relies on it.
			assert.ElementsMatch(t, tt.want, got)
			assert.Equal(t, []string{"GET " + tt.path + "?limit=50&page=1"}, f.Requests())

			f.ResetRequests()
			id := tt.want[0].ID
			require.NoError(t, c.DisableRunner(t.Context(), tt.target, id))
			require.NoError(t, c.DeleteRunner(t.Context(), tt.target, id))
			require.NoError(t, c.DeleteRunner(t.Context(), tt.target, id), "a runner already gone is not an error")
			path := tt.path + "/" + itoa(id)
			assert.Equal(t, []string{"PATCH " + path, "DELETE " + path, "DELETE " + path}, f.Requests())
			for _, r := range f.Runners() {
				assert.NotEqual(t, id, r.ID)
			}
		})
	}
}

func TestRunnersClientFailures(t *testing.T) {
	scene := fixtureScene()
	scene.Runners = []giteatest.Runner{{ID: 2, Name: "org-1", Owner: "acme", Ephemeral: true}, {ID: 3, Name: "repo-1", Owner: "acme", Repo: "app"}}
	f := newFake(t, scene)
	member := newTestClient(t, f.URL, aliceToken, Options{}).(Runners)
	_, err := member.ListRunners(t.Context(), scope.New("", ScopeOrg, "acme", ""))
	require.ErrorIs(t, err, ErrForbidden, "an org member who is no owner may list jobs, not runners")
	assert.Contains(t, err.Error(), "Must be an organization owner")

	admin := newTestClient(t, f.URL, adminToken, Options{}).(Runners)
	err = admin.DisableRunner(t.Context(), scope.New("", ScopeOrg, "acme", ""), 3)
	require.ErrorIs(t, err, ErrNotFound, "a repository's runner is not the org's to change")
	assert.Contains(t, err.Error(), "gitea: PATCH /api/v1/orgs/acme/actions/runners/3")
	assert.NotContains(t, err.Error(), adminToken)
	assert.False(t, f.Runners()[1].Disabled)

	_, err = admin.ListRunners(t.Context(), scope.New("", ScopeOrg, "", ""))
	require.Error(t, err, "an org target needs its org")
}

// Gitea 1.26 pages the runners with neither Link nor X-Total-Count: the
// body's total_count says when the listing ends.
func TestListRunnersReadsEveryPage(t *testing.T) {
	scene := fixtureScene()
	for id := int64(1); id <= 7; id++ {
		scene.Runners = append(scene.Runners, giteatest.Runner{ID: id, Name: "r" + itoa(id), Owner: "acme", Ephemeral: true})
	}
	f := newFake(t, scene)
	c := newTestClient(t, f.URL, adminToken, Options{PageSize: 3}).(Runners)
	got, err := c.ListRunners(t.Context(), scope.New("", ScopeOrg, "acme", ""))
	require.NoError(t, err)
	assert.Len(t, got, 7)
	assert.Len(t, f.Requests(), 3, "7 runners in pages of 3, and no request past the last")
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }
