package gitea

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
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
		target Target
		token  string
		scope  string // the fake's name of the scope
		path   string
	}{
		{"global: admin endpoint", Target{Scope: ScopeGlobal}, adminToken, "", "/api/v1/admin/actions/runners/registration-token"},
		{"org", Target{Scope: ScopeOrg, Owner: "acme"}, adminToken, "acme", "/api/v1/orgs/acme/actions/runners/registration-token"},
		{"repo", Target{Scope: ScopeRepo, Owner: "alice", Repo: "tool"}, aliceToken, "alice/tool", "/api/v1/repos/alice/tool/actions/runners/registration-token"},
		{"user: checks the token's user, then mints for it", Target{Scope: ScopeUser, Owner: "Alice"}, aliceToken, "alice", "/api/v1/user/actions/runners/registration-token"},
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

	_, err := alice.RegistrationToken(t.Context(), Target{Scope: ScopeUser, Owner: "root"})
	require.ErrorIs(t, err, ErrWrongUser, "the user scope mints only for the token's own user")
	assert.Contains(t, err.Error(), "user root")
	assert.Zero(t, f.Mints(), "nothing minted for the wrong user")

	_, err = alice.RegistrationToken(t.Context(), Target{Scope: ScopeGlobal})
	require.ErrorIs(t, err, ErrForbidden)
	assert.Contains(t, err.Error(), "gitea: POST /api/v1/admin/actions/runners/registration-token")

	_, err = alice.RegistrationToken(t.Context(), Target{Scope: ScopeOrg, Owner: "acme"})
	require.ErrorIs(t, err, ErrForbidden, "an org member who is no owner may not mint")

	bad := newTestClient(t, f.URL, badToken, Options{}).(Registration)
	_, err = bad.RegistrationToken(t.Context(), Target{Scope: ScopeOrg, Owner: "acme"})
	require.ErrorIs(t, err, ErrUnauthorized)
	assert.NotContains(t, err.Error(), badToken)

	_, err = alice.RegistrationToken(t.Context(), Target{Scope: ScopeRepo, Owner: "acme"})
	require.Error(t, err, "a repo target needs its repo")
	assert.Zero(t, f.Mints())
}
