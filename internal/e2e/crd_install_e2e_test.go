//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	b := getBed(t)
	ctx := testContext(t, 6*time.Minute)
	ns1 := b.namespace(ctx, t, "e2e-crd-a", nil)
	ns2 := b.namespace(ctx, t, "e2e-crd-b", nil)
	t.Cleanup(func() { b.disownCRD(t) })
	b.disownCRD(t)

	install := func(t *testing.T, ns, name string) string {
		t.Helper()
		values := baseValues(ns)
		values["crds"] = map[string]any{"install": true, "keep": true}
		out, err := b.tryHelmInstall(ctx, t, ns, name, valuesFile(t, values))
		require.NoError(t, err, "helm install %s -n %s:\n%s", name, ns, out)
		return out
	}
	manifestHasCRD := func(t *testing.T, ns, name string) bool {
		t.Helper()
		out, err := b.helm(ctx, "get", "manifest", name, "--namespace", ns)
		require.NoError(t, err, out)
		return strings.Contains(out, crdInManifestRE)
	}
	uninstall := func(t *testing.T, ns, name string) {
		t.Helper()
		out, err := b.helm(ctx, "uninstall", name, "--namespace", ns)
		require.NoError(t, err, out)
	}
	owner := func(t *testing.T) (string, string, string) {
		t.Helper()
		crd, err := b.dyn.Resource(crdGVR).Get(ctx, crdName, metav1.GetOptions{})
		require.NoError(t, err, "the CRD must outlive every step")
		return crd.GetAnnotations()[annReleaseName], crd.GetAnnotations()[annReleaseNs], crd.GetLabels()[labelHelmManagedBy]
	}

	t.Run("applied apart", func(t *testing.T) {
		before, err := b.dyn.Resource(crdGVR).Get(ctx, crdName, metav1.GetOptions{})
		require.NoError(t, err)
		out := install(t, ns1, "apart")
		require.Contains(t, out, notesSkipped)
		require.Contains(t, out, "belongs to no Helm release")
		require.False(t, manifestHasCRD(t, ns1, "apart"), "the release must not hold the CRD")
		after, err := b.dyn.Resource(crdGVR).Get(ctx, crdName, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, before.GetResourceVersion(), after.GetResourceVersion(), "the install changed the CRD")
		uninstall(t, ns1, "apart")
		rel, _, _ := owner(t)
		require.Empty(t, rel)
	})

	t.Run("owned by another release", func(t *testing.T) {
		// The first release takes the CRD over the way the NOTES say.
		b.ownCRD(ctx, t, "first", ns1)
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

// ownCRD gives the bed's CRD the Helm ownership metadata of release name in
// ns: the commands the chart's NOTES print to hand it to a release.
func (b *bed) ownCRD(ctx context.Context, t *testing.T, name, ns string) {
	t.Helper()
	patch := `{"metadata":{"annotations":{"` + annReleaseName + `":"` + name + `","` + annReleaseNs + `":"` + ns + `"},"labels":{"` + labelHelmManagedBy + `":"Helm"}}}`
	_, err := b.dyn.Resource(crdGVR).Patch(ctx, crdName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

// disownCRD strips Helm's ownership metadata from the bed's CRD, back to
// the state ensureCRD leaves it in: applied apart. The patch is the same
// whatever the CRD carries, so it is safe to run before and after.
func (b *bed) disownCRD(t *testing.T) {
	t.Helper()
	ctx, cancel := cleanupContext()
	defer cancel()
	// The chart's labels go too: the release that added them is gone.
	patch := `{"metadata":{"annotations":{"` + annReleaseName + `":null,"` + annReleaseNs + `":null,"helm.sh/resource-policy":null},` +
		`"labels":{"` + labelHelmManagedBy + `":null,"app.kubernetes.io/instance":null,"app.kubernetes.io/name":null,` +
		`"app.kubernetes.io/part-of":null,"app.kubernetes.io/version":null,"helm.sh/chart":null}}}`
	_, err := b.dyn.Resource(crdGVR).Patch(ctx, crdName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}
