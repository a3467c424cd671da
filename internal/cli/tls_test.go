package cli

import (
	"bytes"
	"encoding/pem"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// --gitea-ca-file makes the Gitea clients trust a Gitea whose certificate
// only that bundle vouches for.
func TestGiteaCAFileIsTrustedForGitea(t *testing.T) {
	fake := giteatest.New()
	t.Cleanup(fake.Close)
	fake.AddToken("tok", "root", true)
	upstream, err := url.Parse(fake.URL)
	require.NoError(t, err)
	srv := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(upstream))
	t.Cleanup(srv.Close)
	bundle := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))

	for _, tt := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"without the bundle", nil, "certificate signed by unknown authority"},
		{"with the bundle", []string{"--gitea-ca-file", bundle}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// The test server is on loopback: the platform allows it.
			r, err := parse(t, append(tt.args, "--allowed-gitea-urls", srv.URL)...)
			require.NoError(t, err)
			factory, err := r.giteaFactory(nil)
			require.NoError(t, err)
			c, err := factory(srv.URL, "tok")
			require.NoError(t, err)
			_, err = c.Snapshot(t.Context(), scope.New("", gitea.ScopeGlobal, "", ""))
			if tt.wantErr == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tt.wantErr)
			}
		})
	}
}

func TestBadGiteaCAFileExitsWithUsage(t *testing.T) {
	notPEM := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(notPEM, []byte("hello"), 0o600))
	for _, file := range []string{filepath.Join(t.TempDir(), "missing.crt"), notPEM} {
		var out, errOut bytes.Buffer
		code := Main([]string{"run", "--gitea-ca-file", file}, IO{Out: &out, Err: &errOut})
		assert.Equal(t, ExitUsage, code)
		assert.Contains(t, errOut.String(), "--gitea-ca-file: ")
	}
}
