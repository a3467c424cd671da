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
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// GiteaAPI fits giteasetup's client to tests: a failed call fails the test
// with its error redacted, what a test creates goes when the test ends, and
// every secret a call returns is registered for redaction.
type GiteaAPI struct {
	// Admin holds the test bed's admin token.
	Admin      *giteasetup.Client
	AdminToken string
}

func newGiteaAPI(url, adminToken string) *GiteaAPI {
	Secrets.Add(adminToken)
	return &GiteaAPI{Admin: giteasetup.New(url, adminToken, nil), AdminToken: adminToken}
}

// MustGitea fails the test if a Gitea call failed.
func MustGitea(t *testing.T, err error, what string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %s", fmt.Sprintf(what, args...), Redact(err.Error()))
	}
}

// afterTest runs a Gitea cleanup when the test ends, unless E2E_KEEP asks to
// keep what the test made; a failure is logged, since the bed goes on.
func afterTest(t *testing.T, what string, cleanup func(ctx context.Context) error) {
	t.Cleanup(func() {
		if Keep() {
			return
		}
		ctx, cancel := CleanupContext()
		defer cancel()
		if err := cleanup(ctx); err != nil {
			t.Logf("%s: %s", what, Redact(err.Error()))
		}
	})
}

// CreateOrg creates an organisation and deletes it when the test ends, so
// that organisations do not pile up on the bed. Its repositories go first:
// they are created after it, and cleanups run in reverse order.
func (g *GiteaAPI) CreateOrg(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	MustGitea(t, g.Admin.CreateOrg(ctx, name), "create Gitea org %s", name)
	afterTest(t, "deleting Gitea org "+name, func(ctx context.Context) error { return g.Admin.DeleteOrg(ctx, name) })
	return name
}

// CreateOrgRepo creates a repository with a main branch in an organisation,
// as the admin, and deletes it when the test ends so that jobs left queued
// do not pile up in the instance-wide listings.
func (g *GiteaAPI) CreateOrgRepo(ctx context.Context, t *testing.T, org, name string) giteasetup.Repo {
	t.Helper()
	r, err := g.Admin.CreateOrgRepo(ctx, org, name)
	MustGitea(t, err, "create repository %s/%s", org, name)
	g.deleteAfterTest(t, r)
	return r
}

// CreateUserRepo creates a repository with a main branch as the user whose
// token owner holds, and deletes it (as the admin) when the test ends.
func (g *GiteaAPI) CreateUserRepo(ctx context.Context, t *testing.T, owner *giteasetup.Client, name string) giteasetup.Repo {
	t.Helper()
	r, err := owner.CreateUserRepo(ctx, name)
	MustGitea(t, err, "create the user's repository %s", name)
	g.deleteAfterTest(t, r)
	return r
}

func (g *GiteaAPI) deleteAfterTest(t *testing.T, r giteasetup.Repo) {
	afterTest(t, "deleting repository "+r.String(), func(ctx context.Context) error { return g.Admin.DeleteRepo(ctx, r) })
}

// CreateUser creates a user with the admin API and returns its password.
func (g *GiteaAPI) CreateUser(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	var b [12]byte
	_, _ = rand.Read(b[:])
	pass := "Pw-" + base64.RawURLEncoding.EncodeToString(b[:])
	Secrets.Add(pass)
	MustGitea(t, g.Admin.CreateUser(ctx, name, name+"@e2e.invalid", pass), "create Gitea user %s", name)
	return pass
}

// UserToken mints an access token for a user with basic auth, as the user
// would in the web UI.
func (g *GiteaAPI) UserToken(ctx context.Context, t *testing.T, user, pass, name string, scopes ...string) string {
	t.Helper()
	token, err := g.Admin.WithPassword(user, pass).CreateToken(ctx, user, name, scopes...)
	MustGitea(t, err, "token %s of %s", name, user)
	Secrets.Add(token)
	return token
}

// RegistrationToken mints (or returns the current) runner registration
// token of a scope, asking as c.
func (g *GiteaAPI) RegistrationToken(ctx context.Context, t *testing.T, c *giteasetup.Client, scope giteasetup.Runners) string {
	t.Helper()
	token, err := c.RegistrationToken(ctx, scope)
	MustGitea(t, err, "runner registration token")
	Secrets.Add(token)
	return token
}

// PushWorkflow commits .gitea/workflows/<file> to main as c, which triggers
// it.
func (g *GiteaAPI) PushWorkflow(ctx context.Context, t *testing.T, c *giteasetup.Client, r giteasetup.Repo, file, content string) {
	t.Helper()
	MustGitea(t, c.PushWorkflow(ctx, r, file, []byte(content)), "push workflow %s to %s", file, r)
}

// WfJob is one job of a workflow.
type WfJob struct {
	Key    string
	RunsOn []string
	Needs  []string
}

// NumberedJobs is n independent workflow jobs keyed prefix-0, prefix-1, …
// that run on label, with their keys.
func NumberedJobs(prefix string, n int, label string) ([]string, []WfJob) {
	keys := make([]string, n)
	wf := make([]WfJob, n)
	for i := range n {
		keys[i] = JobKey(prefix, fmt.Sprint(i))
		wf[i] = WfJob{Key: keys[i], RunsOn: []string{label}}
	}
	return keys, wf
}

// Workflow renders a push-triggered workflow whose jobs run jobSteps.
func Workflow(jobs ...WfJob) string {
	var sb strings.Builder
	sb.WriteString("name: e2e\non: [push]\njobs:\n")
	for _, j := range jobs {
		fmt.Fprintf(&sb, "  %s:\n    runs-on: [%s]\n", j.Key, strings.Join(j.RunsOn, ", "))
		if len(j.Needs) > 0 {
			fmt.Fprintf(&sb, "    needs: [%s]\n", strings.Join(j.Needs, ", "))
		}
		sb.WriteString(JobSteps(j.Key))
	}
	return sb.String()
}

// HoldDir is the bed's directory of hold files (set when the bed connects).
var HoldDir string

// StepStarted is the file a job's step leaves when it starts (jobSteps).
func StepStarted(key string) string { return filepath.Join(HoldDir, "started-"+key) }

// holdBound is how long a held step waits at most (in 0.2 s sleeps), so a
// runner whose test died ends by itself: the steered runner's old bound.
const holdBound = 15 * 60 * 5

// JobSteps are the steps of a workflow job with this key, run by Gitea's
// real runner on the host (the bed's runners offer host labels only: there is
// no Docker): the step first leaves the file stepStarted(key), so a test
// knows the runner really runs it (Gitea shows a job in_progress once it
// hands it out, before the runner has it); while the job's hold file exists
// (bed.hold) it waits, so a test sees the job in progress on its runner;
// then it echoes its key. A job's success in Gitea is the step's exit code.
func JobSteps(key string) string {
	if HoldDir == "" {
		panic("jobSteps before the bed is connected")
	}
	hold := filepath.Join(HoldDir, "name-"+key)
	return fmt.Sprintf("    steps:\n      - run: |\n"+
		"          touch '%s'\n"+
		"          i=0; while [ -e '%s' ] && [ $i -lt %d ]; do sleep 0.2; i=$((i+1)); done\n"+
		"          echo %s\n", StepStarted(key), hold, holdBound, key)
}

// RepoJobs lists the repository's jobs as the admin.
func (g *GiteaAPI) RepoJobs(ctx context.Context, r giteasetup.Repo) ([]giteasetup.Job, error) {
	return g.Admin.RepoJobs(ctx, r)
}

// WaitJobs returns the repository's jobs by workflow job key, once all n
// of them exist.
func (g *GiteaAPI) WaitJobs(ctx context.Context, t *testing.T, r giteasetup.Repo, n int) map[string]giteasetup.Job {
	t.Helper()
	var out map[string]giteasetup.Job
	WaitUntil(ctx, t, StepWait, fmt.Sprintf("%d Gitea jobs in %s", n, r), nil, func(ctx context.Context) (bool, string, error) {
		jobs, err := g.RepoJobs(ctx, r)
		if err != nil {
			return false, err.Error(), nil
		}
		out = map[string]giteasetup.Job{}
		for _, j := range jobs {
			out[j.Name] = j
		}
		return len(out) >= n, fmt.Sprintf("%d jobs: %s", len(jobs), DescribeGiteaJobs(jobs)), nil
	})
	return out
}

func DescribeGiteaJobs(jobs []giteasetup.Job) string {
	var parts []string
	for _, j := range jobs {
		parts = append(parts, fmt.Sprintf("%s#%d=%s(runner %q)", j.Name, j.ID, j.State(), j.RunnerName))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// JobsLine reads the repositories' jobs for a failure message.
func (g *GiteaAPI) JobsLine(repos ...giteasetup.Repo) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var sb strings.Builder
	for _, r := range repos {
		jobs, err := g.RepoJobs(ctx, r)
		if err != nil {
			fmt.Fprintf(&sb, "Gitea %s: %v\n", r, err)
			continue
		}
		fmt.Fprintf(&sb, "Gitea %s: %s\n", r, DescribeGiteaJobs(jobs))
	}
	return sb.String()
}

// ScopeFixture is a Gitea scope made ready for a RunnerGroup: where its
// workflow goes, who pushes it, and the tokens its group needs.
type ScopeFixture struct {
	Spec     v1alpha1.RunnerGroupSpec
	Repo     giteasetup.Repo
	PushAs   *giteasetup.Client
	RegToken string
	APIToken string
}

// NewOrgScope makes an organisation with one repository; the group's API
// token is the admin's.
func (b *Testbed) NewOrgScope(ctx context.Context, t *testing.T, org string) ScopeFixture {
	t.Helper()
	g := b.Gitea
	g.CreateOrg(ctx, t, org)
	r := g.CreateOrgRepo(ctx, t, org, "app")
	return ScopeFixture{
		Spec:     v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeOrg, Org: org},
		Repo:     r,
		PushAs:   g.Admin,
		RegToken: g.RegistrationToken(ctx, t, g.Admin, giteasetup.OrgRunners(org)),
		APIToken: g.AdminToken,
	}
}

// NewUserScope makes a user with one repository, as a team would have
// them: the user's own token to work with (repositories, its runner
// registration token) pushes, and a token of scalerScopes is the group's
// API token.
func (b *Testbed) NewUserScope(ctx context.Context, t *testing.T, user string, scalerScopes ...string) ScopeFixture {
	t.Helper()
	g := b.Gitea
	pass := g.CreateUser(ctx, t, user)
	owner := g.Admin.WithToken(g.UserToken(ctx, t, user, pass, "setup", "write:repository", "write:user"))
	return ScopeFixture{
		Spec:     v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeUser, User: user},
		Repo:     g.CreateUserRepo(ctx, t, owner, "app"),
		PushAs:   owner,
		RegToken: g.RegistrationToken(ctx, t, owner, giteasetup.UserRunners()),
		APIToken: g.UserToken(ctx, t, user, pass, "scaler", scalerScopes...),
	}
}

// OrgRunners lists the org's runners registered in Gitea, by name.
func (b *Testbed) OrgRunners(ctx context.Context, t *testing.T, org string) map[string]gitea.Runner {
	t.Helper()
	c, err := gitea.NewClient(b.Gitea.Admin.URL(), b.Gitea.AdminToken, gitea.Options{})
	require.NoError(t, err)
	list, err := c.(gitea.Runners).ListRunners(ctx, scope.New("", gitea.ScopeOrg, org, ""))
	require.NoError(t, err)
	out := map[string]gitea.Runner{}
	for _, r := range list {
		out[r.Name] = r
	}
	return out
}

// GiteaJob is one job of the repository as the admin lists it.
func (b *Testbed) GiteaJob(ctx context.Context, r giteasetup.Repo, id int64) (giteasetup.Job, error) {
	jobs, err := b.Gitea.RepoJobs(ctx, r)
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

// PushJobs is shorthand: create the workflow's hold files (for keys in
// held) and push it.
func PushJobs(ctx context.Context, t *testing.T, b *Testbed, fx ScopeFixture, file string, held []string, jobs ...WfJob) {
	t.Helper()
	for _, k := range held {
		b.Hold(t, k)
	}
	b.Gitea.PushWorkflow(ctx, t, fx.PushAs, fx.Repo, file, Workflow(jobs...))
}
