package scaler

import (
	"context"
	"crypto/sha256"
	"errors"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// checkingGitea is fakeGitea that can also tell a scope's active
// registration token (gitea.RegistrationCheck), as the real client does
// by asking Gitea: active holds each target's token and errs each
// target's failure (both by scope.Place.String); checks counts them.
type checkingGitea struct {
	*fakeGitea
	mu     sync.Mutex
	active map[string]string
	errs   map[string]error
	checks int
}

// RegistrationScope answers as Gitea does: the target's own token, then
// its owner's (org or user) for a repository, then the instance's; the
// first that matches is the scope runners register in.
func (c *checkingGitea) RegistrationScope(_ context.Context, t scope.Place, token string) (scope.Place, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks++
	if err := c.errs[t.String()]; err != nil {
		return scope.Place{}, false, err
	}
	scopes := []scope.Place{t}
	if t.Scope() == gitea.ScopeRepo {
		scopes = append(scopes, t.On(gitea.ScopeOrg, t.Owner()), t.On(gitea.ScopeUser, t.Owner()))
	}
	if t.Scope() != gitea.ScopeGlobal {
		scopes = append(scopes, t.On(gitea.ScopeGlobal, ""))
	}
	for _, s := range scopes {
		if active, ok := c.active[s.String()]; ok && active == token {
			return s, true, nil
		}
	}
	return scope.Place{}, false, nil
}

// checkedBy makes the pass's Gitea client the checking fake c.
func checkedBy(c *checkingGitea) setup {
	return func(d *Deps, _ *Config) {
		d.Gitea = func(string, string) (gitea.Client, error) { return c, nil }
	}
}

// regCondition is the group's RegistrationToken condition, or the zero
// condition when it has none.
func regCondition(rg *v1alpha1.RunnerGroup) metav1.Condition {
	if c := meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionRegistrationToken); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// setSecretToken overwrites the token of the Secret name in namespace.
func (e *env) setSecretToken(namespace, name, value string) {
	e.t.Helper()
	s, err := e.kube.CoreV1().Secrets(namespace).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(e.t, err)
	s.Data["token"] = []byte(value)
	_, err = e.kube.CoreV1().Secrets(namespace).Update(context.Background(), s, metav1.UpdateOptions{})
	require.NoError(e.t, err)
}

// Issue 19.2: team B's repo-scope group on team A's repository, whose
// registration token is B's own org's. Where B's API token may ask Gitea
// for the repository's registration token, the scaler sees that B's token
// is not it: B's group serves nothing (RegistrationTokenNotForScope) and
// A's group has the job at once, within the hold. Where it may not, the
// status says the token is unchecked, and the hold bounds how long B's
// group keeps A's job.
func TestARegistrationTokenOfAnotherScopeHoldsNoJob(t *testing.T) {
	const teamA, teamB = "team-a", "team-b"
	hold := 10 * time.Minute
	webToken, otherToken := "web-registration-token", "fabrikam-registration-token"
	tests := []struct {
		name     string
		secretB  string
		checkErr error
		created  time.Time
		want     map[string]int
		reasonB  string
		regCond  metav1.ConditionStatus
		regCause string
	}{
		{"B's token is another scope's: A has the job at once", otherToken, nil, t0,
			map[string]int{"team-a/contoso": 1}, v1alpha1.ReasonRegistrationTokenNotForScope, metav1.ConditionFalse, v1alpha1.ReasonRegistrationTokenNotForScope},
		{"B's token is the repository's own: B's more specific group has it", webToken, nil, t0,
			map[string]int{"team-b/web": 1}, v1alpha1.ReasonReconciled, metav1.ConditionTrue, v1alpha1.ReasonRegistrationTokenMatchesScope},
		{"B's API token may not ask: unchecked, B keeps it within the hold", otherToken, &gitea.APIError{Kind: gitea.ErrForbidden, Status: 403, Message: "user should be the owner of the repo"}, t0,
			map[string]int{"team-b/web": 1}, v1alpha1.ReasonReconciled, metav1.ConditionUnknown, v1alpha1.ReasonRegistrationTokenUnchecked},
		{"unchecked, past the hold: A has it", otherToken, &gitea.APIError{Kind: gitea.ErrForbidden, Status: 403, Message: "user should be the owner of the repo"}, t0.Add(-hold - time.Minute),
			map[string]int{"team-a/contoso": 1}, v1alpha1.ReasonReconciled, metav1.ConditionUnknown, v1alpha1.ReasonRegistrationTokenUnchecked},
		{"Gitea timed out on the check: unchecked for now, not a failure", otherToken, &gitea.APIError{Kind: gitea.ErrTimeout, Message: "no answer"}, t0,
			map[string]int{"team-b/web": 1}, v1alpha1.ReasonReconciled, metav1.ConditionUnknown, v1alpha1.ReasonRegistrationTokenUnchecked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			org := func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "contoso" }
			a := newGroup("contoso", 5, inNamespace(teamA), org, servedAt(t0))
			b := newGroup("web", 5, inNamespace(teamB), org, repoScope("web"), servedAt(t0))
			e := newServedEnv(t, a, b)
			e.addTokens(teamA)
			e.addTokens(teamB)
			e.setSecretToken(teamB, "reg", tt.secretB)
			c := &checkingGitea{fakeGitea: e.gitea, errs: map[string]error{"repo contoso/web": tt.checkErr}, active: map[string]string{
				"org contoso": "contoso-registration-token", "repo contoso/web": webToken,
			}}
			e.setSecretToken(teamA, "reg", "contoso-registration-token")
			job := queuedIn(1, "contoso/web", "ubuntu-latest")
			job.Created = tt.created
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{job}}
			e.pass(checkedBy(c), func(_ *Deps, cfg *Config) { cfg.AssignmentHold = hold })

			assert.Equal(t, tt.want, e.runnersOf(teamA, teamB))
			rgB := e.groupIn(teamB, "web")
			assert.Equal(t, tt.reasonB, ready(rgB).Reason)
			cond := regCondition(rgB)
			assert.Equal(t, tt.regCond, cond.Status)
			assert.Equal(t, tt.regCause, cond.Reason)
			for _, m := range []string{cond.Message, ready(rgB).Message} {
				assert.NotContains(t, m, tt.secretB, "no token in the status")
				assert.NotContains(t, m, webToken)
			}
			if tt.checkErr != nil {
				assert.Contains(t, cond.Message, tt.checkErr.(*gitea.APIError).Message, "Gitea's reason is shown")
				assert.Contains(t, cond.Message, "assignmentHold")
			}
			assert.Equal(t, metav1.ConditionTrue, regCondition(e.groupIn(teamA, "contoso")).Status, "A's own token checked")
		})
	}
}

// A listener that does not serve B's namespace judges B's group by its
// recorded status: a group whose last pass found its registration token
// another scope's keeps no job.
func TestARecordedRegistrationTokenOfAnotherScopeKeepsNoJob(t *testing.T) {
	org := func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "contoso" }
	a := newGroup("contoso", 5, inNamespace("team-a"), org, servedAt(t0))
	b := newGroup("web", 5, inNamespace("team-b"), org, repoScope("web"), recordedFailure(v1alpha1.ReasonRegistrationTokenNotForScope))
	e := newServedEnv(t, a, b)
	e.addTokens("team-a")
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queuedIn(1, "contoso/web", "ubuntu-latest")}}
	e.pass(func(_ *Deps, c *Config) { c.Namespaces, c.AssignmentHold = []string{"team-a"}, time.Hour })
	assert.Equal(t, map[string]int{"team-a/contoso": 1}, e.runnersOf("team-a", "team-b"))
}

// The check is one request per group and RegistrationTokenRecheck while
// the tokens stay the same: a listener's passes every few seconds do not
// each ask Gitea. A changed Secret is checked as soon as the loop reads
// it again.
func TestARegistrationTokenIsCheckedAgainOnlyWhenItChangesOrTheRecheckIsDue(t *testing.T) {
	e := newServedEnv(t, newGroup("acme", 5, servedAt(t0)))
	c := &checkingGitea{fakeGitea: e.gitea, active: map[string]string{"org acme": "reg-" + secretToken}}
	clock := t0
	sc := e.scaler(checkedBy(c), asLoop, func(d *Deps, _ *Config) { d.Now = func() time.Time { return clock } })
	pass := func() {
		_, err := sc.Pass(context.Background())
		require.NoError(t, err)
	}
	pass()
	pass()
	assert.Equal(t, 1, c.checks, "the same tokens are not asked again within the recheck")
	assert.Equal(t, v1alpha1.ReasonRegistrationTokenMatchesScope, regCondition(e.group("acme")).Reason)

	e.setSecretToken(ns, "reg", "a-token-of-another-scope")
	clock = clock.Add(SecretRecheck) // when the loop reads the Secret again
	pass()
	assert.Equal(t, 2, c.checks, "a changed Secret is checked at once")
	assert.Equal(t, v1alpha1.ReasonRegistrationTokenNotForScope, ready(e.group("acme")).Reason)
	pass()
	assert.Equal(t, 2, c.checks, "a verdict is kept as long as a match")

	e.setSecretToken(ns, "reg", "reg-"+secretToken)
	pass()
	assert.Equal(t, v1alpha1.ReasonReconciled, ready(e.group("acme")).Reason, "fixed as soon as the Secret is (its verdict is known)")
	assert.Equal(t, 2, c.checks)
	clock = clock.Add(RegistrationTokenRecheck)
	pass()
	assert.Equal(t, 3, c.checks, "asked again once the recheck is due (a reset in Gitea)")
}

// A group whose registration token the scaler mints holds the scope's
// token by construction: no check is sent, and the condition says so.
func TestAMintedRegistrationTokenNeedsNoCheck(t *testing.T) {
	e := newServedEnv(t, newGroup("acme", 5, minting, servedAt(t0)))
	e.gitea.regToken = "minted-token"
	c := &checkingGitea{fakeGitea: e.gitea}
	e.pass(checkedBy(c))
	assert.Zero(t, c.checks)
	cond := regCondition(e.group("acme"))
	assert.Equal(t, metav1.ConditionTrue, cond.Status)
	assert.Equal(t, v1alpha1.ReasonRegistrationTokenMinted, cond.Reason)
}

// Issue 19.2: a group that cannot serve another namespace's job never
// holds it from a group that can for longer than one assignmentHold. Where
// the pass can tell (paused, a Secret missing, a registration token of
// another scope) it holds the job not at all; where it cannot (a token it
// may not check, runner Jobs refused by a quota), the hold bounds it.
func TestAGroupThatCannotServeHoldsAnotherNamespacesJobAtMostOneHold(t *testing.T) {
	const teamA, teamB = "team-a", "team-b"
	hold := 10 * time.Minute
	forbidden := &gitea.APIError{Kind: gitea.ErrForbidden, Status: 403, Message: "user should be the owner of the repo"}
	tests := []struct {
		name string
		// spec and spoil make B's group unable to serve: its spec, and
		// what is around it.
		spec       func(b *v1alpha1.RunnerGroup)
		spoil      func(e *env, c *checkingGitea)
		withinHold string
	}{
		{name: "paused (maxActiveRunners 0)", spec: func(b *v1alpha1.RunnerGroup) { b.Spec.MaxActiveRunners = 0 }, withinHold: "team-a/contoso"},
		{name: "its registration token Secret is missing", spoil: func(e *env, _ *checkingGitea) {
			require.NoError(e.t, e.kube.CoreV1().Secrets(teamB).Delete(context.Background(), "reg", metav1.DeleteOptions{}))
		}, withinHold: "team-a/contoso"},
		{name: "its registration token is another scope's", spoil: func(e *env, _ *checkingGitea) {
			e.setSecretToken(teamB, "reg", "fabrikam-registration-token")
		}, withinHold: "team-a/contoso"},
		{name: "its registration token cannot be checked", spoil: func(e *env, c *checkingGitea) {
			e.setSecretToken(teamB, "reg", "fabrikam-registration-token")
			c.errs["repo contoso/web"] = forbidden
		}, withinHold: "team-b/web"},
		{name: "its runner Jobs are refused (a ResourceQuota of 0 Jobs)", spoil: func(e *env, _ *checkingGitea) {
			e.kube.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetNamespace() != teamB {
					return false, nil, nil
				}
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "", errors.New("exceeded quota: jobs, requested: count/jobs.batch=1, used: count/jobs.batch=0, limited: count/jobs.batch=0"))
			})
		}},
	}
	for _, tt := range tests {
		for _, past := range []bool{false, true} {
			name := tt.name + ", within the hold"
			if past {
				name = tt.name + ", past the hold"
			}
			t.Run(name, func(t *testing.T) {
				org := func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "contoso" }
				a := newGroup("contoso", 5, inNamespace(teamA), org, servedAt(t0))
				b := newGroup("web", 5, inNamespace(teamB), org, repoScope("web"), servedAt(t0))
				if tt.spec != nil {
					tt.spec(b)
				}
				e := newServedEnv(t, a, b)
				c := &checkingGitea{fakeGitea: e.gitea, errs: map[string]error{}, active: map[string]string{
					"org contoso": "contoso-registration-token", "repo contoso/web": "web-registration-token",
				}}
				e.addTokens(teamA)
				e.addTokens(teamB)
				e.setSecretToken(teamA, "reg", "contoso-registration-token")
				e.setSecretToken(teamB, "reg", "web-registration-token")
				if tt.spoil != nil {
					tt.spoil(e, c)
				}
				job := queuedIn(1, "contoso/web", "ubuntu-latest")
				job.Created = t0
				if past {
					job.Created = t0.Add(-hold - time.Minute)
				}
				e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{job}}
				e.pass(checkedBy(c), func(_ *Deps, cfg *Config) { cfg.AssignmentHold = hold })

				want := map[string]int{"team-a/contoso": 1}
				if !past {
					want = map[string]int{}
					if tt.withinHold != "" {
						want[tt.withinHold] = 1
					}
				}
				assert.Equal(t, want, e.runnersOf(teamA, teamB))
			})
		}
	}
}

// Groups of one pass that check the same registration token at the same
// time (a pass serves several groups at once) ask Gitea once; a transient
// failure is not kept, so the next one asks again.
func TestGroupsCheckingOneTokenAtOnceAskOnce(t *testing.T) {
	var r regChecks
	key := sha256.Sum256([]byte("one target, one pair of tokens"))
	var asks atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := r.verdict(key, t0, func() regVerdict {
				asks.Add(1)
				<-release
				return regVerdict{at: t0, match: true}
			})
			assert.True(t, v.match)
		}()
	}
	for asks.Load() == 0 {
		goruntime.Gosched()
	}
	// Let the others reach the check in flight before it answers.
	for range 1000 {
		goruntime.Gosched()
	}
	close(release)
	wg.Wait()
	assert.EqualValues(t, 1, asks.Load(), "one ask for the groups that wanted it at once")

	other := sha256.Sum256([]byte("another pair"))
	failing := func() regVerdict { asks.Add(1); return regVerdict{at: t0, transient: errors.New("timeout")} }
	r.verdict(other, t0, failing)
	r.verdict(other, t0, failing)
	assert.EqualValues(t, 3, asks.Load(), "a transient failure is asked again")
}
