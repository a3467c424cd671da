package gitea

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
)

func TestRegisterRunner(t *testing.T) {
	labels := []string{"ubuntu-latest:docker://node:20", "self-hosted"}
	tests := []struct {
		name      string
		token     func(f *giteatest.Server) string
		fault     *giteatest.Fault
		wantKind  error
		wantOwner string
		wantRepo  string
	}{
		{name: "an org's token registers in the org", token: func(f *giteatest.Server) string { return f.RegistrationToken("acme") }, wantOwner: "acme"},
		{name: "a repository's token registers in the repository", token: func(f *giteatest.Server) string { return f.RegistrationToken("acme/app") }, wantOwner: "acme", wantRepo: "app"},
		{name: "an unknown token is refused", token: func(*giteatest.Server) string { return "not-a-token-gitea-knows-0123456789abcdef" }, wantKind: ErrUnauthorized},
		{
			name: "Gitea down", token: func(f *giteatest.Server) string { return f.RegistrationToken("acme") },
			fault: &giteatest.Fault{Path: giteatest.RegisterPath, Status: http.StatusServiceUnavailable}, wantKind: ErrServer,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAs(t, giteatest.Gitea126, fixtureScene())
			token := tt.token(f)
			if tt.fault != nil {
				f.InjectFault(1, *tt.fault)
			}
			creds, err := RegisterRunner(t.Context(), nil, testTimeout, f.URL+"/", token, NewRunner{Name: "rg-ci-abcde-1234", Labels: labels, Ephemeral: true})
			if tt.wantKind != nil {
				require.ErrorIs(t, err, tt.wantKind)
				assert.NotContains(t, err.Error(), token, "the registration token is never part of an error")
				assert.Empty(t, f.Runners(), "nothing registered")
				return
			}
			require.NoError(t, err)
			runners := f.Runners()
			require.Len(t, runners, 1)
			got := runners[0]
			assert.Equal(t, giteatest.Runner{ID: creds.ID, Name: "rg-ci-abcde-1234", Owner: tt.wantOwner, Repo: tt.wantRepo, Ephemeral: true, Labels: []string{"ubuntu-latest", "self-hosted"}}, got,
				"Gitea is sent the label names, as the runner's own register command sends them")
			assert.Equal(t, RunnerCredentials{
				ID: got.ID, UUID: creds.UUID, Name: "rg-ci-abcde-1234", Token: f.RunnerToken(got.ID),
				Address: f.URL, Labels: labels, Ephemeral: true,
			}, creds, "the runner's own credentials, with its full labels and the address without a trailing slash")
			assert.NotEmpty(t, creds.UUID)
			assert.NotEqual(t, token, creds.Token)
		})
	}
}
