package gitea

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
)

// Distinctive tokens, so a test can prove they never leak into error text.
const (
	adminToken = "adm1n-TOKEN-MUST-NOT-LEAK-7f3c9d2e"
	aliceToken = "al1ce-TOKEN-MUST-NOT-LEAK-b41e08aa"
	badToken   = "bad-TOKEN-MUST-NOT-LEAK-0000dead"
)

// testTimeout bounds each request of tests that expect success; loopback
// answers in well under a millisecond.
const testTimeout = 2 * time.Second

// fixtureScene is the scene the recordings in testdata were made in, on a
// real Gitea 1.26 with its origin rewritten to http://gitea.test:3000 (each
// file holds one request and its answer, with a note on what it shows): org
// acme with repo app (job 1 done, jobs 2-4 queued) and user alice with repo
// tool (job 5 queued, job 6 blocked on it).
func fixtureScene() giteatest.Scene {
	return giteatest.Scene{
		Orgs:  []giteatest.Org{{Name: "acme"}},
		Users: []string{"root", "alice"},
		Repos: []giteatest.Repo{{Owner: "acme", Name: "app"}, {Owner: "alice", Name: "tool"}},
		Jobs: []giteatest.Job{
			{ID: 1, Owner: "acme", Repo: "app", RunID: 1, Name: "build", Labels: []string{"ubuntu-latest"},
				Status: giteatest.StatusCompleted, Conclusion: "success", RunnerID: 2, RunnerName: "rg-ci-xyz34", RunAttempt: 1},
			{ID: 2, Owner: "acme", Repo: "app", RunID: 1, Name: "gpu", Labels: []string{"self-hosted", "gpu"}, Status: giteatest.StatusQueued},
			{ID: 3, Owner: "acme", Repo: "app", RunID: 1, Name: "matrix (linux-arm64)", Labels: []string{"linux-arm64"}, Status: giteatest.StatusQueued},
			{ID: 4, Owner: "acme", Repo: "app", RunID: 1, Name: "matrix (ubuntu-22.04)", Labels: []string{"ubuntu-22.04"}, Status: giteatest.StatusQueued},
			{ID: 5, Owner: "alice", Repo: "tool", RunID: 2, Name: "lint", Labels: []string{"ubuntu-latest"}, Status: giteatest.StatusQueued},
			{ID: 6, Owner: "alice", Repo: "tool", RunID: 2, Name: "deploy", Labels: []string{"ubuntu-latest", "deploy"}, Status: giteatest.StatusBlocked},
		},
	}
}

// newFake starts a fake Gitea with the given scene, an admin token for root
// and a user token for alice, answering as the release this run of the
// package's tests is for (TestMain).
func newFake(t *testing.T, scene giteatest.Scene) *giteatest.Server {
	t.Helper()
	return newFakeAs(t, fakeVersion, scene)
}

// newFakeAs is newFake answering as the given release, for the tests that
// hold for one release only (the recordings are 1.26's).
func newFakeAs(t *testing.T, v giteatest.Version, scene giteatest.Scene) *giteatest.Server {
	t.Helper()
	t.Logf("the fake answers as Gitea %s", v)
	f := giteatest.New()
	require.NoError(t, f.AnswerAs(v))
	t.Cleanup(f.Close)
	f.AddToken(adminToken, "root", true)
	f.AddToken(aliceToken, "alice", false)
	require.NoError(t, f.Load(scene))
	return f
}

func newTestClient(t *testing.T, baseURL, token string, opts Options) Client {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = testTimeout
	}
	c, err := NewClient(baseURL, token, opts)
	require.NoError(t, err)
	return c
}

func ids(jobs []Job) []int64 {
	out := []int64{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

// faultCount is how many requests a test that wants the first listings to
// fail with f injects it into: a 500 into every request, as a broken Gitea
// answers, since one failing page of 500 is read around (readaround.go).
func faultCount(f giteatest.Fault) int {
	if f.Status == http.StatusInternalServerError {
		return 1000
	}
	return maxConcurrentListings
}
