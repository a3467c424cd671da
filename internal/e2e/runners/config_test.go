//go:build e2e

package runners

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// TestGroupRunnerConfigReachesTheRunner is issue 20 item 3 for the runner
// config, with Gitea's real runner: a value set in spec.runnerConfig
// (runner.envs) is seen by a job's step; the config the runner reads is the
// one the scaler rendered into the group's ConfigMap, with shutdown_timeout
// following the runner pod's grace period and the install-wide defaults
// under the group's; and a value the scaler owns is refused at admission,
// naming the field.
func TestGroupRunnerConfigReachesTheRunner(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 6*time.Minute)
	proof := e2e.Uniq("rc-proof")
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "rconf", Max: 2, RunnerConfig: &v1alpha1.RunnerConfig{
		Runner: &v1alpha1.RunnerRunnerConfig{Envs: map[string]string{"RC_PROOF": proof}, Timeout: ptr.To("20m")},
	}})

	key := e2e.JobKey("rconf")
	seen := filepath.Join(e2e.HoldDir, "rconf-"+key)
	wf := fmt.Sprintf("name: e2e\non: [push]\njobs:\n  %s:\n    runs-on: [%s]\n    steps:\n      - run: printf '%%s' \"$RC_PROOF\" > '%s'\n", key, s.Label, seen)
	b.Gitea.PushWorkflow(ctx, t, s.Fx.PushAs, s.Fx.Repo, "rconf.yml", wf)
	id := e2e.IDsOf(b.Gitea.WaitJobs(ctx, t, s.Fx.Repo, 1), key)[key]
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the job done", s.Dump, func(ctx context.Context) (bool, string, error) {
		gj, err := b.GiteaJob(ctx, s.Fx.Repo, id)
		return err == nil && gj.State() == "completed/success", gj.State(), nil
	})
	got, err := os.ReadFile(seen)
	require.NoError(t, err, "the step wrote what it saw")
	assert.Equal(t, proof, string(got), "runner.envs of spec.runnerConfig reached the job's step")

	// The runner read the scaler's config: the group's values, the bed's
	// install-wide polling under them, and what the scaler owns.
	cm, err := b.Kube.CoreV1().ConfigMaps(s.NS).Get(ctx, runnerjob.ConfigMapName(s.Group), metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, cm.OwnerReferences, 1)
	assert.Equal(t, types.UID(s.RG.UID), cm.OwnerReferences[0].UID, "the group owns its runner config")
	var rendered map[string]map[string]any
	// The key of the runner pods' grace, the built-in one (issue 32.5).
	cfgKey := runnerjob.ConfigKeyFor(time.Duration(runnerjob.DefaultTerminationGracePeriodSeconds) * time.Second)
	require.NoError(t, yaml.Unmarshal([]byte(cm.Data[cfgKey]), &rendered))
	assert.Equal(t, map[string]any{
		"capacity": 1, "shutdown_timeout": "3h0m0s", "timeout": "20m",
		"fetch_interval": "500ms", "fetch_interval_max": "1s", "fetch_timeout": "30s",
		"envs": map[string]any{"RC_PROOF": proof},
	}, rendered["runner"], "the built-in grace is 3h and 120s: shutdown_timeout leaves 120s to cancel and report")
	assert.Equal(t, map[string]any{"enabled": false}, rendered["cache"])

	// What the scaler owns is refused at admission, by name.
	for field, cfg := range map[string]*v1alpha1.RunnerConfig{
		"spec.runnerConfig.runner.capacity must be 1":                      {Runner: &v1alpha1.RunnerRunnerConfig{Capacity: ptr.To[int32](2)}},
		"spec.runnerConfig.runner.shutdown_timeout is owned by the scaler": {Runner: &v1alpha1.RunnerRunnerConfig{ShutdownTimeout: ptr.To("1h")}},
	} {
		// The scaler's status patches move the group's resourceVersion
		// between the read and the update: a conflict is read again.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			rg, err := b.Group(ctx, s.NS, s.Group)
			require.NoError(t, err)
			rg.Spec.RunnerConfig = cfg
			obj, cerr := runtime.DefaultUnstructuredConverter.ToUnstructured(rg)
			require.NoError(t, cerr)
			_, err = b.Groups(s.NS).Update(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{})
			return err
		})
		require.Error(t, err, "admission refuses %s", field)
		assert.Contains(t, err.Error(), field)
	}
}
