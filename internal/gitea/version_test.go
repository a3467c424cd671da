package gitea

import (
	"cmp"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// A Gitea older than MinVersion has no Actions jobs or runners routes and
// answers 404 for them, as it does for an unknown org; Forgejo answers as
// a Gitea it is compatible with, whose Actions API differs. After a failed
// Actions request with an answer the scaler asks the version, and says the
// release is too old, or that the server is Forgejo, instead of "not
// found"; a failure from a Gitea that is new enough, or that does not say
// (a build from source answers "development"), stays what it was.
func TestAFailureFromAGiteaTooOldOrForgejoSaysSo(t *testing.T) {
	tests := []struct {
		name        string
		version     string // the /api/v1/version answer; "" answers 500
		status      int    // the Actions routes' answer; 0 means 404
		body        string // its body; "" means Gitea's not-found message
		wantKind    error
		wantMessage string
	}{
		{name: "Forgejo", version: "11.0.3+gitea-1.22.0", wantKind: ErrUnsupportedServer, wantMessage: "the server is Forgejo 11.0.3 (compatible with Gitea 1.22.0)"},
		{name: "Forgejo, a pre-release with a v", version: "v12.0.0-dev-123+gitea-1.22.0", wantKind: ErrUnsupportedServer, wantMessage: "Forgejo 12.0.0 (compatible with Gitea 1.22.0)"},
		{name: "Forgejo answering 200 with a body the scaler cannot read", version: "11.0.3+gitea-1.22.0", status: http.StatusOK, body: `<html>`, wantKind: ErrUnsupportedServer, wantMessage: "use Gitea"},
		{name: "1.25 answering 400", version: "1.25.3", status: http.StatusBadRequest, wantKind: ErrUnsupportedVersion, wantMessage: "Gitea 1.25 is older than 1.26"},
		{name: "1.25 answering 500", version: "1.25.3", status: http.StatusInternalServerError, wantKind: ErrUnsupportedVersion, wantMessage: "Gitea 1.25 is older than 1.26"},
		{name: "1.26 answering 500 stays a server error", version: "1.26.0", status: http.StatusInternalServerError, wantKind: ErrServer},
		{name: "1.25", version: "1.25.3", wantKind: ErrUnsupportedVersion, wantMessage: "Gitea 1.25 is older than 1.26"},
		{name: "1.22 with build metadata", version: "v1.22.6+12-gabcdef", wantKind: ErrUnsupportedVersion, wantMessage: "Gitea 1.22 is older than 1.26"},
		{name: "1.26: the org is missing", version: "1.26.0", wantKind: ErrNotFound},
		{name: "1.27", version: "1.27.3", wantKind: ErrNotFound},
		{name: "2.0", version: "2.0.0", wantKind: ErrNotFound},
		{name: "a build from source", version: "development", wantKind: ErrNotFound},
		{name: "the version cannot be read", version: "", wantKind: ErrNotFound},
		{name: "a version that is not one, with control characters", version: "1.\x1b[2J25", wantKind: ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var paths []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				paths = append(paths, r.URL.Path)
				w.Header().Set("Content-Type", "application/json")
				if r.URL.Path == "/api/v1/version" {
					if tc.version == "" {
						w.WriteHeader(http.StatusInternalServerError)
						return
					}
					_, _ = w.Write([]byte(`{"version":"` + strings.ReplaceAll(tc.version, "\x1b", `\u001b`) + `"}`))
					return
				}
				status, body := cmp.Or(tc.status, http.StatusNotFound), cmp.Or(tc.body, `{"message":"not found"}`)
				w.WriteHeader(status)
				_, _ = w.Write([]byte(body))
			}))
			t.Cleanup(srv.Close)
			c := newTestClient(t, srv.URL, adminToken, Options{})

			_, err := c.Snapshot(t.Context(), scope.New("", ScopeOrg, "acme", ""))
			require.Error(t, err)
			assert.True(t, errors.Is(err, tc.wantKind), "%v", err)
			assert.Contains(t, err.Error(), tc.wantMessage)
			assert.NotContains(t, err.Error(), "\x1b")
			assert.Equal(t, "/api/v1/version", paths[len(paths)-1], "the version is asked after the failure")

			_, err = c.(Runners).ListRunners(t.Context(), scope.New("", ScopeOrg, "acme", ""))
			assert.True(t, errors.Is(err, tc.wantKind), "the runners listing too: %v", err)
		})
	}
}
