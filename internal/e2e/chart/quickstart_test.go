//go:build e2e

// The README's quick start, run as written on the bed.

package chart

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
)

// The quick start's own names: the test makes nothing else, so it can
// remove what an interrupted run left before it starts.
const (
	qsRelease   = "gro"
	qsSystemNS  = "gitea-runners"
	qsOrg       = "acme"
	qsRepo      = "app"
	qsReadmeURL = "https://gitea.example.com"
	// qsReadmeJobURL is the job the README's `why` names, an example.
	qsReadmeJobURL = qsReadmeURL + "/acme/app/actions/runs/12/jobs/34"
	qsBegin        = "<!-- quickstart:begin -->"
	qsEnd          = "<!-- quickstart:end -->"
	// qsListenerUp is the block after which a pass serves the pushed job.
	qsListenerUp = "rollout status deployment/"
	// qsReadmeInstallEnd ends the README's helm install.
	qsReadmeInstallEnd = `--set-json 'tenantNamespaces=[{"name":"team-a","grantGiteaURLs":["https://gitea.example.com"],"grantRepositories":["acme"]}]'`
)

var qsNamespaces = []string{"team-a", "team-b", qsSystemNS}

// shBlock matches a ```sh block, indented as in a list item; group 1 is its
// indent, group 2 its body.
var shBlock = regexp.MustCompile("(?ms)^([ \t]*)```sh\n(.*?)^[ \t]*```\n")

// quickStartBlocks returns the ```sh blocks between the README's quick-start
// markers, in order, with the list item's indent taken off each line (what
// a reader's copy gives).
func quickStartBlocks(readme string) ([]string, error) {
	_, rest, ok := strings.Cut(readme, qsBegin)
	if !ok {
		return nil, fmt.Errorf("README.md has no %s", qsBegin)
	}
	section, _, ok := strings.Cut(rest, qsEnd)
	if !ok {
		return nil, fmt.Errorf("README.md has no %s after %s", qsEnd, qsBegin)
	}
	var blocks []string
	for _, m := range shBlock.FindAllStringSubmatch(section, -1) {
		var lines []string
		for _, line := range strings.SplitAfter(m[2], "\n") {
			lines = append(lines, strings.TrimPrefix(line, m[1]))
		}
		blocks = append(blocks, strings.Join(lines, ""))
	}
	if len(blocks) == 0 {
		return nil, fmt.Errorf("no ```sh block between the quick-start markers")
	}
	return blocks, nil
}

// TestQuickStartAsWritten runs every shell block of the README's quick start
// (between its markers), in order, on the bed, as a user pastes them into a
// shell in a clone, and checks what each step promises.
//
// Substituted, because the bed is not the README's cluster, and nothing else:
//   - the example job URL of `why` becomes the URL Gitea gives the job the
//     test pushed (the README's is an example: run 12, job 34);
//   - https://gitea.example.com becomes the bed's Gitea URL;
//   - the helm install also sets scaler.defaultLabels={ubuntu-latest:host}:
//     the bed has no Docker, and the runner's default labels run
//     ubuntu-latest in Docker (its daemon refuses to start without it), so
//     the bed's runners run the job on their host, as the demo's do;
//   - API_TOKEN is exported as the bed's admin token, an owner of every
//     org (the README's reader exports their own).
//
// Not substituted: the image (the bed's agent plays any image whose
// repository ends in gitea-runner-scaler as bin/gitea-runner-scaler), the
// names, the flags, the webhook's URL. Gitea cannot reach a cluster's
// Service from the bed, so its deliveries fail there and the loop alone
// serves, the README's fallback. Step 5's prose "push a workflow" the test
// does through Gitea's API (org acme, repository app, runs-on:
// ubuntu-latest); after the block that waits for the listener it waits, as
// the README says, for the runner Job and for the job to be taken.
//
// The quick start's names are fixed, so the test is not parallel and first
// removes what an earlier, interrupted run left of them.
func TestQuickStartAsWritten(t *testing.T) {
	// Alone on the bed: the quick start installs as written, with its fixed
	// names and cluster-wide objects.
	e2e.Exclusive(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 8*time.Minute)
	raw, err := os.ReadFile(filepath.Join(b.Root, "README.md"))
	require.NoError(t, err)
	blocks, err := quickStartBlocks(string(raw))
	require.NoError(t, err)

	quickStartCleanup(b, t)
	t.Cleanup(func() {
		if !e2e.Keep() {
			quickStartCleanup(b, t)
		}
	})
	g := b.Gitea
	require.NoError(t, g.Admin.CreateOrg(ctx, qsOrg), "create Gitea org %s", qsOrg)
	repo, err := g.Admin.CreateOrgRepo(ctx, qsOrg, qsRepo)
	require.NoError(t, err)

	subst := []struct{ from, to string }{
		{qsReadmeJobURL, ""}, // filled in once the job exists
		// Before the URL's, whose text it holds.
		{qsReadmeInstallEnd, qsReadmeInstallEnd + " --set 'scaler.defaultLabels={ubuntu-latest:host}'"},
		{qsReadmeURL, e2e.GiteaURL},
	}
	// Each substitution must find its text, or the README changed and the
	// test no longer runs what it says it runs.
	for _, s := range subst {
		require.Contains(t, strings.Join(blocks, ""), s.from, "the quick start no longer has %q", s.from)
	}

	var job giteasetup.Job
	for i, block := range blocks {
		if strings.Contains(block, qsReadmeJobURL) {
			require.NotZero(t, job.ID, "block %d names a job before the test pushed one", i+1)
			subst[0].to = job.HTMLURL
		}
		for _, s := range subst {
			if s.to != "" {
				block = strings.ReplaceAll(block, s.from, s.to)
			}
		}
		out := quickStartShell(b, ctx, t, block)
		t.Logf("block %d:\n%s\n%s", i+1, block, out)

		switch {
		case strings.Contains(block, "helm install "+qsRelease):
			requireTenantBinding(b, ctx, t, "team-a")
			requireTenantNamespace(b, ctx, t, "team-a")
			// The workflow step 5 asks the reader to push.
			require.NoError(t, g.Admin.PushWorkflow(ctx, repo, "ci.yml",
				[]byte("on: [push]\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo hello\n")))
		case strings.Contains(block, qsListenerUp):
			job = quickStartWaitRunner(b, ctx, t, repo)
		case strings.Contains(block, " status -n team-a"):
			require.Contains(t, out, "team-a/acme", "status lists the group")
			require.Contains(t, out, "verdict:", "why gives its verdict")
			require.Contains(t, out, "missing: 0", "check-group finds nothing missing")
		case strings.Contains(block, `"name":"team-b"`):
			requireTenantBinding(b, ctx, t, "team-a")
			requireTenantBinding(b, ctx, t, "team-b")
			requireTenantNamespace(b, ctx, t, "team-b")
			values, err := b.Helm(ctx, "get", "values", qsRelease, "-n", qsSystemNS, "-o", "json")
			require.NoError(t, err, values)
			require.Contains(t, values, "ghcr.io/you/gitea-runner-scaler", "the upgrade kept the values set at install")
		}
	}
	require.NotZero(t, job.ID, "no block waited for the listener (%q)", qsListenerUp)
}

// quickStartShell runs one block in bash (-euo pipefail, as a careful
// reader's shell would stop at the first error) from the repository root,
// with the bed's kubeconfig, helm on PATH and API_TOKEN set, and fails the
// test when it fails.
func quickStartShell(b *e2e.Testbed, ctx context.Context, t *testing.T, block string) string {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "bash", "-euo", "pipefail", "-c", block)
	cmd.Dir = b.Root
	cmd.Env = append(append([]string{}, b.HelmEnv...),
		"PATH="+filepath.Dir(b.HelmBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"API_TOKEN="+b.Gitea.AdminToken)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the quick start's block failed as written:\n%s\n%s", block, e2e.Redact(string(out)))
	return e2e.Redact(string(out))
}

// requireTenantBinding checks that the release bound its tenant ClusterRole
// in ns, which is what watchNamespaces promises.
func requireTenantBinding(b *e2e.Testbed, ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	list, err := b.Kube.RbacV1().RoleBindings(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + qsRelease})
	require.NoError(t, err)
	for _, rb := range list.Items {
		if rb.RoleRef.Kind == "ClusterRole" && strings.HasSuffix(rb.RoleRef.Name, "-tenant") {
			return
		}
	}
	t.Fatalf("no RoleBinding of the release's tenant ClusterRole in %s: %v", ns, list.Items)
}

// requireTenantNamespace checks that the release made ns with the Pod
// Security level and grant tenantNamespaces promise.
func requireTenantNamespace(b *e2e.Testbed, ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	n, err := b.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "privileged", n.Labels["pod-security.kubernetes.io/enforce"])
	require.Equal(t, "acme", n.Annotations["gitea.bpg.pw/granted-repositories"])
	require.Equal(t, qsRelease, n.Annotations["meta.helm.sh/release-name"], "the release made it")
}

// quickStartWaitRunner waits, as step 5 says, until the job has a runner Job
// of group acme and a runner has taken it, and returns the job.
func quickStartWaitRunner(b *e2e.Testbed, ctx context.Context, t *testing.T, repo giteasetup.Repo) giteasetup.Job {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		jobs, _ := b.Gitea.RepoJobs(wctx, repo)
		runners, _ := b.Kube.BatchV1().Jobs("team-a").List(wctx, metav1.ListOptions{LabelSelector: "gitea.bpg.pw/runnergroup-name=acme"})
		if len(jobs) == 1 && jobs[0].RunnerName != "" && runners != nil {
			for _, r := range runners.Items {
				if r.Labels["gitea.bpg.pw/gitea-job-id"] == fmt.Sprint(jobs[0].ID) {
					return jobs[0]
				}
			}
		}
		select {
		case <-wctx.Done():
			n := 0
			if runners != nil {
				n = len(runners.Items)
			}
			t.Fatalf("no runner Job of group acme took the pushed job: jobs %+v, runner Jobs %d", jobs, n)
		case <-time.After(time.Second):
		}
	}
}

// quickStartCleanup removes what the quick start makes: the release, its
// namespaces (with the group, Secret and runner Jobs) and the Gitea org.
func quickStartCleanup(b *e2e.Testbed, t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := b.Helm(ctx, "uninstall", qsRelease, "-n", qsSystemNS, "--wait"); err != nil && !strings.Contains(out, "not found") {
		t.Errorf("helm uninstall %s: %v\n%s", qsRelease, err, e2e.Redact(out))
	}
	for _, ns := range qsNamespaces {
		if err := b.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	}
	for _, ns := range qsNamespaces {
		for {
			_, err := b.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil {
				t.Errorf("namespace %s is still there", ns)
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	r := giteasetup.Repo{Owner: qsOrg, Name: qsRepo}
	if ok, err := b.Gitea.Admin.RepoExists(ctx, r); err == nil && ok {
		if err := b.Gitea.Admin.DeleteRepo(ctx, r); err != nil {
			t.Errorf("delete Gitea repository %s: %v", r, err)
		}
	}
	if ok, err := b.Gitea.Admin.OrgExists(ctx, qsOrg); err == nil && ok {
		if err := b.Gitea.Admin.DeleteOrg(ctx, qsOrg); err != nil {
			t.Errorf("delete Gitea org %s: %v", qsOrg, err)
		}
	}
}
