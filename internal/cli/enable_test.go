package cli

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"
)

func parseEnable(t *testing.T, args ...string) (*EnableNamespaceCmd, error) {
	t.Helper()
	c, err := parseCLI(t, append([]string{"enable-namespace"}, args...)...)
	return &c.EnableNamespace, err
}

var enableNames = []string{"--tenant-cluster-role", "gro-tenant", "--service-account", "gitea-runners:gro"}

// One command does the five acts of enabling a namespace, and touches
// nothing else of the objects it changes: the Namespace's other labels and
// the Secret's tokens stay.
func TestEnableNamespaceAppliesEveryStepAndNothingElse(t *testing.T) {
	kube := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"team": "a"}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tokens", Namespace: "team-a"}, Data: map[string][]byte{"registration": []byte("r"), "api": []byte("a")}},
	)
	c, err := parseEnable(t, append([]string{"team-a", "--grant-gitea-url", "https://gitea.example.com", "--grant-repository", "acme", "--grant-repository", "contoso/tools",
		"--token-secret", "tokens", "--registration-token-key", "registration", "--api-token-key", "api"}, enableNames...)...)
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	require.Equal(t, ExitOK, c.runWith(context.Background(), kube, IO{Out: &out, Err: &errOut}), errOut.String())
	assert.Equal(t, "rolebinding.rbac.authorization.k8s.io/gro-tenant serverside-applied\nnamespace/team-a serverside-applied\nsecret/tokens serverside-applied\n", out.String())

	ctx := context.Background()
	rb, err := kube.RbacV1().RoleBindings("team-a").Get(ctx, "gro-tenant", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "gro-tenant", rb.RoleRef.Name)
	assert.Equal(t, "ClusterRole", rb.RoleRef.Kind)
	require.Len(t, rb.Subjects, 1)
	assert.Equal(t, "gitea-runners", rb.Subjects[0].Namespace)
	assert.Equal(t, "gro", rb.Subjects[0].Name)

	ns, err := kube.CoreV1().Namespaces().Get(ctx, "team-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"team": "a", "pod-security.kubernetes.io/enforce": "privileged"}, ns.Labels)
	assert.Equal(t, "https://gitea.example.com", ns.Annotations["gitea.bpg.pw/granted-gitea-urls"])
	assert.Equal(t, "acme,contoso/tools", ns.Annotations["gitea.bpg.pw/granted-repositories"])

	sec, err := kube.CoreV1().Secrets("team-a").Get(ctx, "tokens", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "true", sec.Labels["gitea.bpg.pw/runner-token"])
	assert.Equal(t, "registration", sec.Annotations["gitea.bpg.pw/registration-token-keys"])
	assert.Equal(t, "api", sec.Annotations["gitea.bpg.pw/api-token-keys"])
	assert.Equal(t, map[string][]byte{"registration": []byte("r"), "api": []byte("a")}, sec.Data, "the tokens stay the owner's")
}

// The token Secret must exist: applying would create an empty one.
func TestEnableNamespaceRefusesAMissingTokenSecret(t *testing.T) {
	kube := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}})
	c, err := parseEnable(t, append([]string{"team-a", "--token-secret", "tokens", "--registration-token-key", "registration"}, enableNames...)...)
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	assert.Equal(t, ExitFailed, c.runWith(context.Background(), kube, IO{Out: &out, Err: &errOut}))
	assert.Contains(t, errOut.String(), "Secret team-a/tokens: it does not exist: create it with the tokens first")
	_, err = kube.CoreV1().Secrets("team-a").Get(context.Background(), "tokens", metav1.GetOptions{})
	assert.Error(t, err, "no empty Secret made")
}

// --dry-run=client asks no cluster and prints what it would apply;
// --dry-run=server sends every apply as a dry run.
func TestEnableNamespaceDryRuns(t *testing.T) {
	c, err := parseEnable(t, append([]string{"team-a", "--dry-run", "client", "-o", "yaml", "--grant-repository", "acme"}, enableNames...)...)
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	require.Equal(t, ExitOK, c.runWith(context.Background(), nil, IO{Out: &out, Err: &errOut}), errOut.String())
	var list struct {
		Kind  string
		Items []map[string]any
	}
	require.NoError(t, yaml.Unmarshal(out.Bytes(), &list))
	assert.Equal(t, "List", list.Kind)
	require.Len(t, list.Items, 2)
	assert.Equal(t, "RoleBinding", list.Items[0]["kind"])
	assert.Equal(t, "Namespace", list.Items[1]["kind"])

	kube := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}})
	var dryRuns [][]string
	kube.PrependReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		dryRuns = append(dryRuns, a.(k8stesting.PatchActionImpl).PatchOptions.DryRun)
		return true, nil, nil
	})
	c, err = parseEnable(t, append([]string{"team-a", "--dry-run", "server"}, enableNames...)...)
	require.NoError(t, err)
	out.Reset()
	require.Equal(t, ExitOK, c.runWith(context.Background(), kube, IO{Out: &out, Err: &errOut}), errOut.String())
	assert.Equal(t, [][]string{{metav1.DryRunAll}, {metav1.DryRunAll}}, dryRuns)
}

func TestEnableNamespaceRefusesBadFlagsAtParse(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{append([]string{"Team_A"}, enableNames...), `namespace "Team_A"`},
		{[]string{"team-a", "--service-account", "gitea-runners:gro"}, "--tenant-cluster-role is required"},
		{[]string{"team-a", "--tenant-cluster-role", "x", "--service-account", "nocolon"}, "--service-account must be namespace:name"},
		{append([]string{"team-a", "--pod-security", "lax"}, enableNames...), "--pod-security"},
		{append([]string{"team-a", "--registration-token-key", "r"}, enableNames...), "the token key flags need --token-secret"},
		{append([]string{"team-a", "--token-secret", "s"}, enableNames...), "--token-secret needs the keys it holds"},
		{append([]string{"team-a", "--token-secret", "s", "--registration-token-key", "k", "--api-token-key", "k"}, enableNames...), `key "k" cannot be both`},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		assert.Equal(t, ExitUsage, Main(append([]string{"enable-namespace"}, tt.args...), IO{Out: &out, Err: &errOut}), tt.args)
		assert.Contains(t, errOut.String(), tt.want, tt.args)
	}
}

// A field another manager set (kubectl label, most often) is a conflict
// unless --force-conflicts, as for kubectl apply --server-side; the
// refusal says so.
func TestEnableNamespaceForcesConflictsOnlyWhenAsked(t *testing.T) {
	for _, force := range []bool{false, true} {
		kube := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}})
		var forced []bool
		kube.PrependReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			p := a.(k8stesting.PatchActionImpl)
			forced = append(forced, p.PatchOptions.Force != nil && *p.PatchOptions.Force)
			if p.GetResource().Resource == "namespaces" && !forced[len(forced)-1] {
				return true, nil, apierrors.NewApplyConflict([]metav1.StatusCause{{Type: metav1.CauseTypeFieldManagerConflict,
					Message: `conflict with "kubectl-label"`, Field: ".metadata.labels.pod-security.kubernetes.io/enforce"}}, `Apply failed with 1 conflict: conflict with "kubectl-label"`)
			}
			return true, nil, nil
		})
		args := append([]string{"team-a", "--grant-repository", "acme"}, enableNames...)
		if force {
			args = append(args, "--force-conflicts")
		}
		c, err := parseEnable(t, args...)
		require.NoError(t, err)
		var out, errOut bytes.Buffer
		code := c.runWith(context.Background(), kube, IO{Out: &out, Err: &errOut})
		if force {
			assert.Equal(t, ExitOK, code, errOut.String())
			assert.Equal(t, []bool{true, true}, forced)
			continue
		}
		assert.Equal(t, ExitFailed, code)
		assert.Contains(t, errOut.String(), `Namespace team-a: Apply failed with 1 conflict: conflict with "kubectl-label"; --force-conflicts sets these fields as asked`)
		assert.Equal(t, []bool{false, false}, forced, "the RoleBinding, then the Namespace, where it stops")
	}
}
