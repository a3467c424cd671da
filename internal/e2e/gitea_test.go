//go:build e2e

// Gitea: the scenes the tests set up there (organisations, users,
// repositories, tokens, workflows) and the jobs they watch, through
// giteasetup, the client scripts/testbed and scripts/demo use too.

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
)

// giteaAPI fits giteasetup's client to tests: a failed call fails the test
// with its error redacted, what a test creates goes when the test ends, and
// every secret a call returns is registered for redaction.
type giteaAPI struct {
	// admin holds the test bed's admin token.
	admin      *giteasetup.Client
	adminToken string
}

func newGiteaAPI(url, adminToken string) *giteaAPI {
	secrets.add(adminToken)
	return &giteaAPI{admin: giteasetup.New(url, adminToken, nil), adminToken: adminToken}
}

// mustGitea fails the test if a Gitea call failed.
func mustGitea(t *testing.T, err error, what string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %s", fmt.Sprintf(what, args...), redact(err.Error()))
	}
}

// afterTest runs a Gitea cleanup when the test ends, unless E2E_KEEP asks to
// keep what the test made; a failure is logged, since the bed goes on.
func afterTest(t *testing.T, what string, cleanup func(ctx context.Context) error) {
	t.Cleanup(func() {
		if keep() {
			return
		}
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := cleanup(ctx); err != nil {
			t.Logf("%s: %s", what, redact(err.Error()))
		}
	})
}

// createOrg creates an organisation and deletes it when the test ends, so
// that organisations do not pile up on the bed. Its repositories go first:
// they are created after it, and cleanups run in reverse order.
func (g *giteaAPI) createOrg(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	mustGitea(t, g.admin.CreateOrg(ctx, name), "create Gitea org %s", name)
	afterTest(t, "deleting Gitea org "+name, func(ctx context.Context) error { return g.admin.DeleteOrg(ctx, name) })
	return name
}

// createOrgRepo creates a repository with a main branch in an organisation,
// as the admin, and deletes it when the test ends so that jobs left queued
// do not pile up in the instance-wide listings.
func (g *giteaAPI) createOrgRepo(ctx context.Context, t *testing.T, org, name string) giteasetup.Repo {
	t.Helper()
	r, err := g.admin.CreateOrgRepo(ctx, org, name)
	mustGitea(t, err, "create repository %s/%s", org, name)
	g.deleteAfterTest(t, r)
	return r
}

// createUserRepo creates a repository with a main branch as the user whose
// token owner holds, and deletes it (as the admin) when the test ends.
func (g *giteaAPI) createUserRepo(ctx context.Context, t *testing.T, owner *giteasetup.Client, name string) giteasetup.Repo {
	t.Helper()
	r, err := owner.CreateUserRepo(ctx, name)
	mustGitea(t, err, "create the user's repository %s", name)
	g.deleteAfterTest(t, r)
	return r
}

func (g *giteaAPI) deleteAfterTest(t *testing.T, r giteasetup.Repo) {
	afterTest(t, "deleting repository "+r.String(), func(ctx context.Context) error { return g.admin.DeleteRepo(ctx, r) })
}

// createUser creates a user with the admin API and returns its password.
func (g *giteaAPI) createUser(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	var b [12]byte
	_, _ = rand.Read(b[:])
	pass := "Pw-" + base64.RawURLEncoding.EncodeToString(b[:])
	secrets.add(pass)
	mustGitea(t, g.admin.CreateUser(ctx, name, name+"@e2e.invalid", pass), "create Gitea user %s", name)
	return pass
}

// userToken mints an access token for a user with basic auth, as the user
// would in the web UI.
func (g *giteaAPI) userToken(ctx context.Context, t *testing.T, user, pass, name string, scopes ...string) string {
	t.Helper()
	token, err := g.admin.WithPassword(user, pass).CreateToken(ctx, user, name, scopes...)
	mustGitea(t, err, "token %s of %s", name, user)
	secrets.add(token)
	return token
}

// registrationToken mints (or returns the current) runner registration
// token of a scope, asking as c.
func (g *giteaAPI) registrationToken(ctx context.Context, t *testing.T, c *giteasetup.Client, scope giteasetup.Runners) string {
	t.Helper()
	token, err := c.RegistrationToken(ctx, scope)
	mustGitea(t, err, "runner registration token")
	secrets.add(token)
	return token
}

// pushWorkflow commits .gitea/workflows/<file> to main as c, which triggers
// it.
func (g *giteaAPI) pushWorkflow(ctx context.Context, t *testing.T, c *giteasetup.Client, r giteasetup.Repo, file, content string) {
	t.Helper()
	mustGitea(t, c.PushWorkflow(ctx, r, file, []byte(content)), "push workflow %s to %s", file, r)
}

// wfJob is one job of a workflow.
type wfJob struct {
	key    string
	runsOn []string
	needs  []string
}

// numberedJobs is n independent workflow jobs keyed prefix-0, prefix-1, …
// that run on label, with their keys.
func numberedJobs(prefix string, n int, label string) ([]string, []wfJob) {
	keys := make([]string, n)
	wf := make([]wfJob, n)
	for i := range n {
		keys[i] = jobKey(prefix, fmt.Sprint(i))
		wf[i] = wfJob{key: keys[i], runsOn: []string{label}}
	}
	return keys, wf
}

// workflow renders a push-triggered workflow whose jobs run jobSteps.
func workflow(jobs ...wfJob) string {
	var sb strings.Builder
	sb.WriteString("name: e2e\non: [push]\njobs:\n")
	for _, j := range jobs {
		fmt.Fprintf(&sb, "  %s:\n    runs-on: [%s]\n", j.key, strings.Join(j.runsOn, ", "))
		if len(j.needs) > 0 {
			fmt.Fprintf(&sb, "    needs: [%s]\n", strings.Join(j.needs, ", "))
		}
		sb.WriteString(jobSteps(j.key))
	}
	return sb.String()
}

// holdDir is the bed's directory of hold files (set when the bed connects).
var holdDir string

// stepStarted is the file a job's step leaves when it starts (jobSteps).
func stepStarted(key string) string { return filepath.Join(holdDir, "started-"+key) }

// holdBound is how long a held step waits at most (in 0.2 s sleeps), so a
// runner whose test died ends by itself: the steered runner's old bound.
const holdBound = 15 * 60 * 5

// jobSteps are the steps of a workflow job with this key, run by Gitea's
// real runner on the host (the bed's runners offer host labels only: there is
// no Docker): the step first leaves the file stepStarted(key), so a test
// knows the runner really runs it (Gitea shows a job in_progress once it
// hands it out, before the runner has it); while the job's hold file exists
// (bed.hold) it waits, so a test sees the job in progress on its runner;
// then it echoes its key. A job's success in Gitea is the step's exit code.
func jobSteps(key string) string {
	if holdDir == "" {
		panic("jobSteps before the bed is connected")
	}
	hold := filepath.Join(holdDir, "name-"+key)
	return fmt.Sprintf("    steps:\n      - run: |\n"+
		"          touch '%s'\n"+
		"          i=0; while [ -e '%s' ] && [ $i -lt %d ]; do sleep 0.2; i=$((i+1)); done\n"+
		"          echo %s\n", stepStarted(key), hold, holdBound, key)
}

// repoJobs lists the repository's jobs as the admin.
func (g *giteaAPI) repoJobs(ctx context.Context, r giteasetup.Repo) ([]giteasetup.Job, error) {
	return g.admin.RepoJobs(ctx, r)
}

// waitJobs returns the repository's jobs by workflow job key, once all n
// of them exist.
func (g *giteaAPI) waitJobs(ctx context.Context, t *testing.T, r giteasetup.Repo, n int) map[string]giteasetup.Job {
	t.Helper()
	var out map[string]giteasetup.Job
	waitUntil(ctx, t, stepWait, fmt.Sprintf("%d Gitea jobs in %s", n, r), nil, func(ctx context.Context) (bool, string, error) {
		jobs, err := g.repoJobs(ctx, r)
		if err != nil {
			return false, err.Error(), nil
		}
		out = map[string]giteasetup.Job{}
		for _, j := range jobs {
			out[j.Name] = j
		}
		return len(out) >= n, fmt.Sprintf("%d jobs: %s", len(jobs), describeGiteaJobs(jobs)), nil
	})
	return out
}

func describeGiteaJobs(jobs []giteasetup.Job) string {
	var parts []string
	for _, j := range jobs {
		parts = append(parts, fmt.Sprintf("%s#%d=%s(runner %q)", j.Name, j.ID, j.State(), j.RunnerName))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// jobsLine reads the repositories' jobs for a failure message.
func (g *giteaAPI) jobsLine(repos ...giteasetup.Repo) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var sb strings.Builder
	for _, r := range repos {
		jobs, err := g.repoJobs(ctx, r)
		if err != nil {
			fmt.Fprintf(&sb, "Gitea %s: %v\n", r, err)
			continue
		}
		fmt.Fprintf(&sb, "Gitea %s: %s\n", r, describeGiteaJobs(jobs))
	}
	return sb.String()
}

// scopeFixture is a Gitea scope made ready for a RunnerGroup: where its
// workflow goes, who pushes it, and the tokens its group needs.
type scopeFixture struct {
	spec     v1alpha1.RunnerGroupSpec
	repo     giteasetup.Repo
	pushAs   *giteasetup.Client
	regToken string
	apiToken string
}

// newOrgScope makes an organisation with one repository; the group's API
// token is the admin's.
func (b *bed) newOrgScope(ctx context.Context, t *testing.T, org string) scopeFixture {
	t.Helper()
	g := b.gitea
	g.createOrg(ctx, t, org)
	r := g.createOrgRepo(ctx, t, org, "app")
	return scopeFixture{
		spec:     v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeOrg, Org: org},
		repo:     r,
		pushAs:   g.admin,
		regToken: g.registrationToken(ctx, t, g.admin, giteasetup.OrgRunners(org)),
		apiToken: g.adminToken,
	}
}

// newUserScope makes a user with one repository, as a team would have
// them: the user's own token to work with (repositories, its runner
// registration token) pushes, and a token of scalerScopes is the group's
// API token.
func (b *bed) newUserScope(ctx context.Context, t *testing.T, user string, scalerScopes ...string) scopeFixture {
	t.Helper()
	g := b.gitea
	pass := g.createUser(ctx, t, user)
	owner := g.admin.WithToken(g.userToken(ctx, t, user, pass, "setup", "write:repository", "write:user"))
	return scopeFixture{
		spec:     v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeUser, User: user},
		repo:     g.createUserRepo(ctx, t, owner, "app"),
		pushAs:   owner,
		regToken: g.registrationToken(ctx, t, owner, giteasetup.UserRunners()),
		apiToken: g.userToken(ctx, t, user, pass, "scaler", scalerScopes...),
	}
}

// orgRunners lists the org's runners registered in Gitea, by name.
func (b *bed) orgRunners(ctx context.Context, t *testing.T, org string) map[string]gitea.Runner {
	t.Helper()
	c, err := gitea.NewClient(b.gitea.admin.URL(), b.gitea.adminToken, gitea.Options{})
	require.NoError(t, err)
	list, err := c.(gitea.Runners).ListRunners(ctx, gitea.Target{Scope: gitea.ScopeOrg, Owner: org})
	require.NoError(t, err)
	out := map[string]gitea.Runner{}
	for _, r := range list {
		out[r.Name] = r
	}
	return out
}

// giteaJob is one job of the repository as the admin lists it.
func (b *bed) giteaJob(ctx context.Context, r giteasetup.Repo, id int64) (giteasetup.Job, error) {
	jobs, err := b.gitea.repoJobs(ctx, r)
	if err != nil {
		return giteasetup.Job{}, err
	}
	for _, j := range jobs {
		if j.ID == id {
			return j, nil
		}
	}
	return giteasetup.Job{}, fmt.Errorf("job %d not listed", id)
}

// pushJobs is shorthand: create the workflow's hold files (for keys in
// held) and push it.
func pushJobs(ctx context.Context, t *testing.T, b *bed, fx scopeFixture, file string, held []string, jobs ...wfJob) {
	t.Helper()
	for _, k := range held {
		b.hold(t, k)
	}
	b.gitea.pushWorkflow(ctx, t, fx.pushAs, fx.repo, file, workflow(jobs...))
}
