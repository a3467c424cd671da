package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const token = "admin-token-0123456789"

// fakeGitea knows the organisation acme with the repository acme/app, hands
// out registration token reg-1, lists one job, and records what it was sent.
func fakeGitea(t *testing.T) (url string, calls *[]string) {
	t.Helper()
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen = append(seen, r.Method+" "+r.URL.RequestURI()+" "+string(body))
		if r.Header.Get("Authorization") != "token "+token {
			http.Error(w, `{"message":"token is required"}`, http.StatusUnauthorized)
			return
		}
		switch r.Method + " " + r.URL.Path {
		case "GET /api/v1/orgs/acme", "GET /api/v1/repos/acme/app":
			_, _ = io.WriteString(w, `{}`)
		case "POST /api/v1/orgs", "DELETE /api/v1/orgs/acme", "DELETE /api/v1/repos/acme/app",
			"POST /api/v1/repos/acme/app/contents/.gitea/workflows/ci.yml":
			w.WriteHeader(http.StatusCreated)
		case "POST /api/v1/orgs/acme/repos":
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"name":"app","owner":{"login":"acme"}}`)
		case "POST /api/v1/orgs/acme/actions/runners/registration-token",
			"POST /api/v1/admin/actions/runners/registration-token",
			"POST /api/v1/repos/acme/app/actions/runners/registration-token":
			_, _ = io.WriteString(w, `{"token":"reg-1"}`)
		case "GET /api/v1/repos/acme/app/actions/jobs":
			_, _ = io.WriteString(w, `{"jobs":[{"id":7,"name":"build","labels":["ubuntu-latest"],"status":"queued","runner_name":""}],"total_count":1}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &seen
}

func TestCommands(t *testing.T) {
	workflow := filepath.Join(t.TempDir(), "ci.yml")
	require.NoError(t, os.WriteFile(workflow, []byte("from a file"), 0o600))
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := map[string]struct {
		args     []string
		stdin    string
		wantExit int
		wantOut  string
		wantCall string // the last call, as "METHOD URI BODY"
	}{
		"org create":        {args: []string{"org", "create", "acme"}, wantCall: `POST /api/v1/orgs {"username":"acme","visibility":"public"}`},
		"org exists":        {args: []string{"org", "exists", "acme"}, wantCall: "GET /api/v1/orgs/acme "},
		"org absent":        {args: []string{"org", "exists", "other"}, wantExit: exitAbsent},
		"org delete":        {args: []string{"org", "delete", "acme"}, wantCall: "DELETE /api/v1/orgs/acme "},
		"org delete absent": {args: []string{"org", "delete", "other"}, wantExit: exitError},
		"repo create": {args: []string{"repo", "create", "acme/app"},
			wantCall: `POST /api/v1/orgs/acme/repos {"auto_init":true,"default_branch":"main","name":"app"}`},
		"repo exists":         {args: []string{"repo", "exists", "acme/app"}},
		"repo absent":         {args: []string{"repo", "exists", "acme/other"}, wantExit: exitAbsent},
		"repo without owner":  {args: []string{"repo", "exists", "app"}, wantExit: exitError},
		"repo delete":         {args: []string{"repo", "delete", "acme/app"}, wantCall: "DELETE /api/v1/repos/acme/app "},
		"org token":           {args: []string{"registration-token", "org", "acme"}, wantOut: "reg-1\n"},
		"global token":        {args: []string{"registration-token", "global"}, wantOut: "reg-1\n"},
		"repo token":          {args: []string{"registration-token", "repo", "acme/app"}, wantOut: "reg-1\n"},
		"org token, no name":  {args: []string{"registration-token", "org"}, wantExit: exitError},
		"global token, named": {args: []string{"registration-token", "global", "acme"}, wantExit: exitError},
		"unknown scope":       {args: []string{"registration-token", "user"}, wantExit: exitError},
		"push from stdin": {args: []string{"push-workflow", "acme/app", "ci.yml", "-"}, stdin: "from stdin",
			wantCall: `POST /api/v1/repos/acme/app/contents/.gitea/workflows/ci.yml {"branch":"main","content":"` + b64("from stdin") + `","message":"Add .gitea/workflows/ci.yml"}`},
		"push from a file": {args: []string{"push-workflow", "acme/app", "ci.yml", workflow},
			wantCall: `POST /api/v1/repos/acme/app/contents/.gitea/workflows/ci.yml {"branch":"main","content":"` + b64("from a file") + `","message":"Add .gitea/workflows/ci.yml"}`},
		"push a missing file": {args: []string{"push-workflow", "acme/app", "ci.yml", workflow + ".gone"}, wantExit: exitError},
		"jobs": {args: []string{"jobs", "acme/app"},
			wantOut: `{"jobs":[{"id":7,"run_id":0,"name":"build","labels":["ubuntu-latest"],"status":"queued","conclusion":"","runner_name":"","created_at":"0001-01-01T00:00:00Z","started_at":"0001-01-01T00:00:00Z","completed_at":"0001-01-01T00:00:00Z"}]}` + "\n"},
		"jobs of a missing repo": {args: []string{"jobs", "acme/other"}, wantExit: exitError},
		"no command":             {args: nil, wantExit: exitError},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			url, calls := fakeGitea(t)
			env := map[string]string{"GITEA_URL": url, "GITEA_ADMIN_TOKEN": token}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, func(k string) string { return env[k] }, strings.NewReader(tc.stdin), &stdout, &stderr)
			assert.Equal(t, tc.wantExit, code, "stderr: %s", stderr.String())
			if tc.wantExit == exitOK {
				assert.Empty(t, stderr.String())
			}
			if tc.wantExit == exitError {
				assert.NotEmpty(t, stderr.String(), "an error says what failed")
			}
			if tc.wantOut != "" || tc.wantExit == exitOK {
				assert.Equal(t, tc.wantOut, stdout.String())
			}
			if tc.wantCall != "" {
				require.NotEmpty(t, *calls)
				assert.Equal(t, canonical(t, tc.wantCall), canonical(t, (*calls)[len(*calls)-1]))
			}
		})
	}
}

// canonical re-encodes the JSON body of a recorded call, so that key order
// does not matter.
func canonical(t *testing.T, call string) string {
	t.Helper()
	method, rest, _ := strings.Cut(call, " ")
	uri, body, _ := strings.Cut(rest, " ")
	if body == "" {
		return method + " " + uri
	}
	var v any
	require.NoError(t, json.Unmarshal([]byte(body), &v), body)
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return method + " " + uri + " " + string(raw)
}

func TestURLFlagAndMissingCredentials(t *testing.T) {
	url, _ := fakeGitea(t)
	tests := map[string]struct {
		args     []string
		env      map[string]string
		wantExit int
	}{
		"--url instead of GITEA_URL": {args: []string{"--url", url, "org", "exists", "acme"}, env: map[string]string{"GITEA_ADMIN_TOKEN": token}},
		"no URL":                     {args: []string{"org", "exists", "acme"}, env: map[string]string{"GITEA_ADMIN_TOKEN": token}, wantExit: exitError},
		"no token":                   {args: []string{"org", "exists", "acme"}, env: map[string]string{"GITEA_URL": url}, wantExit: exitError},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, func(k string) string { return tc.env[k] }, nil, &stdout, &stderr)
			assert.Equal(t, tc.wantExit, code, stderr.String())
		})
	}
}

func TestErrorsNeverShowTheToken(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "refused "+r.Header.Get("Authorization"), http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	env := map[string]string{"GITEA_URL": srv.URL, "GITEA_ADMIN_TOKEN": token}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"registration-token", "org", "acme"}, func(k string) string { return env[k] }, nil, &stdout, &stderr)
	assert.Equal(t, exitError, code)
	assert.Contains(t, stderr.String(), "gitea-setup: gitea POST /orgs/acme/actions/runners/registration-token: 403 Forbidden")
	assert.NotContains(t, stderr.String()+stdout.String(), token)
}
