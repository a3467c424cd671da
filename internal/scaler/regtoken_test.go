package scaler

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

const mintedToken = "m1nted-REGISTRATION-t0ken-abc"

func minting(rg *v1alpha1.RunnerGroup) { rg.Spec.RegistrationToken = nil }

func (e *env) mintedSecret(group string) (*corev1.Secret, error) {
	return e.kube.CoreV1().Secrets(ns).Get(e.t.(*testing.T).Context(), group+"-registration-token", metav1.GetOptions{})
}

func readyReason(e *env, group string) string {
	c := meta.FindStatusCondition(e.group(group).Status.Conditions, v1alpha1.ConditionReady)
	if c == nil {
		return ""
	}
	return c.Reason
}

func at(d time.Duration) setup {
	return func(deps *Deps, _ *Config) { deps.Now = func() time.Time { return t0.Add(d) } }
}

func TestAGroupWithoutRegistrationTokenGetsOneMintedIntoItsOwnSecret(t *testing.T) {
	e := newEnv(t, newGroup("ci", 2, minting))
	e.gitea.regToken = mintedToken
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}

	e.pass()

	sec, err := e.mintedSecret("ci")
	require.NoError(t, err)
	assert.Equal(t, mintedToken, string(sec.Data["token"]))
	require.Len(t, sec.OwnerReferences, 1)
	assert.EqualValues(t, "uid-ci", sec.OwnerReferences[0].UID, "deleted with its group")
	assert.True(t, *sec.OwnerReferences[0].Controller)
	assert.Equal(t, "ci", sec.Labels[v1alpha1.LabelRunnerGroupName])
	assert.Equal(t, []scope.Place{scope.New("https://gitea.example.com", gitea.ScopeOrg, "acme", "")}, e.gitea.seen[:1], "minted for the group's scope")
	assert.Equal(t, []string{secretToken}, e.tokens, "with the group's own API token")

	jobs := e.jobs()
	require.Len(t, jobs, 1)
	for _, c := range jobs[0].Spec.Template.Spec.Containers {
		for _, env := range c.Env {
			assert.NotContains(t, env.Value, mintedToken, "never in the Job spec")
			if env.Name == "GITEA_RUNNER_REGISTRATION_TOKEN" {
				require.NotNil(t, env.ValueFrom)
				assert.Equal(t, "ci-registration-token", env.ValueFrom.SecretKeyRef.Name)
				assert.Equal(t, "token", env.ValueFrom.SecretKeyRef.Key)
			}
		}
	}
	assert.NotContains(t, e.logs.String(), mintedToken)
	for _, c := range e.group("ci").Status.Conditions {
		assert.NotContains(t, c.Message, mintedToken)
	}
}

func TestAMintedTokenIsAskedForAgainOnlyWhenTheRecheckIsDue(t *testing.T) {
	tests := []struct {
		name      string
		later     time.Duration
		giteaNow  string
		wantMints int
		wantToken string
	}{
		{name: "within the recheck interval: no request", later: RegistrationTokenRecheck / 2, giteaNow: "reset-in-gitea", wantMints: 1, wantToken: mintedToken},
		{name: "after it, unchanged: the same Secret", later: RegistrationTokenRecheck + time.Minute, giteaNow: mintedToken, wantMints: 2, wantToken: mintedToken},
		{name: "after it, reset in Gitea: replaced", later: RegistrationTokenRecheck + time.Minute, giteaNow: "reset-in-gitea", wantMints: 2, wantToken: "reset-in-gitea"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, newGroup("ci", 2, minting))
			e.gitea.regToken = mintedToken
			e.pass(at(0))
			e.gitea.regToken = tt.giteaNow

			e.pass(at(tt.later))

			assert.Equal(t, tt.wantMints, e.gitea.mints)
			sec, err := e.mintedSecret("ci")
			require.NoError(t, err)
			assert.Equal(t, tt.wantToken, string(sec.Data["token"]))
			assert.Len(t, sec.Data, 1)
			assert.Equal(t, v1alpha1.ReasonReconciled, readyReason(e, "ci"))
		})
	}
}

func TestAnEmptyMintedSecretIsMintedAgainAtOnce(t *testing.T) {
	e := newEnv(t, newGroup("ci", 2, minting))
	e.gitea.regToken = mintedToken
	e.pass(at(0))
	sec, err := e.mintedSecret("ci")
	require.NoError(t, err)
	sec.Data = nil
	_, err = e.kube.CoreV1().Secrets(ns).Update(t.Context(), sec, metav1.UpdateOptions{})
	require.NoError(t, err)

	e.pass(at(time.Minute))

	assert.Equal(t, 2, e.gitea.mints)
	sec, err = e.mintedSecret("ci")
	require.NoError(t, err)
	assert.Equal(t, mintedToken, string(sec.Data["token"]))
}

func TestASecretTheGroupDoesNotOwnIsNeverTouched(t *testing.T) {
	tests := map[string][]metav1.OwnerReference{
		"no owner":                      nil,
		"another object's":              {{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "uid-other"}},
		"an earlier group of that name": {{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind, Name: "ci", UID: "uid-old"}},
	}
	for name, owners := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, newGroup("ci", 2, minting))
			e.gitea.regToken = mintedToken
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
			theirs := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "ci-registration-token", Namespace: ns, OwnerReferences: owners},
				Data:       map[string][]byte{"token": []byte("theirs")},
			}
			_, err := e.kube.CoreV1().Secrets(ns).Create(t.Context(), theirs, metav1.CreateOptions{})
			require.NoError(t, err)

			e.pass()

			assert.Equal(t, v1alpha1.ReasonRegistrationTokenNotOwned, readyReason(e, "ci"))
			c := meta.FindStatusCondition(e.group("ci").Status.Conditions, v1alpha1.ConditionReady)
			assert.Contains(t, c.Message, "Secret runners/ci-registration-token exists and is not owned by this RunnerGroup")
			assert.Contains(t, c.Message, "set spec.registrationToken")
			sec, err := e.mintedSecret("ci")
			require.NoError(t, err)
			assert.Equal(t, "theirs", string(sec.Data["token"]))
			assert.Zero(t, e.gitea.mints)
			assert.Empty(t, e.jobs())
		})
	}
}

func TestAFailedMintShowsWhyAndWritesNothing(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		reason string
	}{
		{"the API token may not", &gitea.APIError{Method: "POST", Kind: gitea.ErrForbidden, Status: 403, URL: "/api/v1/orgs/acme/actions/runners/registration-token"}, v1alpha1.ReasonGiteaForbidden},
		{"a user scope with another user's token", fmt.Errorf("gitea: cannot mint: %w", gitea.ErrWrongUser), v1alpha1.ReasonGiteaForbidden},
		{"Gitea is down", errors.New("dial tcp: connection refused"), v1alpha1.ReasonGiteaUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, newGroup("ci", 2, minting))
			e.gitea.regErr = tt.err
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}

			e.pass()

			assert.Equal(t, tt.reason, readyReason(e, "ci"))
			c := meta.FindStatusCondition(e.group("ci").Status.Conditions, v1alpha1.ConditionReady)
			assert.Contains(t, c.Message, "registration token: cannot mint one for org acme with spec.authToken")
			_, err := e.mintedSecret("ci")
			assert.True(t, apierrors.IsNotFound(err))
			assert.Empty(t, e.jobs(), "no runner without a token")
		})
	}
}

func TestDryRunMintsNothing(t *testing.T) {
	e := newEnv(t, newGroup("ci", 2, minting))
	e.gitea.regToken = mintedToken
	e.pass(func(_ *Deps, c *Config) { c.DryRun = true })
	assert.Zero(t, e.gitea.mints)
	_, err := e.mintedSecret("ci")
	assert.True(t, apierrors.IsNotFound(err))
}

func TestAGroupWithARegistrationTokenMintsNothing(t *testing.T) {
	e := newEnv(t, newGroup("ci", 2))
	e.gitea.regToken = mintedToken
	e.pass()
	assert.Zero(t, e.gitea.mints)
	_, err := e.mintedSecret("ci")
	assert.True(t, apierrors.IsNotFound(err))
}
