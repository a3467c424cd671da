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

// TestRegistrationTokenIsMintedForRepoAndUserScopes: the README's table of
// the API token a minted registration token needs holds on the real Gitea
// for the scopes besides org: a repository owner's token with only
// write:repository mints the repository's token (with read:repository
// Gitea refuses, naming the scope it requires), and a user's own token
// with write:user (and read:repository, to list its jobs) mints the
// user's. Each minted token is the scope's active one, and a runner
// registered with it serves the group's job.
func TestRegistrationTokenIsMintedForRepoAndUserScopes(t *testing.T) {
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 6*time.Minute)
	ns := b.namespace(ctx, t, "e2e-mint-scopes", nil)
	b.helmInstall(ctx, t, ns, "gro", deploymentValues(ns))
	g := b.gitea

	cases := []struct {
		scope        v1alpha1.Scope
		scalerScopes []string
	}{
		{scope: v1alpha1.ScopeRepo, scalerScopes: []string{"write:repository"}},
		{scope: v1alpha1.ScopeUser, scalerScopes: []string{"read:repository", "write:user"}},
	}
	for _, tc := range cases {
		t.Run(string(tc.scope), func(t *testing.T) {
			t.Parallel()
			// A context of its own: a parallel subtest may wait minutes for
			// a free slot in the full suite, past its parent's deadline.
			ctx := testContext(t, 6*time.Minute)
			fx := b.newUserScope(ctx, t, uniq("e2e-mint-"+string(tc.scope)), tc.scalerScopes...)
			runners := giteasetup.UserRunners()
			if tc.scope == v1alpha1.ScopeRepo {
				fx.spec = v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeRepo, User: fx.spec.User, Repo: fx.repo.Name}
				runners = giteasetup.RepoRunners(fx.repo)
			}
			group := "mint-" + string(tc.scope)
			label := uniq("e2e-mint-" + string(tc.scope))
			secret := groupSecret(group)
			b.tokenSecret(ctx, t, ns, secret, "", fx.apiToken)
			spec := b.groupSpec(fx, secret, 1, label)
			spec.RegistrationToken = nil
			b.createGroup(ctx, t, ns, group, nil, spec)

			key := jobKey("mint", string(tc.scope))
			g.pushWorkflow(ctx, t, fx.pushAs, fx.repo, "ci.yml", workflow(wfJob{key: key, runsOn: []string{label}}))
			dump := func() string { return b.dumpNamespaces(ns) + g.jobsLine(fx.repo) }
			b.expectCompleted(ctx, t, ns, group, fx.repo, idsOf(g.waitJobs(ctx, t, fx.repo, 1), key), dump)

			sec, err := b.kube.CoreV1().Secrets(ns).Get(ctx, v1alpha1.MintedRegistrationTokenSecret(group), metav1.GetOptions{})
			require.NoError(t, err)
			minted := string(sec.Data[v1alpha1.MintedRegistrationTokenKey])
			secrets.add(minted)
			assert.Equal(t, g.registrationToken(ctx, t, fx.pushAs, runners), minted, "the scope's active registration token")
		})
	}
}
