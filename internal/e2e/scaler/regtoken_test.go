//go:build e2e

package scaler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// TestRegistrationTokenIsMintedOnTheRealGitea: a group without
// spec.registrationToken gets the org's registration token minted by the
// scaler (with the group's API token) into a Secret the group owns; the
// scaler registers the runner with it, and the runner runs the job holding
// only its own credentials.
func TestRegistrationTokenIsMintedOnTheRealGitea(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 5*time.Minute)
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "mint", Max: 1, MintToken: true})
	require.Nil(t, s.RG.Spec.RegistrationToken, "admitted without spec.registrationToken")

	key := e2e.JobKey("mint")
	e2e.PushJobs(ctx, t, b, s.Fx, "ci.yml", nil, e2e.WfJob{Key: key, RunsOn: []string{s.Label}})
	jobs := b.Gitea.WaitJobs(ctx, t, s.Fx.Repo, 1)
	got := b.ExpectCompleted(ctx, t, s.NS, s.Group, s.Fx.Repo, e2e.IDsOf(jobs, key), s.Dump)

	// The scaler registered the runner with the minted token: the pod
	// holds only its runner's own .runner, never the token.
	c := got[key].Claim.Spec.Template.Spec.Containers[0]
	_, ok := e2e.EnvOf(c, "GITEA_RUNNER_REGISTRATION_TOKEN")
	require.False(t, ok, "the runner pod gets no registration token")
	require.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: runnerjob.StateVolume, MountPath: runnerjob.StatePath, SubPath: runnerjob.StateKey, ReadOnly: true})
	name := v1alpha1.MintedRegistrationTokenSecret(s.Group)

	sec, err := b.Kube.CoreV1().Secrets(s.NS).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	minted := string(sec.Data[v1alpha1.MintedRegistrationTokenKey])
	e2e.Secrets.Add(minted)
	ref := metav1.GetControllerOf(sec)
	require.NotNil(t, ref, "the minted Secret is owned by its group")
	assert.Equal(t, s.RG.UID, ref.UID)
	assert.Equal(t, v1alpha1.Kind, ref.Kind)
	// Gitea's active org token is the one the scaler minted.
	assert.Equal(t, b.Gitea.RegistrationToken(ctx, t, b.Gitea.Admin, giteasetup.OrgRunners(s.Fx.Spec.Org)), minted)

	rg, err := b.Group(ctx, s.NS, s.Group)
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
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 6*time.Minute)
	ns := b.Namespace(ctx, t, "e2e-mint-scopes", nil)
	b.HelmInstall(ctx, t, ns, "gro", e2e.DeploymentValues(ns))
	g := b.Gitea

	cases := []struct {
		scope        v1alpha1.Scope
		scalerScopes []string
	}{
		{scope: v1alpha1.ScopeRepo, scalerScopes: []string{"write:repository"}},
		{scope: v1alpha1.ScopeUser, scalerScopes: []string{"read:repository", "write:user"}},
	}
	for _, tc := range cases {
		t.Run(string(tc.scope), func(t *testing.T) {
			e2e.ParallelSub(t)
			// A context of its own: a parallel subtest may wait minutes for
			// a free slot in the full suite, past its parent's deadline.
			ctx := e2e.TestContext(t, 6*time.Minute)
			fx := b.NewUserScope(ctx, t, e2e.Uniq("e2e-mint-"+string(tc.scope)), tc.scalerScopes...)
			runners := giteasetup.UserRunners()
			if tc.scope == v1alpha1.ScopeRepo {
				fx.Spec = v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeRepo, User: fx.Spec.User, Repo: fx.Repo.Name}
				runners = giteasetup.RepoRunners(fx.Repo)
			}
			group := "mint-" + string(tc.scope)
			label := e2e.Uniq("e2e-mint-" + string(tc.scope))
			secret := e2e.GroupSecret(group)
			b.TokenSecret(ctx, t, ns, secret, "", fx.APIToken)
			spec := b.GroupSpec(fx, secret, 1, label)
			spec.RegistrationToken = nil
			b.CreateGroup(ctx, t, ns, group, nil, spec)

			key := e2e.JobKey("mint", string(tc.scope))
			g.PushWorkflow(ctx, t, fx.PushAs, fx.Repo, "ci.yml", e2e.Workflow(e2e.WfJob{Key: key, RunsOn: []string{label}}))
			dump := func() string { return b.DumpNamespaces(ns) + g.JobsLine(fx.Repo) }
			b.ExpectCompleted(ctx, t, ns, group, fx.Repo, e2e.IDsOf(g.WaitJobs(ctx, t, fx.Repo, 1), key), dump)

			sec, err := b.Kube.CoreV1().Secrets(ns).Get(ctx, v1alpha1.MintedRegistrationTokenSecret(group), metav1.GetOptions{})
			require.NoError(t, err)
			minted := string(sec.Data[v1alpha1.MintedRegistrationTokenKey])
			e2e.Secrets.Add(minted)
			assert.Equal(t, g.RegistrationToken(ctx, t, fx.PushAs, runners), minted, "the scope's active registration token")
		})
	}
}
