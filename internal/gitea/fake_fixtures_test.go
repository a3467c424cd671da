package gitea

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
)

// fixtureOrigin is the origin the recordings were rewritten to.
const fixtureOrigin = "http://gitea.test:3000"

type recording struct {
	Note    string `json:"note"`
	Request struct {
		Method string `json:"method"`
		Path   string `json:"path"`
		Auth   string `json:"auth"`
	} `json:"request"`
	Response struct {
		Status  int               `json:"status"`
		Headers map[string]string `json:"headers"`
		Body    json.RawMessage   `json:"body"`
	} `json:"response"`
}

// loadRecording reads testdata/<name>.json with the fixture origin replaced
// by origin.
func loadRecording(t *testing.T, name, origin string) recording {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	require.NoError(t, err)
	raw = bytes.ReplaceAll(raw, []byte(fixtureOrigin), []byte(origin))
	var r recording
	require.NoError(t, json.Unmarshal(raw, &r))
	return r
}

// The parts of a body we compare: the job fields the scaler reads (and the
// URLs it parses the repository from), totals, error messages, repositories.
type jobView struct {
	ID         int64    `json:"id"`
	Name       string   `json:"name"`
	Labels     []string `json:"labels"`
	Status     string   `json:"status"`
	Conclusion string   `json:"conclusion"`
	RunnerID   int64    `json:"runner_id"`
	RunnerName string   `json:"runner_name"`
	RunID      int64    `json:"run_id"`
	RunAttempt int64    `json:"run_attempt"`
	URL        string   `json:"url"`
	HTMLURL    string   `json:"html_url"`
}

type bodyView struct {
	Jobs       []jobView       `json:"jobs"`
	TotalCount *int64          `json:"total_count"`
	Message    *string         `json:"message"`
	URL        *string         `json:"url"`
	Errors     json.RawMessage `json:"errors"`
	Version    *string         `json:"version"`
}

type repoView struct {
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	FullName string `json:"full_name"`
	Empty    bool   `json:"empty"`
	HTMLURL  string `json:"html_url"`
	URL      string `json:"url"`
	Owner    struct {
		Login string `json:"login"`
	} `json:"owner"`
}

// comparable reduces a body to what we compare. A JSON string body is a
// plain-text answer recorded as text.
func comparableBody(t *testing.T, body []byte, recorded bool) any {
	t.Helper()
	trimmed := bytes.TrimSpace(body)
	switch {
	case recorded && len(trimmed) > 0 && trimmed[0] == '"':
		var s string
		require.NoError(t, json.Unmarshal(trimmed, &s))
		return s
	case !recorded && (len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[')):
		return string(body)
	case trimmed[0] == '[':
		var v []repoView
		require.NoError(t, json.Unmarshal(trimmed, &v))
		return v
	default:
		var v bodyView
		require.NoError(t, json.Unmarshal(trimmed, &v))
		return v
	}
}

// linkRels maps each rel of a Link header to its URL.
func linkRels(h string) map[string]string {
	if h == "" {
		return nil
	}
	out := map[string]string{}
	for _, part := range strings.Split(h, ",") {
		u, params, ok := strings.Cut(part, ";")
		if !ok {
			continue
		}
		rel := strings.Trim(strings.TrimPrefix(strings.TrimSpace(params), "rel="), `"`)
		out[rel] = strings.Trim(strings.TrimSpace(u), "<>")
	}
	return out
}

// TestFakeAgreesWithRecordings replays each recorded request against the fake
// loaded with the recordings' scene and compares status, Content-Type, Link
// (rel names and target pages), X-Total-Count and the body's job fields. The
// fake is only useful as long as it answers like the real Gitea 1.26.
func TestFakeAgreesWithRecordings(t *testing.T) {
	tests := []struct {
		file  string
		token string
		// setup moves the scene to the moment of the recording.
		setup func(t *testing.T, f *giteatest.Server)
	}{
		{file: "admin-jobs-page1", token: adminToken},
		{file: "admin-jobs-page2", token: adminToken},
		{file: "admin-jobs-page3-empty", token: adminToken},
		{file: "error-admin-forbidden", token: aliceToken},
		{file: "error-bad-token", token: badToken},
		{file: "error-invalid-status-running", token: adminToken},
		{file: "error-repo-not-found", token: adminToken},
		{file: "error-users-jobs-404", token: adminToken},
		{file: "org-jobs-completed", token: adminToken},
		{file: "org-jobs-inprogress", token: adminToken, setup: func(t *testing.T, f *giteatest.Server) {
			// Recorded after a runner named gpu-pool-k2x9q (runner 3) took job 2.
			require.NoError(t, f.UpdateJob(2, func(j *giteatest.Job) {
				j.Status, j.RunnerID, j.RunnerName, j.RunAttempt = giteatest.StatusInProgress, 3, "gpu-pool-k2x9q", 1
			}))
		}},
		{file: "org-jobs-queued-inprogress", token: adminToken},
		{file: "repo-jobs-all", token: adminToken},
		{file: "repo-jobs-queued", token: adminToken},
		{file: "user-jobs-self", token: aliceToken},
		{file: "user-repo-jobs-waiting", token: aliceToken},
		{file: "user-repos", token: aliceToken},
		{file: "version", token: adminToken},
	}
	httpc := &http.Client{Timeout: testTimeout}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			f := newFakeAs(t, giteatest.Gitea126, fixtureScene())
			if tt.setup != nil {
				tt.setup(t, f)
			}
			want := loadRecording(t, tt.file, f.URL)

			req, err := http.NewRequestWithContext(t.Context(), want.Request.Method, f.URL+want.Request.Path, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "token "+tt.token)
			resp, err := httpc.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)

			assert.Equal(t, want.Response.Status, resp.StatusCode, "status")
			assert.Equal(t, want.Response.Headers["content-type"], resp.Header.Get("Content-Type"), "Content-Type")
			assert.Equal(t, want.Response.Headers["x-total-count"], resp.Header.Get("X-Total-Count"), "X-Total-Count")
			assert.Equal(t, linkRels(want.Response.Headers["link"]), linkRels(resp.Header.Get("Link")), "Link")
			assert.Equal(t, comparableBody(t, want.Response.Body, true), comparableBody(t, body, false), "body")
		})
	}
}

// TestFakeRecordingsCoverWhatSnapshotReads guards the recordings themselves:
// if someone swaps a file, the facts the client relies on must still hold.
func TestFakeRecordingsCoverWhatSnapshotReads(t *testing.T) {
	waiting := loadRecording(t, "user-repo-jobs-waiting", fixtureOrigin)
	var body bodyView
	require.NoError(t, json.Unmarshal(waiting.Response.Body, &body))
	require.Len(t, body.Jobs, 2)
	assert.Equal(t, "waiting", body.Jobs[1].Status, "job 6 is blocked and reported as waiting")
	assert.Equal(t, int64(6), body.Jobs[1].ID)

	running := loadRecording(t, "error-invalid-status-running", fixtureOrigin)
	assert.Equal(t, http.StatusBadRequest, running.Response.Status)

	version := loadRecording(t, "version", fixtureOrigin)
	assert.Contains(t, string(version.Response.Body), "development")
}
