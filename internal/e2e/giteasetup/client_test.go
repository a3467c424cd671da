package giteasetup

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const adminToken = "admin-token-0123456789"

// request is what the fake Gitea saw of one call.
type request struct {
	method, uri, auth, contentType string
	body                           map[string]any
}

// fakeGitea answers every call with status and body and records it.
func fakeGitea(t *testing.T, status int, body string) (*Client, *[]request) {
	t.Helper()
	var seen []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		req := request{method: r.Method, uri: r.URL.RequestURI(), auth: r.Header.Get("Authorization"), contentType: r.Header.Get("Content-Type")}
		if len(raw) > 0 {
			require.NoError(t, json.Unmarshal(raw, &req.body))
		}
		seen = append(seen, req)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return New(srv.URL+"/", adminToken, srv.Client()), &seen
}

func TestRequests(t *testing.T) {
	repo := Repo{Owner: "acme", Name: "app"}
	workflow := []byte("on: [push]\n")
	tests := map[string]struct {
		answer   string
		call     func(ctx context.Context, c *Client) (any, error)
		want     request
		wantBack any
	}{
		"create an organisation": {
			call: func(ctx context.Context, c *Client) (any, error) { return nil, c.CreateOrg(ctx, "acme") },
			want: request{method: "POST", uri: "/api/v1/orgs", body: map[string]any{"username": "acme", "visibility": "public"}},
		},
		"delete an organisation, its name escaped": {
			call: func(ctx context.Context, c *Client) (any, error) { return nil, c.DeleteOrg(ctx, "a b") },
			want: request{method: "DELETE", uri: "/api/v1/orgs/a%20b"},
		},
		"create a repository in an organisation": {
			answer: `{"name":"app","owner":{"login":"acme"}}`,
			call:   func(ctx context.Context, c *Client) (any, error) { return c.CreateOrgRepo(ctx, "acme", "app") },
			want: request{method: "POST", uri: "/api/v1/orgs/acme/repos",
				body: map[string]any{"name": "app", "auto_init": true, "default_branch": "main"}},
			wantBack: repo,
		},
		"create a repository of the token's user": {
			answer: `{"name":"app","owner":{"login":"alice"}}`,
			call:   func(ctx context.Context, c *Client) (any, error) { return c.CreateUserRepo(ctx, "app") },
			want: request{method: "POST", uri: "/api/v1/user/repos",
				body: map[string]any{"name": "app", "auto_init": true, "default_branch": "main"}},
			wantBack: Repo{Owner: "alice", Name: "app"},
		},
		"delete a repository": {
			call: func(ctx context.Context, c *Client) (any, error) { return nil, c.DeleteRepo(ctx, repo) },
			want: request{method: "DELETE", uri: "/api/v1/repos/acme/app"},
		},
		"create a user": {
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.CreateUser(ctx, "alice", "alice@e2e.invalid", "pw")
			},
			want: request{method: "POST", uri: "/api/v1/admin/users", body: map[string]any{
				"username": "alice", "email": "alice@e2e.invalid", "password": "pw", "must_change_password": false}},
		},
		"global registration token": {
			answer:   `{"token":"reg-1"}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.RegistrationToken(ctx, GlobalRunners()) },
			want:     request{method: "POST", uri: "/api/v1/admin/actions/runners/registration-token"},
			wantBack: "reg-1",
		},
		"organisation registration token": {
			answer:   `{"token":"reg-2"}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.RegistrationToken(ctx, OrgRunners("acme")) },
			want:     request{method: "POST", uri: "/api/v1/orgs/acme/actions/runners/registration-token"},
			wantBack: "reg-2",
		},
		"user registration token": {
			answer:   `{"token":"reg-3"}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.RegistrationToken(ctx, UserRunners()) },
			want:     request{method: "POST", uri: "/api/v1/user/actions/runners/registration-token"},
			wantBack: "reg-3",
		},
		"repository registration token": {
			answer:   `{"token":"reg-4"}`,
			call:     func(ctx context.Context, c *Client) (any, error) { return c.RegistrationToken(ctx, RepoRunners(repo)) },
			want:     request{method: "POST", uri: "/api/v1/repos/acme/app/actions/runners/registration-token"},
			wantBack: "reg-4",
		},
		"enable an organisation's runner again": {
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.SetRunnerDisabled(ctx, OrgRunners("acme"), 7, false)
			},
			want: request{method: "PATCH", uri: "/api/v1/orgs/acme/actions/runners/7", body: map[string]any{"disabled": false}},
		},
		"push a workflow": {
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.PushWorkflow(ctx, repo, "ci.yml", workflow)
			},
			want: request{method: "POST", uri: "/api/v1/repos/acme/app/contents/.gitea/workflows/ci.yml", body: map[string]any{
				"content": base64.StdEncoding.EncodeToString(workflow), "message": "Add .gitea/workflows/ci.yml", "branch": "main"}},
		},
		"push a file below a directory, each segment escaped": {
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.PushFile(ctx, repo, "clean up/action.yml", workflow)
			},
			want: request{method: "POST", uri: "/api/v1/repos/acme/app/contents/clean%20up/action.yml", body: map[string]any{
				"content": base64.StdEncoding.EncodeToString(workflow), "message": "Add clean up/action.yml", "branch": "main"}},
		},
		"add a collaborator": {
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.AddCollaborator(ctx, repo, "alice", "write")
			},
			want: request{method: "PUT", uri: "/api/v1/repos/acme/app/collaborators/alice", body: map[string]any{"permission": "write"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, seen := fakeGitea(t, http.StatusCreated, tc.answer)
			got, err := tc.call(context.Background(), c)
			require.NoError(t, err)
			require.Len(t, *seen, 1)
			req := (*seen)[0]
			assert.Equal(t, tc.want.method, req.method)
			assert.Equal(t, tc.want.uri, req.uri)
			assert.Equal(t, tc.want.body, req.body)
			assert.Equal(t, "token "+adminToken, req.auth)
			if tc.want.body != nil {
				assert.Equal(t, "application/json", req.contentType)
			}
			if tc.wantBack != nil {
				assert.Equal(t, tc.wantBack, got)
			}
		})
	}
}

func TestCreateTokenUsesBasicAuth(t *testing.T) {
	c, seen := fakeGitea(t, http.StatusCreated, `{"sha1":"tok-1"}`)
	got, err := c.WithPassword("alice", "pw").CreateToken(context.Background(), "alice", "scaler", "read:repository", "read:user")
	require.NoError(t, err)
	assert.Equal(t, "tok-1", got)
	req := (*seen)[0]
	assert.Equal(t, "/api/v1/users/alice/tokens", req.uri)
	assert.Equal(t, map[string]any{"name": "scaler", "scopes": []any{"read:repository", "read:user"}}, req.body)
	basic := &http.Request{Header: http.Header{"Authorization": {req.auth}}}
	user, pass, ok := basic.BasicAuth()
	require.True(t, ok, "basic auth, not %q", req.auth)
	assert.Equal(t, "alice", user)
	assert.Equal(t, "pw", pass)
}

func TestWithTokenSwitchesCredentials(t *testing.T) {
	c, seen := fakeGitea(t, http.StatusOK, `{"token":"reg"}`)
	_, err := c.WithToken("user-token-42").RegistrationToken(context.Background(), UserRunners())
	require.NoError(t, err)
	assert.Equal(t, "token user-token-42", (*seen)[0].auth)
}

func TestEmptyTokensAreErrors(t *testing.T) {
	ctx := context.Background()
	c, _ := fakeGitea(t, http.StatusCreated, `{}`)
	_, err := c.RegistrationToken(ctx, OrgRunners("acme"))
	require.ErrorContains(t, err, "empty registration token")
	_, err = c.WithPassword("alice", "pw").CreateToken(ctx, "alice", "x")
	require.ErrorContains(t, err, "empty token")
	_, err = c.RegistrationToken(ctx, Runners{})
	require.ErrorContains(t, err, "no runner scope")
}

func TestExists(t *testing.T) {
	tests := map[string]struct {
		status  int
		want    bool
		wantErr bool
	}{
		"found":     {status: http.StatusOK, want: true},
		"not found": {status: http.StatusNotFound, want: false},
		"forbidden": {status: http.StatusForbidden, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, seen := fakeGitea(t, tc.status, `{}`)
			org, err := c.OrgExists(context.Background(), "acme")
			if tc.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, org)
			repo, err := c.RepoExists(context.Background(), Repo{Owner: "acme", Name: "app"})
			assert.Equal(t, tc.wantErr, err != nil)
			assert.Equal(t, tc.want, repo)
			assert.Equal(t, []string{"/api/v1/orgs/acme", "/api/v1/repos/acme/app"}, []string{(*seen)[0].uri, (*seen)[1].uri})
		})
	}
}

func TestErrorsNameTheCallAndKeepTheEndOfTheAnswer(t *testing.T) {
	c, _ := fakeGitea(t, http.StatusUnprocessableEntity, "line 1\nline 2\nline 3\nline 4\nline 5\n"+`{"message":"name taken"}`)
	err := c.CreateOrg(context.Background(), "acme")
	var gerr *Error
	require.ErrorAs(t, err, &gerr)
	assert.Equal(t, http.StatusUnprocessableEntity, gerr.Status)
	assert.False(t, IsNotFound(err))
	assert.Equal(t, `gitea POST /orgs: 422 Unprocessable Entity: line 2
line 3
line 4
line 5
{"message":"name taken"}`, err.Error())
}

// An answer that repeats the credentials (a proxy's error page, a debug
// build) must not carry them into the error.
func TestErrorsHideCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "bad credentials: %q %q %q", r.Header.Get("Authorization"), user, pass)
	}))
	t.Cleanup(srv.Close)
	c := New(srv.URL, adminToken, srv.Client())
	err := c.CreateOrg(context.Background(), "acme")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), adminToken)
	assert.Contains(t, err.Error(), "<redacted>")
	_, err = c.WithPassword("alice", "s3cret-pass").CreateToken(context.Background(), "alice", "x")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret-pass")
	assert.NotContains(t, err.Error(), base64.StdEncoding.EncodeToString([]byte("alice:s3cret-pass")))
	assert.Contains(t, err.Error(), `"alice"`)
}

func TestCancelledCallKeepsTheCause(t *testing.T) {
	c, _ := fakeGitea(t, http.StatusOK, `{}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := c.CreateOrg(ctx, "acme")
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
}

func TestRepoJobsReadsEveryPage(t *testing.T) {
	var uris []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uris = append(uris, r.URL.RequestURI())
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		n := map[int]int{1: 50, 2: 50, 3: 7}[page]
		jobs := make([]Job, n)
		for i := range jobs {
			jobs[i] = Job{ID: int64((page-1)*50 + i + 1), Status: "queued"}
		}
		require.NoError(t, json.NewEncoder(w).Encode(map[string]any{"jobs": jobs, "total_count": 107}))
	}))
	t.Cleanup(srv.Close)
	jobs, err := New(srv.URL, adminToken, srv.Client()).RepoJobs(context.Background(), Repo{Owner: "acme", Name: "app"})
	require.NoError(t, err)
	require.Len(t, jobs, 107)
	assert.Equal(t, int64(107), jobs[106].ID)
	want := make([]string, 3)
	for i := range want {
		want[i] = fmt.Sprintf("/api/v1/repos/acme/app/actions/jobs?limit=50&page=%d", i+1)
	}
	assert.Equal(t, want, uris)
}

func TestJobState(t *testing.T) {
	assert.Equal(t, "queued", Job{Status: "queued"}.State())
	assert.Equal(t, "completed/failure", Job{Status: "completed", Conclusion: "failure"}.State())
}

func TestParseRepo(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    Repo
		wantErr bool
	}{
		"owner and name": {in: "acme/app", want: Repo{Owner: "acme", Name: "app"}},
		"no owner":       {in: "app", wantErr: true},
		"empty owner":    {in: "/app", wantErr: true},
		"empty name":     {in: "acme/", wantErr: true},
		"too deep":       {in: "acme/app/x", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseRepo(tc.in)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.in, got.String())
		})
	}
}

// CancelRun signs in through the web form and posts the cancel with the
// session the login set; a failed login is an error that names the login,
// without the password.
func TestCancelRunSignsInAndPostsWithTheSession(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.NoError(t, r.ParseForm())
		seen = append(seen, r.Method+" "+r.URL.Path)
		switch r.URL.Path {
		case "/user/login":
			if r.PostForm.Get("user_name") != "alice" || r.PostForm.Get("password") != "s3cret-pw" {
				w.WriteHeader(http.StatusOK)
				_, _ = io.WriteString(w, "Username or password is incorrect: "+r.PostForm.Get("password"))
				return
			}
			http.SetCookie(w, &http.Cookie{Name: "i_like_gitea", Value: "session-1", Path: "/"})
			http.Redirect(w, r, "/", http.StatusSeeOther)
		case "/acme/app/actions/runs/42/cancel":
			if ck, err := r.Cookie("i_like_gitea"); err != nil || ck.Value != "session-1" || r.Header.Get("Origin") != "" {
				http.Redirect(w, r, "/user/login", http.StatusSeeOther)
				return
			}
			_, _ = io.WriteString(w, `{"ok":true}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	repo := Repo{Owner: "acme", Name: "app"}
	c := New(srv.URL, adminToken, srv.Client())

	require.NoError(t, c.WithPassword("alice", "s3cret-pw").CancelRun(context.Background(), repo, 42))
	assert.Equal(t, []string{"POST /user/login", "POST /acme/app/actions/runs/42/cancel"}, seen)

	err := c.WithPassword("alice", "s3cret-pw").CancelRun(context.Background(), Repo{Owner: "acme", Name: "other"}, 42)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "404")

	err = c.WithPassword("alice", "wrong-pw").CancelRun(context.Background(), repo, 42)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "/user/login")
	assert.NotContains(t, err.Error(), "wrong-pw", "the error hides the password")

	err = c.CancelRun(context.Background(), repo, 42)
	require.ErrorContains(t, err, "WithPassword", "a token cannot cancel through the web UI")
}
