package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/giteaurl"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// The real Gitea clients refuse, at dial time, a loopback address that no
// allowed URL names, and reach one that an entry names.
func TestGiteaClientsDialOnlyAllowedSpecialAddresses(t *testing.T) {
	srv := giteatest.New()
	t.Cleanup(srv.Close)
	srv.AddToken("tok", "root", true)

	// snapshot lists the fake Gitea through the client the flags make.
	snapshot := func(args ...string) error {
		r, err := parse(t, args...)
		require.NoError(t, err)
		factory, err := r.giteaFactory(nil)
		require.NoError(t, err)
		c, err := factory(srv.URL, "tok")
		if err != nil {
			return err
		}
		_, err = c.Snapshot(t.Context(), scope.New("", gitea.ScopeGlobal, "", ""))
		return err
	}
	require.ErrorIs(t, snapshot(), giteaurl.ErrNotAllowed, "the fake Gitea is on loopback: refused before a client exists")
	assert.Zero(t, len(srv.Requests()), "nothing was sent")
	assert.NoError(t, snapshot("--allowed-gitea-urls", srv.URL))
}

// The Gitea clients read at most --gitea-max-response-bytes of an answer.
func TestGiteaClientsBoundAnswers(t *testing.T) {
	srv := giteatest.New()
	t.Cleanup(srv.Close)
	srv.AddToken("tok", "root", true)
	srv.InjectFault(3, giteatest.Fault{LargeBody: 100 << 10})
	r, err := parse(t, "--gitea-max-response-bytes", "65536", "--allowed-gitea-urls", srv.URL)
	require.NoError(t, err)
	factory, err := r.giteaFactory(nil)
	require.NoError(t, err)
	c, err := factory(srv.URL, "tok")
	require.NoError(t, err)

	_, err = c.Snapshot(t.Context(), scope.New("", gitea.ScopeGlobal, "", ""))

	require.ErrorIs(t, err, gitea.ErrBadResponse)
	assert.ErrorContains(t, err, "response larger than 65536 bytes")
}
