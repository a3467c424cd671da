//go:build e2e

// enable-namespace and check-group on the real API server: a namespace
// enabled in one step serves a group, and what a server-side dry run and a
// group's check say before it is.

package tenancy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// TestEnableNamespaceInOneStep: the chart installed with no namespace
// enabled, a team's namespace at Pod Security baseline with an unlabelled
// token Secret. check-group on the group's manifest lists what is missing;
// enable-namespace refuses to take the label another manager set until
// --force-conflicts; --dry-run=server changes nothing; enable-namespace then
// binds the tenant ClusterRole, sets the Pod Security level and the grant,
// and labels and annotates the Secret (its data untouched), after which
// check-group finds nothing missing and the group serves a job.
func TestEnableNamespaceInOneStep(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 6*time.Minute)
	const selKey = "e2e.gitea.bpg.pw/enable"
	sel := e2e.Uniq("enable")

	sys := b.Namespace(ctx, t, "e2e-enable-sys", nil)
	team := b.Namespace(ctx, t, "e2e-enable-team", map[string]string{tenancy.LabelEnforce: "baseline"})
	dump := func() string { return b.DumpNamespaces(sys, team) }

	values := e2e.DeploymentValues() // no watchNamespaces: no namespace enabled
	values["defaultListener"] = map[string]any{"enabled": false}
	values["listeners"] = []any{map[string]any{
		"name":     "enable",
		"selector": map[string]any{"matchLabels": map[string]any{selKey: sel}},
	}}
	rel := b.HelmInstall(ctx, t, sys, "gro", values)
	tenantRole := rel.Fullname() + "-" + sys + "-tenant"
	sa := sys + ":" + rel.Fullname()

	fx := b.NewOrgScope(ctx, t, e2e.Uniq("enable"))
	const secret = "team-tokens"
	e2e.Secrets.Add(fx.RegToken)
	e2e.Secrets.Add(fx.APIToken)
	_, err := b.Kube.CoreV1().Secrets(team).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secret},
		StringData: map[string]string{"registration": fx.RegToken, "api": fx.APIToken},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	label := e2e.Uniq("enable")
	rg := v1alpha1.RunnerGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "rg-enable", Labels: map[string]string{selKey: sel}},
		Spec:       b.GroupSpec(fx, secret, 1, label),
	}
	manifest, err := yaml.Marshal(rg)
	require.NoError(t, err)
	manifestFile := filepath.Join(t.TempDir(), "group.yaml")
	require.NoError(t, os.WriteFile(manifestFile, manifest, 0o600))

	scaler := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(b.Root, "bin", "gitea-runner-scaler"), append(args, "--kubeconfig", b.Kubeconfig)...)
		out, err := cmd.CombinedOutput()
		return e2e.Redact(string(out)), err
	}
	checkGroup := func(args ...string) (string, error) {
		return scaler(append([]string{"check-group", "--allowed-gitea-urls", e2e.GiteaURL, "--service-account", sa, "--tenant-cluster-role", tenantRole}, args...)...)
	}
	enable := []string{"enable-namespace", team, "--tenant-cluster-role", tenantRole, "--service-account", sa,
		"--pod-security", "privileged", "--grant-gitea-url", e2e.GiteaURL, "--grant-repository", fx.Spec.Org,
		"--token-secret", secret, "--registration-token-key", "registration", "--mint-token-key", "api"}

	out, err := checkGroup("-f", manifestFile)
	t.Logf("check-group before:\n%s", out)
	require.Error(t, err, "something is missing: exit 1")
	assert.Contains(t, out, "MISSING  namespace: namespace "+team+" is not enabled")
	assert.Contains(t, out, "fix: someone who holds the tenant rights in "+team+" runs: gitea-runner-scaler enable-namespace "+team)

	// The Pod Security label another manager set (here the test; often
	// kubectl label) is a conflict until the command is told to take it.
	out, err = scaler(append(enable, "--dry-run=server")...)
	require.Error(t, err, out)
	assert.Contains(t, out, "conflict")
	assert.Contains(t, out, "--force-conflicts sets these fields as asked")
	enable = append(enable, "--force-conflicts")

	out, err = scaler(append(enable, "--dry-run=server")...)
	require.NoError(t, err, out)
	assert.Equal(t, "rolebinding.rbac.authorization.k8s.io/"+tenantRole+" serverside-applied (server dry run)\n"+
		"namespace/"+team+" serverside-applied (server dry run)\n"+
		"secret/"+secret+" serverside-applied (server dry run)\n", out)
	_, err = b.Kube.RbacV1().RoleBindings(team).Get(ctx, tenantRole, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a server dry run binds nothing: %v", err)
	nsObj, err := b.Kube.CoreV1().Namespaces().Get(ctx, team, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "baseline", nsObj.Labels[tenancy.LabelEnforce], "a server dry run leaves the Pod Security level")
	assert.NotContains(t, nsObj.Annotations, tenancy.AnnotationGrantedRepositories)
	sec, err := b.Kube.CoreV1().Secrets(team).Get(ctx, secret, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, sec.Labels, tenancy.SecretLabel, "a server dry run leaves the Secret")

	out, err = scaler(enable...)
	require.NoError(t, err, out)
	assert.Equal(t, 3, strings.Count(out, "serverside-applied\n"), out)
	rb, err := b.Kube.RbacV1().RoleBindings(team).Get(ctx, tenantRole, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, tenantRole, rb.RoleRef.Name)
	nsObj, err = b.Kube.CoreV1().Namespaces().Get(ctx, team, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "privileged", nsObj.Labels[tenancy.LabelEnforce])
	assert.Equal(t, "true", nsObj.Labels["gitea.bpg.pw/e2e"], "the namespace's other labels stay")
	assert.Equal(t, fx.Spec.Org, nsObj.Annotations[tenancy.AnnotationGrantedRepositories])
	assert.Equal(t, e2e.GiteaURL, nsObj.Annotations[tenancy.AnnotationGrantedGiteaURLs])
	sec, err = b.Kube.CoreV1().Secrets(team).Get(ctx, secret, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "true", sec.Labels[tenancy.SecretLabel])
	assert.Equal(t, "registration", sec.Annotations[tenancy.AnnotationRegistrationKeys])
	assert.Equal(t, "api", sec.Annotations[tenancy.AnnotationMintKeys])
	assert.Equal(t, fx.APIToken, string(sec.Data["api"]), "the Secret's data stay its owner's")

	out, err = checkGroup("-f", manifestFile)
	t.Logf("check-group after:\n%s", out)
	require.NoError(t, err, "nothing is missing: exit 0\n%s", out)
	assert.Contains(t, out, "missing: 0")
	assert.Contains(t, out, "ok       Gitea")

	b.CreateGroup(ctx, t, team, rg.Name, rg.Labels, rg.Spec)
	keys, wf := e2e.NumberedJobs("enable", 1, label)
	e2e.PushJobs(ctx, t, b, fx, "ci.yml", keys, wf...)
	t.Cleanup(func() { b.Release(t, keys...) })
	b.ExpectServed(ctx, t, team, rg.Name, fx.Repo, keys, dump)

	out, err = checkGroup(team + "/" + rg.Name)
	require.NoError(t, err, out)
	assert.Contains(t, out, "ok       last pass", "a group a pass served shows its last pass")
}
