//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// ---------------------------------------------------------------- Gitea

// giteaAPI is a small REST client for the test bed's Gitea. It speaks plain
// net/http: the tests need setup calls (users, tokens, contents) as much as
// listings, and every error must be redacted before it is shown.
type giteaAPI struct {
	url        string
	adminToken string
	hc         *http.Client
}

// cred authenticates a call: a token, or basic auth (only to mint tokens).
type cred struct {
	token      string
	user, pass string
}

func (g *giteaAPI) admin() cred { return cred{token: g.adminToken} }

func (g *giteaAPI) call(ctx context.Context, c cred, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.url+"/api/v1"+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	switch {
	case c.token != "":
		req.Header.Set("Authorization", "token "+c.token)
	case c.user != "":
		req.SetBasicAuth(c.user, c.pass)
	}
	resp, err := g.hc.Do(req)
	if err != nil {
		return fmt.Errorf("gitea %s %s: %s", method, path, redact(err.Error()))
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("gitea %s %s: %s: %s", method, path, resp.Status, redact(tail(string(raw), 5)))
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("gitea %s %s: decode: %v", method, path, err)
		}
	}
	return nil
}

// repoRef names a Gitea repository.
type repoRef struct{ owner, name string }

func (r repoRef) String() string { return r.owner + "/" + r.name }

// createOrg creates an organisation and deletes it when the test ends, so
// that organisations do not pile up on the bed. Its repositories go first:
// they are created after it, and cleanups run in reverse order.
func (g *giteaAPI) createOrg(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	require.NoError(t, g.call(ctx, g.admin(), http.MethodPost, "/orgs", map[string]any{"username": name, "visibility": "public"}, nil))
	t.Cleanup(func() {
		if keep() {
			return
		}
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := g.call(ctx, g.admin(), http.MethodDelete, "/orgs/"+url.PathEscape(name), nil, nil); err != nil {
			t.Logf("deleting Gitea org %s: %v", name, err)
		}
	})
	return name
}

// createRepo creates a repository with a main branch, as the admin in an
// organisation (path /orgs/{org}/repos) or as a user (/user/repos), and
// deletes it when the test ends so that jobs left queued do not pile up in
// the instance-wide listings.
func (g *giteaAPI) createRepo(ctx context.Context, t *testing.T, c cred, path string, owner, name string) repoRef {
	t.Helper()
	require.NoError(t, g.call(ctx, c, http.MethodPost, path, map[string]any{"name": name, "auto_init": true, "default_branch": "main"}, nil))
	r := repoRef{owner: owner, name: name}
	t.Cleanup(func() {
		if keep() {
			return
		}
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := g.call(ctx, g.admin(), http.MethodDelete, "/repos/"+r.String(), nil, nil); err != nil {
			t.Logf("deleting repository %s: %v", r, err)
		}
	})
	return r
}

func (g *giteaAPI) createOrgRepo(ctx context.Context, t *testing.T, org, name string) repoRef {
	return g.createRepo(ctx, t, g.admin(), "/orgs/"+url.PathEscape(org)+"/repos", org, name)
}

// createUser creates a user with the admin API and returns its password.
func (g *giteaAPI) createUser(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	var b [12]byte
	_, _ = rand.Read(b[:])
	pass := "Pw-" + base64.RawURLEncoding.EncodeToString(b[:])
	secrets.add(pass)
	require.NoError(t, g.call(ctx, g.admin(), http.MethodPost, "/admin/users", map[string]any{
		"username": name, "email": name + "@e2e.invalid", "password": pass, "must_change_password": false,
	}, nil))
	return pass
}

// userToken mints an access token for a user with basic auth, as the user
// would in the web UI.
func (g *giteaAPI) userToken(ctx context.Context, t *testing.T, user, pass, name string, scopes ...string) string {
	t.Helper()
	var out struct {
		SHA1 string `json:"sha1"`
	}
	require.NoError(t, g.call(ctx, cred{user: user, pass: pass}, http.MethodPost, "/users/"+url.PathEscape(user)+"/tokens",
		map[string]any{"name": name, "scopes": scopes}, &out))
	require.NotEmpty(t, out.SHA1, "token of %s", user)
	secrets.add(out.SHA1)
	return out.SHA1
}

// registrationToken mints (or returns the current) runner registration
// token at a scope's path, e.g. /orgs/acme/actions/runners/registration-token.
func (g *giteaAPI) registrationToken(ctx context.Context, t *testing.T, c cred, path string) string {
	t.Helper()
	var out struct {
		Token string `json:"token"`
	}
	require.NoError(t, g.call(ctx, c, http.MethodPost, path, nil, &out))
	require.NotEmpty(t, out.Token, "registration token from %s", path)
	secrets.add(out.Token)
	return out.Token
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

// workflow renders a push-triggered workflow whose jobs run one echo step.
func workflow(jobs ...wfJob) string {
	var sb strings.Builder
	sb.WriteString("name: e2e\non: [push]\njobs:\n")
	for _, j := range jobs {
		fmt.Fprintf(&sb, "  %s:\n    runs-on: [%s]\n", j.key, strings.Join(j.runsOn, ", "))
		if len(j.needs) > 0 {
			fmt.Fprintf(&sb, "    needs: [%s]\n", strings.Join(j.needs, ", "))
		}
		fmt.Fprintf(&sb, "    steps:\n      - run: echo %s\n", j.key)
	}
	return sb.String()
}

// pushWorkflow commits .gitea/workflows/<file> to main, which triggers it.
func (g *giteaAPI) pushWorkflow(ctx context.Context, t *testing.T, c cred, r repoRef, file, content string) {
	t.Helper()
	require.NoError(t, g.call(ctx, c, http.MethodPost, "/repos/"+r.String()+"/contents/.gitea/workflows/"+file, map[string]any{
		"content": base64.StdEncoding.EncodeToString([]byte(content)),
		"message": "e2e: add " + file,
		"branch":  "main",
	}, nil))
}

// giteaJob is a job as Gitea's Actions API reports it.
type giteaJob struct {
	ID          int64     `json:"id"`
	RunID       int64     `json:"run_id"`
	Name        string    `json:"name"`
	Labels      []string  `json:"labels"`
	Status      string    `json:"status"`
	Conclusion  string    `json:"conclusion"`
	RunnerName  string    `json:"runner_name"`
	CompletedAt time.Time `json:"completed_at"`
}

// state is "queued", "waiting", "in_progress" or "completed/<conclusion>".
func (j giteaJob) state() string {
	if j.Status == "completed" {
		return "completed/" + j.Conclusion
	}
	return j.Status
}

func (g *giteaAPI) repoJobs(ctx context.Context, r repoRef) ([]giteaJob, error) {
	var all []giteaJob
	for page := 1; ; page++ {
		var out struct {
			Jobs []giteaJob `json:"jobs"`
		}
		if err := g.call(ctx, g.admin(), http.MethodGet, fmt.Sprintf("/repos/%s/actions/jobs?limit=50&page=%d", r, page), nil, &out); err != nil {
			return nil, err
		}
		all = append(all, out.Jobs...)
		if len(out.Jobs) < 50 {
			return all, nil
		}
	}
}

// waitJobs returns the repository's jobs by workflow job key, once all n
// of them exist.
func (g *giteaAPI) waitJobs(ctx context.Context, t *testing.T, r repoRef, n int) map[string]giteaJob {
	t.Helper()
	var out map[string]giteaJob
	waitUntil(ctx, t, stepWait, fmt.Sprintf("%d Gitea jobs in %s", n, r), nil, func(ctx context.Context) (bool, string, error) {
		jobs, err := g.repoJobs(ctx, r)
		if err != nil {
			return false, err.Error(), nil
		}
		out = map[string]giteaJob{}
		for _, j := range jobs {
			out[j.Name] = j
		}
		return len(out) >= n, fmt.Sprintf("%d jobs: %s", len(jobs), describeGiteaJobs(jobs)), nil
	})
	return out
}

func describeGiteaJobs(jobs []giteaJob) string {
	var parts []string
	for _, j := range jobs {
		parts = append(parts, fmt.Sprintf("%s#%d=%s(runner %q)", j.Name, j.ID, j.state(), j.RunnerName))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// jobsLine reads the repositories' jobs for a failure message.
func (g *giteaAPI) jobsLine(repos ...repoRef) string {
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

// ---------------------------------------------------------------- scope setup

// scopeFixture is a Gitea scope made ready for a RunnerGroup: where its
// workflow goes and the tokens its group needs.
type scopeFixture struct {
	spec     v1alpha1.RunnerGroupSpec
	repo     repoRef
	pushAs   cred
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
		pushAs:   g.admin(),
		regToken: g.registrationToken(ctx, t, g.admin(), "/orgs/"+org+"/actions/runners/registration-token"),
		apiToken: g.adminToken,
	}
}
