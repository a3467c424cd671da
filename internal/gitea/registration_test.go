package gitea

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// The fake mints like the recording: 200, JSON, a body with one token of
// Gitea's shape. The token itself is random, so its length is compared.
func TestFakeRegistrationTokenAgreesWithRecording(t *testing.T) {
	f := newFakeAs(t, giteatest.Gitea126, fixtureScene())
	want := loadRecording(t, "registration-token-org", f.URL)
	req, err := http.NewRequestWithContext(t.Context(), want.Request.Method, f.URL+want.Request.Path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "token "+adminToken)
	resp, err := (&http.Client{Timeout: testTimeout}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)

	assert.Equal(t, want.Response.Status, resp.StatusCode)
	assert.Equal(t, want.Response.Headers["content-type"], resp.Header.Get("Content-Type"))
	var recorded, got map[string]string
	require.NoError(t, json.Unmarshal(want.Response.Body, &recorded))
	require.NoError(t, json.Unmarshal(body, &got))
	require.Len(t, got, len(recorded), "the same fields")
	assert.Len(t, got["token"], len(recorded["token"]))
	assert.Equal(t, f.RegistrationToken("acme"), got["token"])
}

func TestRegistrationTokenMintsForEachScope(t *testing.T) {
	tests := []struct {
		name   string
		target scope.Place
		token  string
		scope  string // the fake's name of the scope
		path   string
	}{
		{"global: admin endpoint", scope.New("", ScopeGlobal, "", ""), adminToken, "", "/api/v1/admin/actions/runners/registration-token"},
		{"org", scope.New("", ScopeOrg, "acme", ""), adminToken, "acme", "/api/v1/orgs/acme/actions/runners/registration-token"},
		{"repo", scope.New("", ScopeRepo, "alice", "tool"), aliceToken, "alice/tool", "/api/v1/repos/alice/tool/actions/runners/registration-token"},
		{"user: checks the token's user, then mints for it", scope.New("", ScopeUser, "Alice", ""), aliceToken, "alice", "/api/v1/user/actions/runners/registration-token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, fixtureScene())
			c := newTestClient(t, f.URL, tt.token, Options{}).(Registration)
			got, err := c.RegistrationToken(t.Context(), tt.target)
			require.NoError(t, err)
			assert.Equal(t, f.RegistrationToken(tt.scope), got)
			assert.Len(t, got, 40)
			assert.Contains(t, f.Requests(), "POST "+tt.path)

			again, err := c.RegistrationToken(t.Context(), tt.target)
			require.NoError(t, err)
			assert.Equal(t, got, again, "Gitea answers the active token until it is reset")
			f.ResetRegistrationToken(tt.scope)
			reset, err := c.RegistrationToken(t.Context(), tt.target)
			require.NoError(t, err)
			assert.NotEqual(t, got, reset, "after a reset the new token")
		})
	}
}

func TestRegistrationTokenFailures(t *testing.T) {
	f := newFake(t, fixtureScene())
	alice := newTestClient(t, f.URL, aliceToken, Options{}).(Registration)

	_, err := alice.RegistrationToken(t.Context(), scope.New("", ScopeUser, "root", ""))
	require.ErrorIs(t, err, ErrWrongUser, "the user scope mints only for the token's own user")
	assert.Contains(t, err.Error(), "user root")
	assert.Zero(t, f.Mints(), "nothing minted for the wrong user")

	_, err = alice.RegistrationToken(t.Context(), scope.New("", ScopeGlobal, "", ""))
	require.ErrorIs(t, err, ErrForbidden)
	assert.Contains(t, err.Error(), "gitea: POST /api/v1/admin/actions/runners/registration-token")

	_, err = alice.RegistrationToken(t.Context(), scope.New("", ScopeOrg, "acme", ""))
	require.ErrorIs(t, err, ErrForbidden, "an org member who is no owner may not mint")

	bad := newTestClient(t, f.URL, badToken, Options{}).(Registration)
	_, err = bad.RegistrationToken(t.Context(), scope.New("", ScopeOrg, "acme", ""))
	require.ErrorIs(t, err, ErrUnauthorized)
	assert.NotContains(t, err.Error(), badToken)

	_, err = alice.RegistrationToken(t.Context(), scope.New("", ScopeRepo, "acme", ""))
	require.Error(t, err, "a repo target needs its repo")
	assert.Zero(t, f.Mints())
}

// Gitea 1.26 has no GET on .../actions/runners/registration-token: the
// path is read as a runner's ID, and Gitea answers 404 "Runner not found"
// to a caller with the scope's rights, 403 to one without (recorded on the
// bed: TestRegistrationTokenCheckOnTheRealGitea). Only POST answers the
// scope's active token, so the fake must not answer GET with a token.
func TestFakeAnswersGETOnTheRegistrationTokenPathLikeGitea126(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		token   string
		status  int
		message string
	}{
		{"org owner", "/api/v1/orgs/acme/actions/runners/registration-token", adminToken, http.StatusNotFound, "Runner not found"},
		{"repo owner", "/api/v1/repos/alice/tool/actions/runners/registration-token", aliceToken, http.StatusNotFound, "Runner not found"},
		{"user", "/api/v1/user/actions/runners/registration-token", aliceToken, http.StatusNotFound, "Runner not found"},
		{"global, admin", "/api/v1/admin/actions/runners/registration-token", adminToken, http.StatusNotFound, "Runner not found"},
		{"not an owner of the org", "/api/v1/orgs/acme/actions/runners/registration-token", aliceToken, http.StatusForbidden, "Must be an organization owner"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, fixtureScene())
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.URL+tt.path, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "token "+tt.token)
			resp, err := (&http.Client{Timeout: testTimeout}).Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			var got map[string]any
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
			assert.Equal(t, tt.status, resp.StatusCode)
			assert.Equal(t, tt.message, got["message"])
			assert.NotContains(t, got, "token")
			assert.Zero(t, f.Mints(), "a GET makes no token")
		})
	}
}

// RegistrationScope tells whether a token lets runners take a scope's
// jobs, and which scope's it is: the active registration token of the
// scope or of one that contains it (a repository's owner, the instance),
// by asking Gitea for those tokens with the API token (POST, which makes
// one only when the scope has none) and comparing. The scope that matched
// is where runners given the token register. It answers no match only when
// every such scope answered; Gitea's tokens never leave the client.
func TestRegistrationScope(t *testing.T) {
	acme := scope.New("", ScopeOrg, "acme", "")
	app := scope.New("", ScopeRepo, "acme", "app")
	tool := scope.New("", ScopeRepo, "alice", "tool")
	alice := scope.New("", ScopeUser, "alice", "")
	global := scope.New("", ScopeGlobal, "", "")
	none := scope.Place{}
	tokenOf := func(scope string) func(f *giteatest.Server) string {
		return func(f *giteatest.Server) string { return f.RegistrationToken(scope) }
	}
	tests := []struct {
		name    string
		target  scope.Place
		api     string
		token   func(f *giteatest.Server) string
		want    scope.Place
		wantErr error
	}{
		{"the org's own token", acme, adminToken, tokenOf("acme"), acme, nil},
		{"a repository's token is not its org's", acme, adminToken, tokenOf("acme/app"), none, nil},
		{"the repository's own token", app, adminToken, tokenOf("acme/app"), app, nil},
		{"its org's token serves the repository too, registering in the org", app, adminToken, tokenOf("acme"), acme, nil},
		{"the instance's token serves every scope, registering in the instance", app, adminToken, tokenOf(""), global, nil},
		{"a user's token is not another owner's repository's", app, adminToken, tokenOf("alice"), none, nil},
		{"a token that was reset is not the active one", acme, adminToken,
			func(f *giteatest.Server) string {
				old := f.RegistrationToken("acme")
				f.ResetRegistrationToken("acme")
				return old
			}, none, nil},
		{"the user's own token", alice, aliceToken, tokenOf("alice"), alice, nil},
		{"a user's token serves the user's repository (no org of that name), registering in the user", tool, aliceToken, tokenOf("alice"), alice, nil},
		{"without the right to ask the instance's, another token cannot be told apart", tool, aliceToken, tokenOf("root"), none, ErrForbidden},
		{"an API token that may not manage the org's runners cannot tell", acme, aliceToken, tokenOf("acme/app"), none, ErrForbidden},
		{"another user's API token cannot tell for a user scope", scope.New("", ScopeUser, "root", ""), aliceToken, tokenOf("acme"), none, ErrWrongUser},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, fixtureScene())
			token := tt.token(f)
			c := newTestClient(t, f.URL, tt.api, Options{}).(RegistrationCheck)
			got, matched, err := c.RegistrationScope(t.Context(), tt.target, token)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.NotContains(t, err.Error(), token)
				assert.False(t, matched)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want != none, matched)
			assert.Equal(t, tt.want, got)
			assert.True(t, !matched || got.Contains(tt.target), "the matched scope contains the target")
		})
	}
}
