package scaler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// keptChecksCM is where these tests' passes keep their verdicts: the
// release namespace's ConfigMap, as the chart names it.
var keptChecksCM = types.NamespacedName{Namespace: "gitea-runners", Name: "gro-gitea-runner-operator-registration-checks"}

// keepingChecks points the scaler at the HTTP fake through the real
// client, and keeps its verdicts in keptChecksCM; its clock stands at
// t0, so the passes fall within one recheck whatever their work.
func keepingChecks(srv *giteatest.Server) setup {
	return func(d *Deps, c *Config) {
		d.Now = func() time.Time { return t0 }
		d.Gitea = func(_, token string) (gitea.Client, error) {
			return gitea.NewClient(srv.URL, token, gitea.Options{Timeout: 20 * time.Second})
		}
		c.KeptRegistrationChecks = &keptChecksCM
	}
}

// registrationRequests are the requests that ask Gitea for a scope's
// registration token.
func registrationRequests(reqs []string) []string {
	var out []string
	for _, r := range reqs {
		if strings.Contains(r, "registration-token") {
			out = append(out, r)
		}
	}
	return out
}

// Issue 38: a CronJob pass remembers nothing, so the registration token
// check's verdicts are kept in the release namespace's ConfigMap: a
// steady pass over 100 groups on one org sends Gitea the listing and
// nothing else, and a changed token Secret is checked at once.
func TestASteadyCronJobPassSendsGiteaOnlyTheListing(t *testing.T) {
	srv := giteatest.New()
	t.Cleanup(srv.Close)
	srv.AddToken(secretToken, "admin", true)
	scene := giteatest.Scene{Orgs: []giteatest.Org{{Name: "acme"}}, Repos: []giteatest.Repo{{Owner: "acme", Name: "app"}}}
	require.NoError(t, srv.Load(scene))
	scopeTokens(srv, scene)
	var groups []*v1alpha1.RunnerGroup
	for i := range 100 {
		groups = append(groups, newGroup(fmt.Sprintf("g%03d", i), 5, servedAt(t0)))
	}
	e := newServedEnv(t, groups...)
	// The chart's default: idle runners are looked for, so a pass lists
	// the org's jobs and its runners.
	defaults := func(_ *Deps, c *Config) { c.RunnerIdleTimeout = 10 * time.Minute }
	pass := func() { e.pass(keepingChecks(srv), defaults) }

	pass()
	first := srv.Requests()
	require.NotEmpty(t, registrationRequests(first), "the first pass checks the token")
	srv.ResetRequests()

	pass()
	assert.Len(t, srv.Requests(), 2, "a steady pass lists and asks nothing else: %v", srv.Requests())
	assert.Empty(t, registrationRequests(srv.Requests()))
	assert.Equal(t, v1alpha1.ReasonRegistrationTokenMatchesScope, regCondition(e.group("g042")).Reason)

	srv.ResetRequests()
	e.setSecretToken(ns, "reg", "a-token-of-another-scope")
	pass()
	assert.NotEmpty(t, registrationRequests(srv.Requests()), "a changed Secret is checked at once")
	assert.Equal(t, v1alpha1.ReasonRegistrationTokenNotForScope, ready(e.group("g042")).Reason)

	cm, err := e.kube.CoreV1().ConfigMaps(keptChecksCM.Namespace).Get(context.Background(), keptChecksCM.Name, metav1.GetOptions{})
	require.NoError(t, err)
	for k, v := range cm.Data {
		for _, secret := range []string{secretToken, "a-token-of-another-scope"} {
			assert.NotContains(t, k+v, secret, "no token is kept")
		}
	}
}

// A verdict is trusted only from the release namespace's ConfigMap: a
// tenant knows its own tokens, so it can compute their key, and a
// ConfigMap of that name it writes in its own namespace saying "match"
// for a token of another scope changes nothing.
func TestATenantWrittenVerdictChangesNothing(t *testing.T) {
	e := newServedEnv(t, newGroup("acme", 5, servedAt(t0)))
	e.setSecretToken(ns, "reg", "a-token-of-another-scope")
	c := &checkingGitea{fakeGitea: e.gitea, active: map[string]string{"org acme": "reg-" + secretToken}}
	target := scope.New("https://gitea.example.com", v1alpha1.ScopeOrg, "acme", "")
	key := regCheckKey("https://gitea.example.com", target, secretToken, "a-token-of-another-scope")
	forged, err := encodeKeptChecks(map[[32]byte]regVerdict{key: {at: t0, match: true, scope: target}}, t0)
	require.NoError(t, err)
	_, err = e.kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: keptChecksCM.Name, Namespace: ns}, Data: forged}, metav1.CreateOptions{})
	require.NoError(t, err)

	e.pass(checkedBy(c), func(_ *Deps, cfg *Config) { cfg.KeptRegistrationChecks = &keptChecksCM })

	assert.Equal(t, 1, c.checks, "Gitea is asked")
	assert.Equal(t, v1alpha1.ReasonRegistrationTokenNotForScope, ready(e.group("acme")).Reason)
}

// What the ConfigMap keeps: no transient failure, no expired verdict, and
// no more than its budget, the newest first; a refused check is kept with
// Gitea's reason.
func TestKeptChecksKeepOnlyLastingRecentVerdicts(t *testing.T) {
	now := t0.Add(time.Hour)
	place := scope.New("https://gitea.example.com", v1alpha1.ScopeOrg, "acme", "")
	key := func(i int) [32]byte { return regCheckKey("u", place, fmt.Sprint(i), "r") }
	tests := []struct {
		name string
		in   map[[32]byte]regVerdict
		want map[[32]byte]regVerdict
	}{
		{"a match and a refusal are kept",
			map[[32]byte]regVerdict{key(1): {at: now, match: true, scope: place}, key(2): {at: now, refused: fmt.Errorf("403 Forbidden: not an owner")}},
			map[[32]byte]regVerdict{key(1): {at: now, match: true, scope: place}, key(2): {at: now, refused: fmt.Errorf("403 Forbidden: not an owner")}}},
		{"a transient failure is not",
			map[[32]byte]regVerdict{key(1): {at: now, transient: fmt.Errorf("timeout")}},
			map[[32]byte]regVerdict{}},
		{"an expired verdict is dropped",
			map[[32]byte]regVerdict{key(1): {at: now.Add(-RegistrationTokenRecheck), match: true, scope: place}, key(2): {at: now.Add(-time.Minute)}},
			map[[32]byte]regVerdict{key(2): {at: now.Add(-time.Minute)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := encodeKeptChecks(tt.in, now)
			require.NoError(t, err)
			got := decodeKeptChecks(data, now)
			require.Len(t, got, len(tt.want))
			for k, w := range tt.want {
				g := got[k]
				assert.True(t, w.at.Equal(g.at))
				assert.Equal(t, w.match, g.match)
				assert.Equal(t, w.scope, g.scope)
				if w.refused != nil {
					require.Error(t, g.refused)
					assert.Equal(t, w.refused.Error(), g.refused.Error())
				}
			}
		})
	}

	t.Run("over budget, the oldest go", func(t *testing.T) {
		many := map[[32]byte]regVerdict{}
		for i := range 20_000 {
			many[key(i)] = regVerdict{at: now.Add(-time.Duration(i) * time.Millisecond), match: true, scope: place}
		}
		data, err := encodeKeptChecks(many, now)
		require.NoError(t, err)
		size := 0
		for k, v := range data {
			size += len(k) + len(v)
		}
		assert.LessOrEqual(t, size, keptChecksBudget)
		got := decodeKeptChecks(data, now)
		assert.Contains(t, got, key(0), "the newest stays")
		assert.NotContains(t, got, key(19_999), "the oldest goes")
	})
}

// A loop keeps its verdicts in memory and writes them too, so a restarted
// loop starts warm: it asks Gitea nothing its predecessor knew.
func TestARestartedLoopStartsWithTheKeptChecks(t *testing.T) {
	e := newServedEnv(t, newGroup("acme", 5, servedAt(t0)))
	c := &checkingGitea{fakeGitea: e.gitea, active: map[string]string{"org acme": "reg-" + secretToken}}
	kept := func(d *Deps, cfg *Config) {
		d.Now = func() time.Time { return t0 }
		cfg.KeptRegistrationChecks = &keptChecksCM
	}
	for range 2 {
		sc := e.scaler(checkedBy(c), asLoop, kept)
		for range 2 {
			_, err := sc.Pass(context.Background())
			require.NoError(t, err)
		}
	}
	assert.Equal(t, 1, c.checks, "one check for both loops")
	assert.Equal(t, v1alpha1.ReasonRegistrationTokenMatchesScope, regCondition(e.group("acme")).Reason)
}
