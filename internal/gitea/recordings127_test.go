package gitea

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
)

// TestFakeAgreesWithRecordingsOfGitea127 replays the answers recorded from
// a real Gitea 1.27.3 on the test bed (testdata/gitea-1.27, written by
// scripts/tools/gitea/record.sh) against the fake answering as 1.27: org
// acme with repo app, one queued job on ubuntu-latest and one ephemeral
// runner registered and never started.
func TestFakeAgreesWithRecordingsOfGitea127(t *testing.T) {
	tests := []struct {
		file  string
		token string
	}{
		{file: "version", token: adminToken},
		{file: "repo-jobs-queued", token: adminToken},
		{file: "org-runners", token: adminToken},
		{file: "org-runner-disable", token: adminToken},
		{file: "error-bad-token", token: badToken},
		{file: "error-invalid-status-running", token: adminToken},
		{file: "error-invalid-sort", token: adminToken},
		{file: "error-repo-not-found", token: adminToken},
		{file: "error-org-not-found", token: adminToken},
		{file: "error-runner-not-found", token: adminToken},
		{file: "error-users-jobs-404", token: adminToken},
	}
	scene := giteatest.Scene{
		Orgs:  []giteatest.Org{{Name: "acme"}},
		Users: []string{"root"},
		Repos: []giteatest.Repo{{Owner: "acme", Name: "app"}},
		Jobs: []giteatest.Job{{ID: 1, Owner: "acme", Repo: "app", RunID: 1, Name: "build", Labels: []string{"ubuntu-latest"},
			Status: giteatest.StatusQueued, RunAttempt: 1}},
	}
	httpc := &http.Client{Timeout: testTimeout}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			f := newFakeAs(t, giteatest.Gitea127, scene)
			f.SetVersion("1.27.3")
			require.NoError(t, f.AddRunner(giteatest.Runner{ID: 1, Name: "rg-ci-abc12", Owner: "acme", Ephemeral: true, Labels: []string{"bed-host"}}))
			want := loadRecording(t, "gitea-1.27/"+tt.file, f.URL)

			var body io.Reader
			if want.Request.Method == http.MethodPatch {
				body = strings.NewReader(`{"disabled":true}`)
			}
			req, err := http.NewRequestWithContext(t.Context(), want.Request.Method, f.URL+want.Request.Path, body)
			require.NoError(t, err)
			req.Header.Set("Authorization", "token "+tt.token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := httpc.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err)

			assert.Equal(t, want.Response.Status, resp.StatusCode, "status")
			assert.Equal(t, want.Response.Headers["content-type"], resp.Header.Get("Content-Type"), "Content-Type")
			assert.Equal(t, want.Response.Headers["x-total-count"], resp.Header.Get("X-Total-Count"), "X-Total-Count")
			if strings.Contains(want.Request.Path, "/runners") && resp.StatusCode == http.StatusOK {
				assert.Equal(t, runnerBody(t, want.Response.Body), runnerBody(t, got), "body")
				return
			}
			assert.Equal(t, comparableBody(t, want.Response.Body, true), comparableBody(t, got, false), "body")
		})
	}
}
