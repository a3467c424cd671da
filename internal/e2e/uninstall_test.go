//go:build e2e

package e2e

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
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 12*time.Minute)
	s := b.servedGroup(ctx, t, sceneOpts{name: "uninst", max: 3, minIdle: 1, mintToken: true, listenerNamespace: true})
	tag := runnerjob.OwnerTag(s.rg.UID)

	// A job, run by Gitea's real runner.
	keys, wf := numberedJobs("uninst", 1, s.label)
	pushJobs(ctx, t, b, s.fx, "ci.yml", nil, wf...)
	jobs := b.gitea.waitJobs(ctx, t, s.fx.repo, 1)
	id := idsOf(jobs, keys...)[keys[0]]
	waitUntil(ctx, t, stepWait, "the job succeeded, and a warm runner waits registered", s.dump, func(ctx context.Context) (bool, string, error) {
		gj, err := b.giteaJob(ctx, s.fx.repo, id)
		if err != nil {
			return false, "", err
		}
		active, registered := b.idleRunners(ctx, t, s.ns, s.group, s.fx.spec.Org)
		return gj.State() == "completed/success" && registered > 0, fmt.Sprintf("job %s, %d active runner Jobs, %d registered", gj.State(), active, registered), nil
	})

	// A namespace enabled by hand, as NOTES.txt says.
	tenantRole := s.rel.fullname() + "-" + s.sys + "-tenant"
	hand := b.namespace(ctx, t, "e2e-uninst-hand", nil)
	_, err := b.kube.RbacV1().RoleBindings(hand).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: tenantRole, Namespace: hand},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: tenantRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: s.rel.fullname(), Namespace: s.sys}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	dir := t.TempDir()
	run := func(block string) {
		t.Helper()
		script := runbookBlock(t, b.root, block)
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(append([]string(nil), b.helmEnv...),
			"PATH="+filepath.Dir(b.helmBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
			"RELEASE="+s.rel.name, "RELEASE_NAMESPACE="+s.sys, "NAMESPACES="+s.ns+" "+hand,
			"GITEA_URL="+b.gitea.admin.URL(), "GITEA_TOKEN="+b.gitea.adminToken)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "runbook block %q:\n%s", block, redact(string(out)))
		t.Logf("runbook block %q took %s", block, time.Since(start).Round(time.Second))
	}

	run("before")

	tags, err := os.ReadFile(filepath.Join(dir, "gitea-runner-tags.txt"))
	require.NoError(t, err)
	require.Contains(t, strings.Fields(string(tags)), tag, "the group's owner tag was kept")
	// What the README says goes.
	_, err = b.kube.RbacV1().RoleBindings(s.ns).Get(ctx, tenantRole, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the chart's RoleBinding goes: %v", err)
	_, err = b.kube.RbacV1().ClusterRoles().Get(ctx, tenantRole, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the tenant ClusterRole goes: %v", err)
	deps, err := b.kube.AppsV1().Deployments(s.sys).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, deps.Items, "the listener goes")
	// What the README says stays.
	_, err = b.group(ctx, s.ns, s.group)
	require.NoError(t, err, "the RunnerGroup stays")
	active, registered := b.idleRunners(ctx, t, s.ns, s.group, s.fx.spec.Org)
	require.Positive(t, active, "its idle runner Job stays")
	require.Positive(t, registered, "its idle runner stays registered in Gitea")
	for _, cm := range []string{state.ConfigMapName(s.group), ledger.ConfigMapName} {
		_, err = b.kube.CoreV1().ConfigMaps(s.ns).Get(ctx, cm, metav1.GetOptions{})
		require.NoError(t, err, "ConfigMap %s stays", cm)
	}
	minted := v1alpha1.MintedRegistrationTokenSecret(s.group)
	_, err = b.kube.CoreV1().Secrets(s.ns).Get(ctx, minted, metav1.GetOptions{})
	require.NoError(t, err, "the minted Secret %s stays", minted)
	_, err = b.kube.RbacV1().RoleBindings(hand).Get(ctx, tenantRole, metav1.GetOptions{})
	require.NoError(t, err, "the RoleBinding made by hand stays")

	run("remove")

	_, err = b.group(ctx, s.ns, s.group)
	require.True(t, apierrors.IsNotFound(err), "the RunnerGroup is gone: %v", err)
	left, err := b.runnerJobs(ctx, s.ns, s.group)
	require.NoError(t, err)
	require.Empty(t, jobNames(left), "no runner Job is left")
	pods, err := b.kube.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: labelManagedBy + "=gitea-runner-operator"})
	require.NoError(t, err)
	require.Empty(t, pods.Items, "no runner pod is left")
	eventually(ctx, t, "the state ConfigMap and the minted Secret go with the group (the garbage collector)", func(ctx context.Context) (bool, error) {
		cms, err := b.kube.CoreV1().ConfigMaps(s.ns).List(ctx, metav1.ListOptions{LabelSelector: labelManagedBy + "=gitea-runner-operator"})
		if err != nil {
			return false, err
		}
		_, err = b.kube.CoreV1().Secrets(s.ns).Get(ctx, minted, metav1.GetOptions{})
		return len(cms.Items) == 0 && apierrors.IsNotFound(err), nil
	})
	_, err = b.kube.RbacV1().RoleBindings(hand).Get(ctx, tenantRole, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the RoleBinding made by hand is gone: %v", err)
	for name := range b.orgRunners(ctx, t, s.fx.spec.Org) {
		require.False(t, strings.HasSuffix(name, "-"+tag), "runner %s of the group is still registered in Gitea", name)
	}
}

// idleRunners counts the group's active runner Jobs and those whose runner
// is registered in the org.
func (b *bed) idleRunners(ctx context.Context, t *testing.T, ns, group, org string) (active, registered int) {
	t.Helper()
	jobs, err := b.runnerJobs(ctx, ns, group)
	require.NoError(t, err)
	regs := b.orgRunners(ctx, t, org)
	for i := range jobs {
		if !jobActive(&jobs[i]) {
			continue
		}
		active++
		if _, ok := regs[runnerjob.RunnerNameOf(&jobs[i])]; ok {
			registered++
		}
	}
	return active, registered
}
