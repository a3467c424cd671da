//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
)

// TestRegistrationTokenIsMintedOnTheRealGitea: a group without
// spec.registrationToken gets the org's registration token minted by the
// scaler (with the group's API token) into a Secret the group owns, and its
// runner registers with it from the secretKeyRef and runs the job.
func TestRegistrationTokenIsMintedOnTheRealGitea(t *testing.T) {
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 5*time.Minute)
	s := b.servedGroup(ctx, t, sceneOpts{name: "mint", max: 1, mintToken: true})
	require.Nil(t, s.rg.Spec.RegistrationToken, "admitted without spec.registrationToken")

	key := jobKey("mint")
	pushJobs(ctx, t, b, s.fx, "ci.yml", nil, wfJob{key: key, runsOn: []string{s.label}})
	jobs := b.gitea.waitJobs(ctx, t, s.fx.repo, 1)
	got := b.expectCompleted(ctx, t, s.ns, s.group, s.fx.repo, idsOf(jobs, key), s.dump)

	// The runner Job read the token only through the minted Secret.
	c := got[key].claim.Spec.Template.Spec.Containers[0]
	reg, ok := envOf(c, "GITEA_RUNNER_REGISTRATION_TOKEN")
	require.True(t, ok)
	require.Empty(t, reg.Value)
	require.NotNil(t, reg.ValueFrom)
	require.NotNil(t, reg.ValueFrom.SecretKeyRef)
	name := v1alpha1.MintedRegistrationTokenSecret(s.group)
	assert.Equal(t, name, reg.ValueFrom.SecretKeyRef.Name)
	assert.Equal(t, v1alpha1.MintedRegistrationTokenKey, reg.ValueFrom.SecretKeyRef.Key)

	sec, err := b.kube.CoreV1().Secrets(s.ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	minted := string(sec.Data[v1alpha1.MintedRegistrationTokenKey])
	secrets.add(minted)
	ref := metav1.GetControllerOf(sec)
	require.NotNil(t, ref, "the minted Secret is owned by its group")
	assert.Equal(t, s.rg.UID, ref.UID)
	assert.Equal(t, v1alpha1.Kind, ref.Kind)
	// Gitea's active org token is the one the scaler minted.
	assert.Equal(t, b.gitea.registrationToken(ctx, t, b.gitea.admin, giteasetup.OrgRunners(s.fx.spec.Org)), minted)

	rg, err := b.group(ctx, s.ns, s.group)
	require.NoError(t, err)
	for _, cond := range rg.Status.Conditions {
		assert.NotContains(t, cond.Message, minted)
	}
}
