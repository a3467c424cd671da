//go:build e2e

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
)

// A run queued just as its repository is deleted leaves jobs whose
// repository is gone, and real Gitea then answers 500 for every instance
// listing page that holds one (an org's listing keeps to the org's
// existing repositories and leaves it out). The test makes such a job the
// way Gitea's race leaves it, by pointing a queued run's rows at a
// repository ID that does not exist in Gitea's own database, proves the
// 500, and holds an instance-wide group (with a label of its own, so it
// serves no other test's jobs) to serving the other job all the same.
func TestFaultGiteaJobWhoseRepositoryIsGoneStrandsNoOtherJob(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 5*time.Minute)

	fx := b.NewOrgScope(ctx, t, e2e.Uniq("e2e-fault-gone"))
	label := e2e.Uniq("e2e-gone")
	healthy := b.QueueJobs(ctx, t, fx, "healthy.yml", map[string]int{label: 1})[label]
	goneFx := fx
	goneFx.Repo = b.Gitea.CreateOrgRepo(ctx, t, fx.Spec.Org, "gone")
	b.QueueJobs(ctx, t, goneFx, "gone.yml", map[string]int{label: 1})

	db := filepath.Join(b.Dir, "gitea", "data", "gitea.db")
	repoID := sqlite(ctx, t, db, fmt.Sprintf(
		"SELECT r.id FROM repository r JOIN \"user\" u ON u.id = r.owner_id WHERE u.lower_name = '%s' AND r.lower_name = 'gone';",
		strings.ToLower(goneFx.Repo.Owner)))
	require.NotEmpty(t, repoID)
	const missing = "999999999"
	repoize := func(from, to string) string {
		return fmt.Sprintf("UPDATE action_run_job SET repo_id = %s WHERE repo_id = %s; UPDATE action_run SET repo_id = %s WHERE repo_id = %s;",
			to, from, to, from)
	}
	sqlite(ctx, t, db, repoize(repoID, missing))
	t.Cleanup(func() {
		// Back to its repository, so deleting the repository deletes it and
		// no later listing meets it.
		ctx, cancel := e2e.CleanupContext()
		defer cancel()
		sqlite(ctx, t, db, repoize(missing, repoID))
	})
	requireInstanceListing500(ctx, t, b)

	ns := b.QuietNamespace(ctx, t, "e2e-fault-gone")
	global := fx
	global.Spec = v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeGlobal}
	global.RegToken = b.Gitea.RegistrationToken(ctx, t, b.Gitea.Admin, giteasetup.GlobalRunners())
	b.FaultGroup(ctx, t, ns, "instance", global, b.Gitea.Admin.URL(), 5, label)
	pass := b.Pass(ctx, t, e2e.PassOpts{Namespaces: []string{ns}})
	e2e.RequireSanePass(t, pass, "pass over the instance with a job whose repository is gone")
	require.Equal(t, 0, pass.Exit, e2e.Redact(e2e.Tail(pass.Log, 30)))
	// Other tests' jobs leave the instance listing while a pass pages
	// through it (by offset), and can shift the healthy job onto a page
	// already read: that pass misses it and the next serves it. A listing
	// that fails strands it for every pass.
	for i := 0; i < 3; i++ {
		if by, _ := b.RunnersPerJob(ctx, t, ns, "instance"); len(by[healthy[0]]) > 0 {
			break
		}
		pass = b.Pass(ctx, t, e2e.PassOpts{Namespaces: []string{ns}})
		e2e.RequireSanePass(t, pass, "another pass over the instance")
	}
	b.RequireOneRunnerEach(ctx, t, ns, "instance", healthy, "the job beside the one whose repository is gone")
	b.RequireReady(ctx, t, ns, "instance", "a listing that left one job out")
	// The instance-wide listing holds every other test's jobs too, and
	// they move between the pieces a pass reads around the failed page:
	// a pass can then read past the broken job without meeting it. A pass
	// over a listing that holds still says which scope left it out.
	const warning = "Gitea could not list some jobs of the scope"
	for i := 0; i < 3 && !strings.Contains(pass.Log, warning); i++ {
		pass = b.Pass(ctx, t, e2e.PassOpts{Namespaces: []string{ns}})
		e2e.RequireSanePass(t, pass, "another pass over the instance")
	}
	require.Contains(t, pass.Log, warning, "the pass says which scope left a job out")
}

// requireInstanceListing500 proves the premise on the real Gitea: its
// instance-wide listing fails, in words the scaler tells apart from a
// Gitea that fails everything. Gitea lists jobs oldest first, 30 a page,
// and the shared bed holds every other test's queued jobs, so the page
// that fails is whichever holds the broken job: the proof reads every
// page, and reads them again while other tests' jobs move the pages.
func requireInstanceListing500(ctx context.Context, t *testing.T, b *e2e.Testbed) {
	t.Helper()
	e2e.Eventually(ctx, t, "a page of Gitea's instance listing answers 500", func(ctx context.Context) (bool, error) {
		for page := 1; ; page++ {
			status, message, entries, err := instanceListingPage(ctx, b, page)
			if err != nil {
				return false, err
			}
			if status == http.StatusInternalServerError {
				require.True(t, gitea.JobWithoutRepository(message), "Gitea's 500 names the job whose repository is gone: %q", message)
				return true, nil
			}
			if status != http.StatusOK {
				return false, fmt.Errorf("page %d: HTTP %d: %s", page, status, message)
			}
			if entries < instanceListingPageSize {
				return false, nil
			}
		}
	})
}

const instanceListingPageSize = 50

func instanceListingPage(ctx context.Context, b *e2e.Testbed, page int) (status int, message string, entries int, err error) {
	url := fmt.Sprintf("%s/api/v1/admin/actions/jobs?status=queued&limit=%d&page=%d", e2e.GiteaURL, instanceListingPageSize, page)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", 0, err
	}
	req.Header.Set("Authorization", "token "+b.Gitea.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Message string
		Jobs    []json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return resp.StatusCode, "", 0, fmt.Errorf("page %d: HTTP %d: %w", page, resp.StatusCode, err)
	}
	return resp.StatusCode, body.Message, len(body.Jobs), nil
}

// sqlite runs SQL on Gitea's database while Gitea runs (it keeps it in WAL
// mode, so a second writer waits its turn).
func sqlite(ctx context.Context, t *testing.T, db, sql string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, "sqlite3", "-cmd", ".timeout 10000", db, sql).CombinedOutput()
	require.NoError(t, err, "sqlite3 %s: %s", sql, out)
	return strings.TrimSpace(string(out))
}
