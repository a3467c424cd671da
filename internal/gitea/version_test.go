package gitea

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Gitea older than MinVersion has no Actions jobs or runners routes and
// answers 404 for them, as it does for an unknown org. The scaler asks the
// version then, and says the release is too old instead of "not found";
// a 404 from a Gitea that is new enough, or that does not say (a build
// from source answers "development"), stays a 404.
func TestA404FromAGiteaTooOldSaysSo(t *testing.T) {
	tests := []struct {
		name        string
		version     string // the /api/v1/version answer; "" answers 500
		wantKind    error
		wantMessage string
	}{
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
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"message":"not found"}`))
			}))
			t.Cleanup(srv.Close)
			c := newTestClient(t, srv.URL, adminToken, Options{})

			_, err := c.Snapshot(t.Context(), Target{Scope: ScopeOrg, Owner: "acme"})
			require.Error(t, err)
			assert.True(t, errors.Is(err, tc.wantKind), "%v", err)
			assert.Contains(t, err.Error(), tc.wantMessage)
			assert.NotContains(t, err.Error(), "\x1b")
			assert.Equal(t, "/api/v1/version", paths[len(paths)-1], "the version is asked after the 404")

			_, err = c.(Runners).ListRunners(t.Context(), Target{Scope: ScopeOrg, Owner: "acme"})
			assert.True(t, errors.Is(err, tc.wantKind), "the runners listing too: %v", err)
		})
	}
}
