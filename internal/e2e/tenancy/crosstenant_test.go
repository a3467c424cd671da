//go:build e2e

package tenancy

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
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStatusAndWhyShowAnotherNamespaceNothing (issue 19.3): `status` and
// `why` act with the caller's own Kubernetes rights, never the scaler's.
// A member of team B, who may read RunnerGroups and Secrets in B's
// namespace only, runs both against team A's namespace on the real API
// server: RBAC refuses, and nothing of A's group is printed; in B's own
// namespace the same kubeconfig works.
func TestStatusAndWhyShowAnotherNamespaceNothing(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 3*time.Minute)
	a := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "xview-a", Max: 1})
	nsB := b.Namespace(ctx, t, "e2e-xview-b", nil)

	const viewer = "viewer"
	_, err := b.Kube.CoreV1().ServiceAccounts(nsB).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: viewer}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = b.Kube.RbacV1().Roles(nsB).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: viewer},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"gitea.bpg.pw"}, Resources: []string{"runnergroups"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = b.Kube.RbacV1().RoleBindings(nsB).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: viewer},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: viewer},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: viewer, Namespace: nsB}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// The bed's kubeconfig, acting as B's viewer (the admin may
	// impersonate), as B's own kubeconfig would.
	asB := b.KubeconfigAs(t, nsB, viewer)

	bin := filepath.Join(b.Root, "bin", "gitea-runner-scaler")
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", asB)...)
		out, err := cmd.CombinedOutput()
		return e2e.Redact(string(out)), err
	}

	// The API server's authorizer learns of a new RoleBinding a moment
	// after it is made: B's first look may come before.
	e2e.Eventually(ctx, t, "B may look at its own namespace", func(ctx context.Context) (bool, error) {
		out, err := run("status", "-n", nsB)
		if err != nil {
			return false, fmt.Errorf("%w: %s", err, out)
		}
		return true, nil
	})

	// What each says: status names the namespace it may not list (and
	// with -A, cluster-wide, the API server's refusal); why finds no group
	// it may read.
	for _, tt := range []struct {
		args []string
		says string
	}{
		{[]string{"status", "-n", a.NS}, "cannot list the RunnerGroups of namespace " + a.NS},
		{[]string{"status", "-A"}, "is forbidden"},
		// Without -n, the kubeconfig context's namespace, as kubectl.
		{[]string{"status"}, "cannot list the RunnerGroups of namespace default"},
		{[]string{"why", "12345", "-n", a.NS, "--allowed-gitea-urls", e2e.GiteaURL, "--service-account", a.Sys + ":" + a.Rel.Fullname()}, "no selected RunnerGroup"},
	} {
		out, err := run(tt.args...)
		t.Logf("%v as B:\n%s", tt.args, out)
		assert.Error(t, err, "%v as B", tt.args)
		assert.Contains(t, out, tt.says, "%v", tt.args)
		assert.NotContains(t, out, a.Group, "%v: nothing of A's group", tt.args)
	}
}
