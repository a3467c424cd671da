package scaler

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
)

// The two tenants' API tokens on contoso: A's user, alice, owns the org;
// B's, mallory, is no member.
const tokenA, tokenB = "team-a-api-token", "team-b-api-token"

// contoso is the fake Gitea of the cross-tenant scenes: org contoso, owned
// by team A's user, with one queued job in contoso/web.
func contoso(t *testing.T) *giteatest.Server {
	t.Helper()
	srv := giteatest.New()
	t.Cleanup(srv.Close)
	srv.AddToken(tokenA, "alice", false)
	srv.AddToken(tokenB, "mallory", false)
	require.NoError(t, srv.Load(giteatest.Scene{
		Users: []string{"alice", "mallory"},
		Orgs:  []giteatest.Org{{Name: "contoso", Owners: []string{"alice"}, Members: []string{"alice"}}},
		Repos: []giteatest.Repo{{Owner: "contoso", Name: "web"}},
		Jobs: []giteatest.Job{{ID: 1, Owner: "contoso", Repo: "web", RunID: 1, Name: "build",
			Labels: []string{"ubuntu-latest"}, Status: giteatest.StatusQueued}},
	}))
	return srv
}

// Issue 19.3, the shared Gitea listing: groups of two namespaces on one
// Gitea and one org share a listing only when they hold the very same
// token. Team B's group names A's org with a token of its own that Gitea
// refuses there: it must get Gitea's refusal, not A's listing (which a
// listing keyed by URL and target alone would hand it), and A's token is
// never sent for B's group.
func TestOneTenantsTokenNeverAnswersForAnothersGroup(t *testing.T) {
	srv := contoso(t)
	scopeTokens(srv, giteatest.Scene{Orgs: []giteatest.Org{{Name: "contoso"}}})
	org := func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "contoso" }
	a := newGroup("contoso", 5, inNamespace("team-a"), org, servedAt(t0))
	b := newGroup("contoso", 5, inNamespace("team-b"), org, servedAt(t0))
	e := newServedEnv(t, a, b)
	for ns, token := range map[string]string{"team-a": tokenA, "team-b": tokenB} {
		addSecret(t, e, ns, "api", token)
		addSecret(t, e, ns, "reg", "reg-"+secretToken)
	}
	var sentFor []string
	useFake := func(d *Deps, _ *Config) {
		inner := d.Gitea
		d.Gitea = func(url, token string) (gitea.Client, error) {
			_, _ = inner(url, token) // records the token, as every test's factory does
			sentFor = append(sentFor, token)
			return gitea.NewClient(srv.URL, token, gitea.Options{})
		}
	}

	sum := e.pass(useFake)

	assert.Equal(t, []string{"team-b/contoso"}, sum.Failed)
	assert.Equal(t, map[string]int{"team-a/contoso": 1}, e.runnersOf("team-a", "team-b"))
	rgB := e.groupIn("team-b", "contoso")
	assert.Equal(t, v1alpha1.ReasonGiteaForbidden, ready(rgB).Reason, "B's group gets Gitea's answer to B's token")
	assert.Zero(t, rgB.Status.QueuedJobs, "and none of A's listing")
	assert.ElementsMatch(t, []string{tokenA, tokenB}, sentFor, "each group's client holds its own token")
}

// Issue 19.3, the webhook: one secret signs every tenant's deliveries, so
// any tenant whose repository's hook holds it can name any repository.
// What a delivery names only chooses which groups the next pass serves
// (every one could, at the next poll, anyway); what they serve comes from
// Gitea, with each group's own token. So deliveries naming team A's
// repository, from anyone, start no runner Gitea does not list as queued,
// and their passes are bounded as TestTriggeredPassesAreRateLimited and
// TestPendingTriggersAreBounded prove.
func TestADeliveryStartsNoRunnerGiteaDoesNotList(t *testing.T) {
	e := newEnv(t, newGroup("contoso", 5, inNamespace("team-a"), func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "contoso" }))
	e.addTokens("team-a")
	g := &countingGitea{calls: map[string]int{}}
	sc := e.scaler(func(d *Deps, _ *Config) {
		d.Gitea = func(string, string) (gitea.Client, error) { return g, nil }
	})
	startLoop(t, sc)
	waitFor(t, "the first pass", func() bool { return g.count("org contoso") == 1 })
	sc.Trigger(QueuedJob{Repo: "contoso/web", Labels: []string{"ubuntu-latest"}})
	waitFor(t, "a triggered pass", func() bool { return g.count("org contoso") >= 2 })
	assert.Equal(t, map[string]int{}, e.runnersOf("team-a"), "Gitea lists nothing queued: no runner")
}

// Issue 19.3, minted tokens: a group without spec.registrationToken has the
// scaler mint its scope's token with the group's own API token, into a
// Secret of the group's own namespace. Team B's group naming A's org, with
// a token Gitea refuses there, gets no token of A's (GiteaForbidden, no
// Secret, no runner), keeps none of A's jobs, and A's minted Secret is A's
// alone.
func TestAnotherTenantGetsNoMintedTokenItsTokenCouldNot(t *testing.T) {
	srv := contoso(t)
	org := func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "contoso" }
	a := newGroup("ci", 5, inNamespace("team-a"), org, minting, servedAt(t0))
	b := newGroup("ci", 5, inNamespace("team-b"), org, minting, repoScope("web"), servedAt(t0))
	e := newServedEnv(t, a, b)
	addSecret(t, e, "team-a", "api", tokenA)
	addSecret(t, e, "team-b", "api", tokenB)

	sum := e.pass(func(d *Deps, _ *Config) {
		d.Gitea = func(_, token string) (gitea.Client, error) {
			return gitea.NewClient(srv.URL, token, gitea.Options{})
		}
	})

	assert.Equal(t, []string{"team-b/ci"}, sum.Failed)
	assert.Equal(t, v1alpha1.ReasonGiteaForbidden, ready(e.groupIn("team-b", "ci")).Reason)
	assert.Equal(t, map[string]int{"team-a/ci": 1}, e.runnersOf("team-a", "team-b"), "A's job is A's at once")
	minted := v1alpha1.MintedRegistrationTokenSecret("ci")
	_, err := e.kube.CoreV1().Secrets("team-b").Get(context.Background(), minted, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no token minted for B")
	sa, err := e.kube.CoreV1().Secrets("team-a").Get(context.Background(), minted, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, srv.RegistrationToken("contoso"), string(sa.Data[v1alpha1.MintedRegistrationTokenKey]))
	assert.Equal(t, a.UID, sa.OwnerReferences[0].UID, "owned by A's group only")
}
