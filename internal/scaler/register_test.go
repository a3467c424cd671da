package scaler

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// A runner the scaler registered exists in Gitea before its pod starts
// (never in contact: offline). When its pod does not start in time, the
// lifecycle deletes the Job and the registration with it; a registration
// that Gitea shows in contact is a runner that started, and is kept.
func TestAnUnstartedRunnerTheScalerRegisteredGoesWithItsRegistration(t *testing.T) {
	tests := []struct {
		name       string
		online     bool
		wantDelete bool
	}{
		{name: "never in contact: deleted, and its registration", wantDelete: true},
		{name: "in contact since: it started, kept", online: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := newGroup("ci", 3)
			e, g, set := lifecycleEnv(t, rg)
			j := e.addRunner(rg, "ci-aaaaa", 1, 11*time.Minute, podPullError)
			g.register(runnerjob.RunnerNameOf(j), tt.online)
			runnerjob.MarkRegistered(j, g.nextID)
			_, err := e.kube.BatchV1().Jobs(ns).Update(context.Background(), j, metav1.UpdateOptions{})
			require.NoError(t, err)
			e.gitea.snap.Queued = []gitea.Job{queued(1, "ubuntu-latest")}

			e.pass(set)

			if !tt.wantDelete {
				assert.Equal(t, []string{"ci-aaaaa"}, jobNamesOf(e))
				assert.Equal(t, []string{runnerjob.RunnerNameOf(j)}, g.names())
				return
			}
			assert.Empty(t, jobNamesOf(e))
			assert.EqualValues(t, 1, e.group("ci").Status.StuckRunners)
			assert.Empty(t, g.names(), "its registration is removed with it")
		})
	}
}

// registeringGitea registers runners as Gitea's Register does: offline,
// in the group's place, with a token of the runner's own.
type registeringGitea struct {
	*runnersGitea
	err  error
	sent []string // the registration tokens it was sent
}

func (r *registeringGitea) RegisterRunner(_ context.Context, token string, nr gitea.NewRunner) (gitea.RunnerCredentials, error) {
	r.mu.Lock()
	r.sent = append(r.sent, token)
	r.mu.Unlock()
	if r.err != nil {
		return gitea.RunnerCredentials{}, r.err
	}
	r.register(nr.Name, false)
	return gitea.RunnerCredentials{ID: r.nextID, UUID: "uuid", Name: nr.Name, Token: "own-token-of-" + nr.Name,
		Address: "https://gitea.example.com", Labels: nr.Labels, Ephemeral: nr.Ephemeral}, nil
}

func TestTheScalerRegistersEachRunnerAndHandsItOnlyItsOwnCredentials(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		wantJob bool
	}{
		{name: "registered: a Job, and its credentials in a Secret it controls", wantJob: true},
		{name: "the token refused: no Job, the claim released", err: gitea.ErrUnauthorized},
		{name: "Gitea down: no Job, the claim released", err: gitea.ErrServer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := newGroup("ci", 3)
			e, g, set := lifecycleEnv(t, rg)
			reg := &registeringGitea{runnersGitea: g, err: tt.err}
			e.gitea.snap.Queued = []gitea.Job{queued(1, "ubuntu-latest")}

			sum := e.pass(set, func(d *Deps, c *Config) {
				d.Gitea = func(string, string) (gitea.Client, error) { return reg, nil }
				c.Runner.SelfRegistration = false
			})

			assert.Equal(t, []string{"reg-" + secretToken}, reg.sent, "registered once, with the group's registration token")
			jobs := e.jobs()
			if !tt.wantJob {
				assert.Equal(t, []string{"runners/ci"}, sum.Failed)
				ready := meta.FindStatusCondition(e.group("ci").Status.Conditions, v1alpha1.ConditionReady)
				require.NotNil(t, ready)
				assert.Equal(t, v1alpha1.ReasonJobCreateFailed, ready.Reason)
				assert.Contains(t, ready.Message, "runner Job for Gitea job 1: runner not registered: "+tt.err.Error())
				assert.NotContains(t, ready.Message, secretToken)
				assert.Empty(t, jobs)
				assert.Empty(t, e.claims("ci"), "the claim is released, so the next pass tries again")
				return
			}
			assert.Empty(t, sum.Failed)
			require.Len(t, jobs, 1)
			j := jobs[0]
			id, ok := runnerjob.RegisteredID(&j)
			require.True(t, ok, "the registration's ID is on the Job")
			assert.Equal(t, g.nextID, id)
			sec, err := e.kube.CoreV1().Secrets(ns).Get(context.Background(), runnerjob.StateSecretName(j.Name), metav1.GetOptions{})
			require.NoError(t, err)
			require.Len(t, sec.OwnerReferences, 1)
			assert.Equal(t, j.Name, sec.OwnerReferences[0].Name)
			assert.Contains(t, string(sec.Data[runnerjob.StateKey]), "own-token-of-"+runnerjob.RunnerNameOf(&j))
			raw, err := json.Marshal(j)
			require.NoError(t, err)
			assert.NotContains(t, string(raw), "reg-"+secretToken)
			assert.NotContains(t, string(raw), `"reg"`, "the registration token's Secret is not referenced")
		})
	}
}
