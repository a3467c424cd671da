//go:build e2e

package chart

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

const (
	crdName            = "runnergroups.gitea.bpg.pw"
	annReleaseName     = "meta.helm.sh/release-name"
	annReleaseNs       = "meta.helm.sh/release-namespace"
	labelHelmManagedBy = "app.kubernetes.io/managed-by"
	notesSkipped       = "RunnerGroup CRD: left as it was."
	notesInstalled     = "RunnerGroup CRD: installed or upgraded by this release"
	crdInManifestRE    = "kind: CustomResourceDefinition"
)

// TestChartInstallsOverAnExistingCRD installs the chart with crds.install
// (its default) on a cluster that has the RunnerGroup CRD already, in the
// three ways a platform team meets it, on the real API server:
//
//  1. applied apart (the bed server-side applies crds/, as `kubectl apply
//     -f crds/` does): the install succeeds, leaves the CRD untouched and
//     its NOTES say so; uninstalling leaves it too;
//  2. owned by a first release: a second release installs, leaves it to
//     the first and names it in NOTES;
//  3. kept by an uninstalled release (crds.keep): a release of another name
//     installs and leaves it; the same release installed again re-adopts it.
//
// Helm used to refuse each with "invalid ownership metadata". The CRD is
// the bed's, shared by every test, so this test does not run in parallel,
// never uninstalls with crds.keep=false, and gives the CRD back without
// Helm's ownership metadata.
func TestChartInstallsOverAnExistingCRD(t *testing.T) {
	// Alone on the bed: it replaces the CRD every test uses.
	e2e.Exclusive(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 6*time.Minute)
	ns1 := b.Namespace(ctx, t, "e2e-crd-a", nil)
	ns2 := b.Namespace(ctx, t, "e2e-crd-b", nil)
	t.Cleanup(func() { disownCRD(b, t) })
	disownCRD(b, t)

	install := func(t *testing.T, ns, name string) string {
		t.Helper()
		values := e2e.BaseValues(ns)
		values["crds"] = map[string]any{"install": true, "keep": true}
		out, err := b.TryHelmInstall(ctx, t, ns, name, e2e.ValuesFile(t, values))
		require.NoError(t, err, "helm install %s -n %s:\n%s", name, ns, out)
		return out
	}
	manifestHasCRD := func(t *testing.T, ns, name string) bool {
		t.Helper()
		out, err := b.Helm(ctx, "get", "manifest", name, "--namespace", ns)
		require.NoError(t, err, out)
		return strings.Contains(out, crdInManifestRE)
	}
	uninstall := func(t *testing.T, ns, name string) {
		t.Helper()
		out, err := b.Helm(ctx, "uninstall", name, "--namespace", ns)
		require.NoError(t, err, out)
	}
	owner := func(t *testing.T) (string, string, string) {
		t.Helper()
		crd, err := b.Dyn.Resource(e2e.CRDGVR).Get(ctx, crdName, metav1.GetOptions{})
		require.NoError(t, err, "the CRD must outlive every step")
		return crd.GetAnnotations()[annReleaseName], crd.GetAnnotations()[annReleaseNs], crd.GetLabels()[labelHelmManagedBy]
	}

	t.Run("applied apart", func(t *testing.T) {
		before, err := b.Dyn.Resource(e2e.CRDGVR).Get(ctx, crdName, metav1.GetOptions{})
		require.NoError(t, err)
		out := install(t, ns1, "apart")
		require.Contains(t, out, notesSkipped)
		require.Contains(t, out, "belongs to no Helm release")
		require.False(t, manifestHasCRD(t, ns1, "apart"), "the release must not hold the CRD")
		after, err := b.Dyn.Resource(e2e.CRDGVR).Get(ctx, crdName, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, before.GetResourceVersion(), after.GetResourceVersion(), "the install changed the CRD")
		uninstall(t, ns1, "apart")
		rel, _, _ := owner(t)
		require.Empty(t, rel)
	})

	t.Run("owned by another release", func(t *testing.T) {
		// The first release takes the CRD over the way the NOTES say.
		ownCRD(b, ctx, t, "first", ns1)
		out := install(t, ns1, "first")
		require.Contains(t, out, notesInstalled)
		require.True(t, manifestHasCRD(t, ns1, "first"), "the first release must hold the CRD")

		out = install(t, ns2, "second")
		require.Contains(t, out, notesSkipped)
		require.Contains(t, out, "belongs to release first in namespace "+ns1)
		require.False(t, manifestHasCRD(t, ns2, "second"))
		rel, relNs, managed := owner(t)
		require.Equal(t, []string{"first", ns1, "Helm"}, []string{rel, relNs, managed})
		uninstall(t, ns2, "second")
		uninstall(t, ns1, "first") // crds.keep: the CRD stays, still naming "first"
	})

	t.Run("kept by an uninstalled release", func(t *testing.T) {
		rel, relNs, _ := owner(t)
		require.Equal(t, []string{"first", ns1}, []string{rel, relNs})

		out := install(t, ns2, "other")
		require.Contains(t, out, notesSkipped)
		require.Contains(t, out, "belongs to release first in namespace "+ns1)
		require.False(t, manifestHasCRD(t, ns2, "other"))
		uninstall(t, ns2, "other")

		out = install(t, ns1, "first")
		require.Contains(t, out, notesInstalled)
		require.True(t, manifestHasCRD(t, ns1, "first"), "the same release must re-adopt its kept CRD")
		uninstall(t, ns1, "first")
	})
}

// TestTurningCRDInstallOffKeepsEveryRunnerGroup upgrades a release that
// installed the CRD to crds.install=false, as a platform team that starts
// managing CRDs apart does. Helm deletes what a release no longer renders
// unless the live object says helm.sh/resource-policy: keep, and deleting
// the CRD deletes every RunnerGroup. So, on the real API server and Helm:
//
//  1. with keep (crds.keep, the default) the upgrade succeeds, the CRD
//     leaves the release and the RunnerGroup is the same object after it;
//  2. without keep (crds.keep=false, or the annotation removed by hand) the
//     chart refuses the upgrade with the command that keeps the CRD, and the
//     RunnerGroup is still there.
//
// The CRD is the bed's, shared by every test: see
// TestChartInstallsOverAnExistingCRD. Should the guard ever fail to refuse,
// the cleanup applies crds/ again so the tests after this one still run.
func TestTurningCRDInstallOffKeepsEveryRunnerGroup(t *testing.T) {
	// Alone on the bed: it replaces the CRD every test uses.
	e2e.Exclusive(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 4*time.Minute)
	ns := b.Namespace(ctx, t, "e2e-crd-off", nil)
	t.Cleanup(func() {
		ctx, cancel := e2e.CleanupContext()
		defer cancel()
		if err := b.EnsureCRD(ctx); err != nil {
			t.Errorf("give the bed its CRD back: %v", err)
		}
		disownCRD(b, t)
	})
	const rel = "crdoff"
	disownCRD(b, t)
	ownCRD(b, ctx, t, rel, ns)
	// No watched namespace: no pass serves the group, which only has to exist.
	values := e2e.BaseValues()
	values["crds"] = map[string]any{"install": true, "keep": true}
	out, err := b.TryHelmInstall(ctx, t, ns, rel, e2e.ValuesFile(t, values))
	require.NoError(t, err, out)
	require.Contains(t, out, notesInstalled)

	rg := b.CreateGroup(ctx, t, ns, "kept", nil, v1alpha1.RunnerGroupSpec{
		Scope:            v1alpha1.ScopeOrg,
		Org:              "acme",
		Gitea:            v1alpha1.GiteaSpec{URL: e2e.GiteaURL},
		MaxActiveRunners: 1,
		AuthToken:        v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "acme-tokens", Key: "api"}},
	})
	chart := filepath.Join(b.Root, "charts", e2e.ChartName)
	upgradeInstallOff := func() (string, error) {
		off := e2e.BaseValues()
		off["crds"] = map[string]any{"install": false}
		return b.Helm(ctx, "upgrade", rel, chart, "--namespace", ns, "--values", e2e.ValuesFile(t, off))
	}
	sameGroup := func(t *testing.T) {
		t.Helper()
		got, err := b.Group(ctx, ns, "kept")
		require.NoError(t, err, "the RunnerGroup must outlive the upgrade")
		require.Equal(t, rg.UID, got.UID, "the RunnerGroup was deleted and made again")
	}

	t.Run("with keep the CRD leaves the release and stays", func(t *testing.T) {
		out, err := upgradeInstallOff()
		require.NoError(t, err, e2e.Redact(out))
		manifest, err := b.Helm(ctx, "get", "manifest", rel, "--namespace", ns)
		require.NoError(t, err, manifest)
		require.NotContains(t, manifest, crdInManifestRE, "the release must no longer hold the CRD")
		sameGroup(t)
	})

	t.Run("without keep the upgrade is refused", func(t *testing.T) {
		// Back to a revision that holds the CRD, then take keep away as
		// crds.keep=false or a hand edit would.
		out, err := b.Helm(ctx, "upgrade", rel, chart, "--namespace", ns, "--values", e2e.ValuesFile(t, values))
		require.NoError(t, err, e2e.Redact(out))
		setKeep := func(v string) error {
			_, err := b.Dyn.Resource(e2e.CRDGVR).Patch(ctx, crdName, types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"helm.sh/resource-policy":`+v+`}}}`), metav1.PatchOptions{})
			return err
		}
		// Before the release's uninstall, whose last revision holds the CRD.
		t.Cleanup(func() {
			if err := setKeep(`"keep"`); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("put keep back on the CRD: %v", err)
			}
		})
		require.NoError(t, setKeep("null"))

		out, err = upgradeInstallOff()
		require.Error(t, err, "helm upgrade with crds.install=false must be refused:\n%s", e2e.Redact(out))
		require.Contains(t, out, "crds.install=false: CRD "+crdName+" belongs to this release and lacks the annotation helm.sh/resource-policy: keep")
		require.Contains(t, out, "kubectl annotate crd "+crdName+" helm.sh/resource-policy=keep")
		sameGroup(t)
	})
}

// ownCRD gives the bed's CRD the Helm ownership metadata of release name in
// ns: the commands the chart's NOTES print to hand it to a release.
func ownCRD(b *e2e.Testbed, ctx context.Context, t *testing.T, name, ns string) {
	t.Helper()
	patch := `{"metadata":{"annotations":{"` + annReleaseName + `":"` + name + `","` + annReleaseNs + `":"` + ns + `"},"labels":{"` + labelHelmManagedBy + `":"Helm"}}}`
	_, err := b.Dyn.Resource(e2e.CRDGVR).Patch(ctx, crdName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

// disownCRD strips Helm's ownership metadata from the bed's CRD, back to
// the state ensureCRD leaves it in: applied apart, and kept. The patch is the same
// whatever the CRD carries, so it is safe to run before and after.
func disownCRD(b *e2e.Testbed, t *testing.T) {
	t.Helper()
	ctx, cancel := e2e.CleanupContext()
	defer cancel()
	// The chart's labels go too: the release that added them is gone. keep
	// stays, or is set: a release whose manifest still holds the CRD (the
	// demo's, or one a killed test left) would otherwise delete it, and
	// every RunnerGroup, when it next drops it (make demo, then make test).
	patch := `{"metadata":{"annotations":{"` + annReleaseName + `":null,"` + annReleaseNs + `":null,"helm.sh/resource-policy":"keep"},` +
		`"labels":{"` + labelHelmManagedBy + `":null,"app.kubernetes.io/instance":null,"app.kubernetes.io/name":null,` +
		`"app.kubernetes.io/part-of":null,"app.kubernetes.io/version":null,"helm.sh/chart":null}}}`
	_, err := b.Dyn.Resource(e2e.CRDGVR).Patch(ctx, crdName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}
