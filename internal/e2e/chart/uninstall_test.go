//go:build e2e

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
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// runbookBlock is the shell block of the chart README (Uninstalling) that follows the marker
// <!-- runbook:uninstall:NAME -->, as written there.
func runbookBlock(t *testing.T, root, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "charts", "gitea-runner-operator", "README.md"))
	require.NoError(t, err)
	re := regexp.MustCompile("(?s)<!-- runbook:uninstall:" + name + " -->\n```sh\n(.*?)```\n<!-- runbook:uninstall:end -->")
	m := re.FindSubmatch(raw)
	require.NotNil(t, m, "the chart README has no runbook block %q", name)
	return string(m[1])
}

// TestUninstallRunbook runs the README's uninstall runbook (Uninstalling)
// as written: a release with a group (a warm runner, a minted registration
// token) that ran a job with Gitea's real runner, and a second namespace
// enabled by hand, is uninstalled with the first block; exactly what the
// README's table says stays; the second block removes it, in the
// namespaces and in Gitea.
func TestUninstallRunbook(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 12*time.Minute)
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "uninst", Max: 3, MinIdle: 1, MintToken: true, ListenerNamespace: true})
	tag := runnerjob.OwnerTag(s.RG.UID)

	// A job, run by Gitea's real runner.
	keys, wf := e2e.NumberedJobs("uninst", 1, s.Label)
	e2e.PushJobs(ctx, t, b, s.Fx, "ci.yml", nil, wf...)
	jobs := b.Gitea.WaitJobs(ctx, t, s.Fx.Repo, 1)
	id := e2e.IDsOf(jobs, keys...)[keys[0]]
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the job succeeded, and a warm runner waits registered", s.Dump, func(ctx context.Context) (bool, string, error) {
		gj, err := b.GiteaJob(ctx, s.Fx.Repo, id)
		if err != nil {
			return false, "", err
		}
		active, registered := idleRunners(b, ctx, t, s.NS, s.Group, s.Fx.Spec.Org)
		return gj.State() == "completed/success" && registered > 0, fmt.Sprintf("job %s, %d active runner Jobs, %d registered", gj.State(), active, registered), nil
	})

	// A namespace enabled by hand, as NOTES.txt says.
	tenantRole := s.Rel.Fullname() + "-" + s.Sys + "-tenant"
	hand := b.Namespace(ctx, t, "e2e-uninst-hand", nil)
	_, err := b.Kube.RbacV1().RoleBindings(hand).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: tenantRole, Namespace: hand},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: tenantRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: s.Rel.Fullname(), Namespace: s.Sys}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	dir := t.TempDir()
	run := func(block string) {
		t.Helper()
		script := runbookBlock(t, b.Root, block)
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(append([]string(nil), b.HelmEnv...),
			"PATH="+filepath.Dir(b.HelmBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
			"RELEASE="+s.Rel.Name, "RELEASE_NAMESPACE="+s.Sys, "NAMESPACES="+s.NS+" "+hand,
			"GITEA_URL="+b.Gitea.Admin.URL(), "GITEA_TOKEN="+b.Gitea.AdminToken)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "runbook block %q:\n%s", block, e2e.Redact(string(out)))
		t.Logf("runbook block %q took %s", block, time.Since(start).Round(time.Second))
	}

	run("before")

	tags, err := os.ReadFile(filepath.Join(dir, "gitea-runner-tags.txt"))
	require.NoError(t, err)
	require.Contains(t, strings.Fields(string(tags)), tag, "the group's owner tag was kept")
	// What the README says goes.
	_, err = b.Kube.RbacV1().RoleBindings(s.NS).Get(ctx, tenantRole, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the chart's RoleBinding goes: %v", err)
	_, err = b.Kube.RbacV1().ClusterRoles().Get(ctx, tenantRole, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the tenant ClusterRole goes: %v", err)
	deps, err := b.Kube.AppsV1().Deployments(s.Sys).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, deps.Items, "the listener goes")
	// What the README says stays.
	_, err = b.Group(ctx, s.NS, s.Group)
	require.NoError(t, err, "the RunnerGroup stays")
	active, registered := idleRunners(b, ctx, t, s.NS, s.Group, s.Fx.Spec.Org)
	require.Positive(t, active, "its idle runner Job stays")
	require.Positive(t, registered, "its idle runner stays registered in Gitea")
	for _, cm := range []string{state.ConfigMapName(s.Group), ledger.ConfigMapName} {
		_, err = b.Kube.CoreV1().ConfigMaps(s.NS).Get(ctx, cm, metav1.GetOptions{})
		require.NoError(t, err, "ConfigMap %s stays", cm)
	}
	minted := v1alpha1.MintedRegistrationTokenSecret(s.Group)
	_, err = b.Kube.CoreV1().Secrets(s.NS).Get(ctx, minted, metav1.GetOptions{})
	require.NoError(t, err, "the minted Secret %s stays", minted)
	_, err = b.Kube.RbacV1().RoleBindings(hand).Get(ctx, tenantRole, metav1.GetOptions{})
	require.NoError(t, err, "the RoleBinding made by hand stays")

	run("remove")

	_, err = b.Group(ctx, s.NS, s.Group)
	require.True(t, apierrors.IsNotFound(err), "the RunnerGroup is gone: %v", err)
	left, err := b.RunnerJobs(ctx, s.NS, s.Group)
	require.NoError(t, err)
	require.Empty(t, e2e.JobNames(left), "no runner Job is left")
	pods, err := b.Kube.CoreV1().Pods(s.NS).List(ctx, metav1.ListOptions{LabelSelector: e2e.LabelManagedBy + "=gitea-runner-operator"})
	require.NoError(t, err)
	require.Empty(t, pods.Items, "no runner pod is left")
	e2e.Eventually(ctx, t, "the state ConfigMap and the minted Secret go with the group (the garbage collector)", func(ctx context.Context) (bool, error) {
		cms, err := b.Kube.CoreV1().ConfigMaps(s.NS).List(ctx, metav1.ListOptions{LabelSelector: e2e.LabelManagedBy + "=gitea-runner-operator"})
		if err != nil {
			return false, err
		}
		_, err = b.Kube.CoreV1().Secrets(s.NS).Get(ctx, minted, metav1.GetOptions{})
		return len(cms.Items) == 0 && apierrors.IsNotFound(err), nil
	})
	_, err = b.Kube.RbacV1().RoleBindings(hand).Get(ctx, tenantRole, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the RoleBinding made by hand is gone: %v", err)
	for name := range b.OrgRunners(ctx, t, s.Fx.Spec.Org) {
		require.False(t, strings.HasSuffix(name, "-"+tag), "runner %s of the group is still registered in Gitea", name)
	}
}

// idleRunners counts the group's active runner Jobs and those whose runner
// is registered in the org.
func idleRunners(b *e2e.Testbed, ctx context.Context, t *testing.T, ns, group, org string) (active, registered int) {
	t.Helper()
	jobs, err := b.RunnerJobs(ctx, ns, group)
	require.NoError(t, err)
	regs := b.OrgRunners(ctx, t, org)
	for i := range jobs {
		if !e2e.JobActive(&jobs[i]) {
			continue
		}
		active++
		if _, ok := regs[runnerjob.RunnerNameOf(&jobs[i])]; ok {
			registered++
		}
	}
	return active, registered
}
