//go:build e2e

package lifecycle

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// A namespace deleted while its group's runner is registered and has never
// run a job takes its groups, runner Jobs, token Secrets and ledger with
// it, but not the registration. With the sweep on (the chart's
// cleanup.deletedNamespaces), passes mirror what each served namespace
// registered into a ConfigMap outside it; once the namespace is gone
// (404), a pass removes the registration with the platform's token.
// Without the token nothing is removed and the pass says why. Another
// namespace's registration stays.
func TestLifecycleDeletedNamespaceRegistrationIsRemoved(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 12*time.Minute)
	gone, fx, _, runner := idleRegisteredRunner(b, ctx, t, "e2e-nsgone", time.Hour)
	kept, fxKept, _, keptRunner := idleRegisteredRunner(b, ctx, t, "e2e-nskept", time.Hour)
	platform := b.Namespace(ctx, t, "e2e-platform", nil)
	const mirror = "registrations"
	sweep := func(namespaces []string, token bool) e2e.PassResult {
		args := []string{"--runner-idle-timeout", "1h", "--runner-start-timeout", "10m",
			"--deleted-namespaces-mirror", platform + "/" + mirror, "--deleted-namespaces-gitea-url", b.Gitea.Admin.URL()}
		if token {
			args = append(args, "--deleted-namespaces-token", b.Gitea.AdminToken)
		}
		r := b.Pass(ctx, t, e2e.PassOpts{Namespaces: namespaces, Args: args})
		e2e.RequireSanePass(t, r, "pass with the sweep of deleted namespaces")
		return r
	}

	sweep([]string{gone, kept}, true)
	copies, err := ledger.Mirror{Client: b.Kube, Namespace: platform, Name: mirror}.Load(ctx)
	require.NoError(t, err)
	goneNS, err := b.Kube.CoreV1().Namespaces().Get(ctx, gone, metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, copies, ledger.MirrorKey(gone, goneNS.UID), "the pass mirrored what %s registered", gone)

	require.NoError(t, b.Kube.CoreV1().Namespaces().Delete(ctx, gone, metav1.DeleteOptions{}))
	e2e.WaitUntil(ctx, t, 4*time.Minute, "namespace "+gone+" gone", nil, func(ctx context.Context) (bool, string, error) {
		n, err := b.Kube.CoreV1().Namespaces().Get(ctx, gone, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, fmt.Sprintf("phase %s, conditions %v", n.Status.Phase, n.Status.Conditions), nil
	})

	r := sweep([]string{kept}, false)
	require.Contains(t, r.Log, "no Gitea token for the sweep of deleted namespaces", "without the token the pass says why")
	require.Contains(t, b.OrgRunners(ctx, t, fx.Spec.Org), runner, "without the token nothing is removed")

	e2e.WaitUntil(ctx, t, 5*time.Minute, "runner "+runner+" of deleted namespace "+gone+" removed from Gitea", nil, func(ctx context.Context) (bool, string, error) {
		sweep([]string{kept}, true)
		r, ok := b.OrgRunners(ctx, t, fx.Spec.Org)[runner]
		return !ok, fmt.Sprintf("runner %+v", r), nil
	})
	require.Contains(t, b.OrgRunners(ctx, t, fxKept.Spec.Org), keptRunner, "another namespace's registration stays")
	copies, err = ledger.Mirror{Client: b.Kube, Namespace: platform, Name: mirror}.Load(ctx)
	require.NoError(t, err)
	require.NotContains(t, copies, ledger.MirrorKey(gone, goneNS.UID), "nothing of it is left: forgotten")
}

// The same through the chart, under the rights it grants: a release with
// cleanup.deletedNamespaces and the platform's token in a Secret of its
// namespace serves two namespaces, each with a warm runner registered and
// idle (it never ran a job). The looping listener mirrors both into
// <fullname>-registrations with only the Role the chart gives it; once one
// namespace is deleted and gone, its runner's registration is removed and
// the other namespace's stays.
func TestChartSweepsADeletedNamespacesRegistrations(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 12*time.Minute)
	gone := b.Namespace(ctx, t, "e2e-nsgc", nil)
	kept := b.Namespace(ctx, t, "e2e-nsgc-kept", nil)
	sys := b.Namespace(ctx, t, "e2e-nsgc-sys", nil)
	e2e.Secrets.Add(b.Gitea.AdminToken)
	_, err := b.Kube.CoreV1().Secrets(sys).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gitea-platform"},
		StringData: map[string]string{"token": b.Gitea.AdminToken}}, metav1.CreateOptions{})
	require.NoError(t, err)
	values := e2e.DeploymentValues()
	values["watchNamespaces"] = []string{gone, kept}
	values["cleanup"] = map[string]any{"deletedNamespaces": map[string]any{"enabled": true, "giteaURL": b.Gitea.Admin.URL(),
		"tokenSecret": map[string]any{"name": "gitea-platform"}}}
	rel := b.HelmInstall(ctx, t, sys, "gro", values)
	fx := b.NewOrgScope(ctx, t, e2e.Uniq("e2e-nsgc"))
	tags := map[string]string{}
	for _, ns := range []string{gone, kept} {
		b.TokenSecret(ctx, t, ns, e2e.GroupSecret("warm"), fx.RegToken, fx.APIToken)
		spec := b.GroupSpec(fx, e2e.GroupSecret("warm"), 1, e2e.Uniq("e2e-nsgc"))
		spec.MinIdleRunners = 1
		tags[ns] = runnerjob.OwnerTag(b.CreateGroup(ctx, t, ns, "warm", nil, spec).UID)
	}
	dump := func() string { return b.DumpNamespaces(sys, gone, kept) }
	// registered is the name of ns's warm runner registered in Gitea, if any.
	registered := func(ctx context.Context, ns string) string {
		for name := range b.OrgRunners(ctx, t, fx.Spec.Org) {
			if _, _, tag, ok := runnerjob.SplitRunnerName(name); ok && tag == tags[ns] {
				return name
			}
		}
		return ""
	}
	mirror := ledger.Mirror{Client: b.Kube, Namespace: sys, Name: rel.Fullname() + "-registrations"}
	goneNS, err := b.Kube.CoreV1().Namespaces().Get(ctx, gone, metav1.GetOptions{})
	require.NoError(t, err)
	var runner string
	e2e.WaitUntil(ctx, t, e2e.StepWait, "both warm runners registered, and "+gone+" mirrored", dump, func(ctx context.Context) (bool, string, error) {
		runner = registered(ctx, gone)
		copies, err := mirror.Load(ctx)
		if err != nil {
			return false, "", err
		}
		_, mirrored := copies[ledger.MirrorKey(gone, goneNS.UID)]
		return runner != "" && registered(ctx, kept) != "" && mirrored, fmt.Sprintf("runner %q, mirrored %v", runner, mirrored), nil
	})

	require.NoError(t, b.Kube.CoreV1().Namespaces().Delete(ctx, gone, metav1.DeleteOptions{}))
	e2e.WaitUntil(ctx, t, 5*time.Minute, "runner "+runner+" of deleted namespace "+gone+" removed from Gitea", dump, func(ctx context.Context) (bool, string, error) {
		_, err := b.Kube.CoreV1().Namespaces().Get(ctx, gone, metav1.GetOptions{})
		left := registered(ctx, gone)
		return apierrors.IsNotFound(err) && left == "", fmt.Sprintf("namespace: %v, runner %q", err, left), nil
	})
	require.NotEmpty(t, registered(ctx, kept), "another namespace's registration stays")

	// The passes keep the sweep's state on the mirror (with the Role the
	// chart gives), and status shows it.
	s, ok, err := mirror.LastSweep(ctx)
	require.NoError(t, err)
	require.True(t, ok, "the sweep's state is kept on the mirror")
	t.Logf("the sweep's state: %+v", s)
	out, err := exec.CommandContext(ctx, filepath.Join(b.Root, "bin", "gitea-runner-scaler"), "status", "--kubeconfig", b.Kubeconfig,
		"-n", kept, "--deleted-namespaces-mirror", sys+"/"+rel.Fullname()+"-registrations").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "Deleted namespaces (mirror "+sys+"/"+rel.Fullname()+"-registrations): ")
}
