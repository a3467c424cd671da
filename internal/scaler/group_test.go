package scaler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/assign"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reason"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

func TestOneSecretHoldingBothTokensIsReadOnce(t *testing.T) {
	e := newEnv(t, newGroup("ci", 1, func(rg *v1alpha1.RunnerGroup) {
		rg.Spec.RegistrationToken.SecretRef = v1alpha1.SecretRef{Name: "api", Key: "registration"}
	}))
	sec, err := e.kube.CoreV1().Secrets(ns).Get(context.Background(), "api", metav1.GetOptions{})
	require.NoError(t, err)
	sec.Data["registration"] = []byte("reg-" + secretToken)
	sec.Annotations[tenancy.AnnotationRegistrationKeys] = "registration"
	_, err = e.kube.CoreV1().Secrets(ns).Update(context.Background(), sec, metav1.UpdateOptions{})
	require.NoError(t, err)
	e.kube.ClearActions()

	e.pass()

	gets := 0
	for _, a := range e.kube.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "secrets" {
			gets++
		}
	}
	assert.Equal(t, 1, gets)
}

func TestSecretsNeverReachStatusEventsOrLogs(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	e.gitea.err = errors.New("dial tcp: connection refused")
	e.pass()
	st := e.group("ci").Status
	for _, c := range st.Conditions {
		assert.False(t, strings.Contains(c.Message, secretToken))
	}
	for _, j := range e.jobs() {
		for _, env := range j.Spec.Template.Spec.Containers[0].Env {
			assert.NotContains(t, env.Value, secretToken)
		}
	}
	assert.NotContains(t, e.logs.String(), secretToken)
}

// Each step wraps the cause of its failure, so a caller can tell a
// cancelled pass (SIGTERM, a deadline) from a broken group.
func TestGroupErrorsKeepTheirCause(t *testing.T) {
	cancelled := func(verb, resource string) func(*env) {
		return func(e *env) {
			e.kube.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, context.Canceled
			})
		}
	}
	tests := []struct {
		name       string
		breakIt    func(*env)
		wantReason string
	}{
		{name: "reading a Secret", breakIt: cancelled("get", "secrets"), wantReason: v1alpha1.ReasonKubernetesError},
		{name: "reading the state", breakIt: cancelled("get", "configmaps"), wantReason: v1alpha1.ReasonKubernetesError},
		{name: "listing runner Jobs", breakIt: cancelled("list", "jobs"), wantReason: v1alpha1.ReasonKubernetesError},
		{name: "asking Gitea", breakIt: func(e *env) { e.gitea.err = fmt.Errorf("gitea: GET /x: %w", context.Canceled) }, wantReason: v1alpha1.ReasonGiteaUnavailable},
		{name: "storing the claims", breakIt: cancelled("create", "configmaps"), wantReason: v1alpha1.ReasonKubernetesError},
		{name: "creating a runner Job", breakIt: cancelled("create", "jobs"), wantReason: v1alpha1.ReasonJobCreateFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := newGroup("ci", 5)
			e := newEnv(t, rg)
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
			tt.breakIt(e)

			_, err := e.scaler().passGroup(context.Background(), rg, assign.New(nil))

			require.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, tt.wantReason, reason.Of(err))
		})
	}
}
