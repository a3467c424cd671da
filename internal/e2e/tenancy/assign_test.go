//go:build e2e

// Issue 19 on the real API server and a real Gitea: no tenant can take
// another tenant's jobs away through the assignment rule, and what a
// namespace's groups may serve is the platform's decision (the namespace's
// grant annotations).

package tenancy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// starveHold is the assignment hold of the starvation scene: short, so the
// test does not wait the default ten minutes for A's turn, and long beside
// a pass (2s) and a runner's start on the bed.
const starveHold = "45s"

// TestAnotherTenantCannotStarveAJob is issue 19's scene. Team A serves its
// organisation from its namespace (an org-scope group). Team B, in another
// namespace with a listener of its own, creates a repo-scope group on A's
// public repository, with a read-only token of its own user (enough to
// list that repository's jobs) and the registration token of its own user,
// so its runners can never take A's job. The rule prefers B's more
// specific group, which starts a runner for the job; after one assignment
// hold the job's turn goes to A's group, whose runner takes and runs it.
// Then the platform grants B's namespace only B's own user: B's group gets
// NotGranted, and A's next job is A's alone.
func TestAnotherTenantCannotStarveAJob(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 8*time.Minute)
	values := e2e.DeploymentValues()
	values["scaler"].(map[string]any)["assignmentHold"] = starveHold
	a := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "starve-a", Max: 2, Values: values})

	nsB := b.Namespace(ctx, t, "e2e-starve-b", nil)
	valuesB := e2e.DeploymentValues(nsB)
	valuesB["scaler"].(map[string]any)["assignmentHold"] = starveHold
	b.HelmInstall(ctx, t, nsB, "gro", valuesB)
	userB := e2e.Uniq("e2e-starve-b")
	fxB := b.NewUserScope(ctx, t, userB, "read:repository")
	const groupB = "rg-web"
	secretB := e2e.GroupSecret(groupB)
	b.TokenSecret(ctx, t, nsB, secretB, fxB.RegToken, fxB.APIToken)
	specB := b.GroupSpec(fxB, secretB, 2, a.Label)
	specB.Scope, specB.User, specB.Org, specB.Repo = v1alpha1.ScopeRepo, "", a.Fx.Repo.Owner, a.Fx.Repo.Name
	b.CreateGroup(ctx, t, nsB, groupB, nil, specB)
	dump := func() string { return a.Dump() + b.DumpNamespaces(nsB) }

	// Both groups served, so both count in the rule: B's group can list
	// A's repository's jobs with its read-only token. (It shows
	// RunnerReapFailed, as its token may not list that repository's
	// runners; a failure a retry may fix does not make it ineligible.)
	b.WaitServed(ctx, t, a.NS, a.Group, dump)
	b.WaitServed(ctx, t, nsB, groupB, dump)
	// B's read-only token may not ask Gitea for the repository's
	// registration token (403: it needs write:repository, and only the
	// repository's owner may), so the
	// scaler cannot tell that B's token is another scope's: it says so,
	// and the hold is what bounds B's group.
	rgB, err := b.Group(ctx, nsB, groupB)
	require.NoError(t, err)
	if c := e2e.Condition(rgB, "RegistrationToken"); assert.NotNil(t, c, e2e.StatusLine(rgB)) {
		assert.Equal(t, metav1.ConditionUnknown, c.Status)
		assert.Equal(t, "RegistrationTokenUnchecked", c.Reason)
		assert.Contains(t, c.Message, "forbidden (HTTP 403): token does not have at least one of required scope(s), required=[write:repository]", "Gitea's own reason")
	}
	rgA, err := b.Group(ctx, a.NS, a.Group)
	require.NoError(t, err)
	if c := e2e.Condition(rgA, "RegistrationToken"); assert.NotNil(t, c, e2e.StatusLine(rgA)) {
		assert.Equal(t, "RegistrationTokenMatchesScope", c.Reason, "A's admin token checks A's org token")
	}

	keys, wf := e2e.NumberedJobs("starve", 1, a.Label)
	e2e.PushJobs(ctx, t, b, a.Fx, "ci.yml", nil, wf...)
	ids := e2e.IDsOf(b.Gitea.WaitJobs(ctx, t, a.Fx.Repo, len(keys)), keys...)
	done := b.ExpectCompleted(ctx, t, a.NS, a.Group, a.Fx.Repo, ids, dump)
	require.Len(t, done, 1, "A's job ran on A's runner")
	runnersB, err := b.RunnerJobs(ctx, nsB, groupB)
	require.NoError(t, err)
	assert.Len(t, e2e.ByGiteaJob(runnersB)[ids[keys[0]]], 1,
		"the rule gave the job to B's more specific group first (the scene), whose runner could not take it: %v", e2e.JobNames(runnersB))

	// The platform grants B's namespace its own user only.
	nsObj, err := b.Kube.CoreV1().Namespaces().Get(ctx, nsB, metav1.GetOptions{})
	require.NoError(t, err)
	nsObj.Annotations = map[string]string{tenancy.AnnotationGrantedRepositories: userB}
	_, err = b.Kube.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
	require.NoError(t, err)
	e2e.WaitUntil(ctx, t, e2e.StepWait, "B's group outside its grant", dump, func(ctx context.Context) (bool, string, error) {
		rg, err := b.Group(ctx, nsB, groupB)
		if err != nil {
			return false, err.Error(), nil
		}
		c := e2e.Condition(rg, "Ready")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "NotGranted", e2e.StatusLine(rg), nil
	})

	keys2, wf2 := e2e.NumberedJobs("starve-granted", 1, a.Label)
	e2e.PushJobs(ctx, t, b, a.Fx, "ci2.yml", nil, wf2...)
	ids2 := e2e.IDsOf(b.Gitea.WaitJobs(ctx, t, a.Fx.Repo, len(keys)+len(keys2)), keys2...)
	done2 := b.ExpectCompleted(ctx, t, a.NS, a.Group, a.Fx.Repo, ids2, dump)
	require.Len(t, done2, 1)
	runnersB, err = b.RunnerJobs(ctx, nsB, groupB)
	require.NoError(t, err)
	assert.Empty(t, e2e.ByGiteaJob(runnersB)[ids2[keys2[0]]], "a group outside its grant takes no part in the rule")
}

// TestTwoGrantedTeamsOnOneRepository: the platform grants two namespaces
// the same repository (one team's org, the other team that repository
// alone), each served by a listener of its own, both with tokens that can
// serve it. Every job gets exactly one runner Job across both namespaces,
// and runs; within the hold the more specific group has them.
func TestTwoGrantedTeamsOnOneRepository(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 6*time.Minute)
	a := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "granted-a", Max: 3})
	nsC := b.Namespace(ctx, t, "e2e-granted-c", nil)
	for ns, grant := range map[string]string{a.NS: a.Fx.Repo.Owner, nsC: a.Fx.Repo.Owner + "/" + a.Fx.Repo.Name} {
		nsObj, err := b.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.NoError(t, err)
		nsObj.Annotations = map[string]string{tenancy.AnnotationGrantedRepositories: grant, tenancy.AnnotationGrantedGiteaURLs: e2e.GiteaURL}
		_, err = b.Kube.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	b.HelmInstall(ctx, t, nsC, "gro", e2e.DeploymentValues(nsC))
	const groupC = "rg-app"
	secretC := e2e.GroupSecret(groupC)
	b.TokenSecret(ctx, t, nsC, secretC, a.Fx.RegToken, a.Fx.APIToken)
	specC := b.GroupSpec(a.Fx, secretC, 3, a.Label)
	specC.Scope, specC.Repo = v1alpha1.ScopeRepo, a.Fx.Repo.Name
	b.CreateGroup(ctx, t, nsC, groupC, nil, specC)
	dump := func() string { return a.Dump() + b.DumpNamespaces(nsC) }
	b.WaitServed(ctx, t, a.NS, a.Group, dump)
	b.WaitServed(ctx, t, nsC, groupC, dump)

	keys, wf := e2e.NumberedJobs("granted", 3, a.Label)
	e2e.PushJobs(ctx, t, b, a.Fx, "ci.yml", nil, wf...)
	ids := e2e.IDsOf(b.Gitea.WaitJobs(ctx, t, a.Fx.Repo, len(keys)), keys...)
	done := b.ExpectCompleted(ctx, t, nsC, groupC, a.Fx.Repo, ids, dump)
	require.Len(t, done, len(keys), "the repository's own group ran every job")
	runnersA, err := b.RunnerJobs(ctx, a.NS, a.Group)
	require.NoError(t, err)
	assert.Empty(t, runnersA, "the org group left the jobs to the more specific group: %v", e2e.JobNames(runnersA))
}

// TestAWrongScopeRegistrationTokenHoldsNoJob is issue 19's scene where the
// scaler can tell: team B's repo-scope group on A's repository has an API
// token that may manage that repository's runners (the admin's here, as a
// shared bot's would be) and the registration token of B's own user. The
// scaler asks Gitea for the repository's token, sees B's is another
// scope's, and B's group shows RegistrationTokenNotForScope and holds no
// job: A's job is A's at once, with the default ten-minute hold, which
// this test does not wait for.
func TestAWrongScopeRegistrationTokenHoldsNoJob(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 6*time.Minute)
	a := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "wrongscope-a", Max: 2})

	nsB := b.Namespace(ctx, t, "e2e-wrongscope-b", nil)
	b.HelmInstall(ctx, t, nsB, "gro", e2e.DeploymentValues(nsB))
	fxB := b.NewUserScope(ctx, t, e2e.Uniq("e2e-wrongscope-b"), "read:repository")
	const groupB = "rg-web"
	secretB := e2e.GroupSecret(groupB)
	b.TokenSecret(ctx, t, nsB, secretB, fxB.RegToken, b.Gitea.AdminToken)
	specB := b.GroupSpec(fxB, secretB, 2, a.Label)
	specB.Scope, specB.User, specB.Org, specB.Repo = v1alpha1.ScopeRepo, "", a.Fx.Repo.Owner, a.Fx.Repo.Name
	b.CreateGroup(ctx, t, nsB, groupB, nil, specB)
	dump := func() string { return a.Dump() + b.DumpNamespaces(nsB) }

	b.WaitServed(ctx, t, a.NS, a.Group, dump)
	e2e.WaitUntil(ctx, t, e2e.StepWait, "B's registration token found another scope's", dump, func(ctx context.Context) (bool, string, error) {
		rg, err := b.Group(ctx, nsB, groupB)
		if err != nil {
			return false, err.Error(), nil
		}
		ready, reg := e2e.Condition(rg, "Ready"), e2e.Condition(rg, "RegistrationToken")
		return ready != nil && ready.Reason == "RegistrationTokenNotForScope" && reg != nil && reg.Status == metav1.ConditionFalse, e2e.StatusLine(rg), nil
	})
	rgB, err := b.Group(ctx, nsB, groupB)
	require.NoError(t, err)
	for _, c := range rgB.Status.Conditions {
		assert.NotContains(t, c.Message, fxB.RegToken, "no token in the status")
	}

	keys, wf := e2e.NumberedJobs("wrongscope", 1, a.Label)
	e2e.PushJobs(ctx, t, b, a.Fx, "ci.yml", nil, wf...)
	ids := e2e.IDsOf(b.Gitea.WaitJobs(ctx, t, a.Fx.Repo, len(keys)), keys...)
	// Judged by Gitea: the job succeeded on a runner named with A's
	// group and owner tag (A's spent runner Job may be gone by then).
	rgA, err := b.Group(ctx, a.NS, a.Group)
	require.NoError(t, err)
	e2e.WaitUntil(ctx, t, e2e.StepWait, "A's job succeeded on A's runner", dump, func(ctx context.Context) (bool, string, error) {
		jobs, err := b.Gitea.RepoJobs(ctx, a.Fx.Repo)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, j := range jobs {
			if j.ID == ids[keys[0]] {
				_, ours := runnerjob.JobOfRunner(rgA, j.RunnerName)
				return j.State() == "completed/success" && ours, fmt.Sprintf("%s on runner %q", j.State(), j.RunnerName), nil
			}
		}
		return false, "not listed", nil
	})
	runnersB, err := b.RunnerJobs(ctx, nsB, groupB)
	require.NoError(t, err)
	assert.Empty(t, runnersB, "B's group started no runner: %v", e2e.JobNames(runnersB))
}

// TestRegistrationTokenCheckOnTheRealGitea pins what the check relies on,
// on Gitea 1.26: POST answers the scope's active token (so the real
// client's verdict is right both ways, for a scope and the scopes that
// contain it), a user's repository's owner is asked as a user when the
// org endpoint refuses (403 for a token without write:organization), GET on
// that path is no way to read a token (404 "Runner not found"), and a
// token that may only read the repository cannot ask (403).
func TestRegistrationTokenCheckOnTheRealGitea(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 2*time.Minute)
	g := b.Gitea
	org := g.CreateOrg(ctx, t, e2e.Uniq("e2e-regcheck"))
	repo := g.CreateOrgRepo(ctx, t, org, "web")
	orgToken := g.RegistrationToken(ctx, t, g.Admin, giteasetup.OrgRunners(org))
	user := e2e.Uniq("e2e-regcheck-u")
	pass := g.CreateUser(ctx, t, user)
	readOnly := g.UserToken(ctx, t, user, pass, "ro", "read:repository")
	owner := g.Admin.WithToken(g.UserToken(ctx, t, user, pass, "setup", "write:repository", "write:user"))
	userToken := g.RegistrationToken(ctx, t, owner, giteasetup.UserRunners())

	admin, err := gitea.NewClient(g.Admin.URL(), g.AdminToken, gitea.Options{})
	require.NoError(t, err)
	check := admin.(gitea.RegistrationCheck)
	orgTarget := scope.New("", gitea.ScopeOrg, org, "")
	repoTarget := scope.New("", gitea.ScopeRepo, repo.Owner, repo.Name)
	for _, tt := range []struct {
		name   string
		target scope.Place
		token  string
		want   bool
	}{
		{"the org's own token", orgTarget, orgToken, true},
		{"a user's token is not the org's", orgTarget, userToken, false},
		{"the org's token serves its repository too", repoTarget, orgToken, true},
		{"a user's token is not another org's repository's", repoTarget, userToken, false},
	} {
		scope, got, err := check.RegistrationScope(ctx, tt.target, tt.token)
		require.NoError(t, err, tt.name)
		assert.Equal(t, tt.want, got, tt.name)
		if got {
			assert.Equal(t, orgTarget, scope, "%s: the org's runners register in the org", tt.name)
		}
	}
	// A user's repository: the org endpoint refuses a token without
	// write:organization (403, before it looks for an org), so the user's
	// own token is asked for next, which the user's API token may.
	userRepo := g.CreateUserRepo(ctx, t, owner, "tool")
	asUser, err := gitea.NewClient(g.Admin.URL(), g.UserToken(ctx, t, user, pass, "check", "write:repository", "write:user"), gitea.Options{})
	require.NoError(t, err)
	where, got, err := asUser.(gitea.RegistrationCheck).RegistrationScope(ctx, scope.New("", gitea.ScopeRepo, userRepo.Owner, userRepo.Name), userToken)
	require.NoError(t, err)
	assert.True(t, got, "the user's token serves the user's repository")
	assert.Equal(t, scope.New("", gitea.ScopeUser, userRepo.Owner, ""), where, "its runners register in the user's scope")

	ro, err := gitea.NewClient(g.Admin.URL(), readOnly, gitea.Options{})
	require.NoError(t, err)
	_, _, err = ro.(gitea.RegistrationCheck).RegistrationScope(ctx, repoTarget, orgToken)
	require.ErrorIs(t, err, gitea.ErrForbidden, "a read-only token of a user who does not own the repository cannot ask")
	assert.Contains(t, err.Error(), "forbidden (HTTP 403): token does not have at least one of required scope(s), required=[write:repository]")
	assert.NotContains(t, err.Error(), orgToken)

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.Admin.URL()+"/api/v1/orgs/"+org+"/actions/runners/registration-token", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "token "+g.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "Gitea 1.26 has no GET of the registration token")
	assert.Equal(t, "Runner not found", body["message"])
	assert.NotContains(t, body, "token")
}
