//go:build e2e

// Runners the scaler registers: no registration token anywhere a job can
// reach, proved with Gitea's real runner.

package runners

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// scanStep is a job step that reads all it can reach of every process it
// can see: its environment, its command line and the files in its working
// directory under 1 MiB, symlinks followed (in KiB: find rounds a size up
// to its unit, so -1M would pick only empty files). The runner's daemon
// works in its data dir, where its .runner is a file on a real node and a
// link to the projected Secret on the bed's agent, so the runner's own
// credentials are among what it reads wherever the pod runs. It cuts all of it into alphanumeric words
// of 20 to 100 characters and writes each word's SHA-256 to out: the test
// compares digests, so no token is written or printed anywhere. Reads it
// may not make fail quietly (the runner's shell stops at the first
// failure).
func scanStep(out string) string {
	return fmt.Sprintf(`    steps:
      - run: |
          set +e +o pipefail
          {
            for p in /proc/[0-9]*; do
              cat "$p/environ" 2>/dev/null; echo
              cat "$p/cmdline" 2>/dev/null; echo
            done
            for p in /proc/[0-9]*; do readlink "$p/cwd" 2>/dev/null; done | sort -u |
              while read -r d; do find -L "$d" -maxdepth 1 -type f -size -1024k -exec cat {} + 2>/dev/null; done
          } | tr -c 'A-Za-z0-9' '\n' | grep -E '^.{20,100}$' | sort -u |
            while read -r w; do printf %%s "$w" | sha256sum | cut -d' ' -f1; done > '%[1]s.part'
          mv '%[1]s.part' '%[1]s'
`, out)
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestScalerRegisteredRunnerHoldsNoRegistrationToken: with the chart's
// defaults (the scaler registers runners), the runner pod's environment and
// the Secrets and ConfigMaps it mounts hold no registration token; its
// runner, Gitea's real one from the default image's release, takes its job,
// exits and its registration is gone; and the job itself, reading every
// process environment, command line and working directory it can reach,
// finds its runner's own token (the scan reaches the runner's data) but not
// the scope's registration token.
func TestScalerRegisteredRunnerHoldsNoRegistrationToken(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 6*time.Minute)
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "ownreg", Max: 1, Values: e2e.DeploymentValues()})
	regToken := s.Fx.RegToken
	require.NotEmpty(t, regToken)

	key := e2e.JobKey("scan")
	found := filepath.Join(e2e.HoldDir, "scan-"+s.Label)
	t.Cleanup(func() { _ = os.Remove(found) })
	wf := fmt.Sprintf("name: e2e\non: [push]\njobs:\n  %s:\n    runs-on: [%s]\n%s", key, s.Label, scanStep(found))
	b.Gitea.PushWorkflow(ctx, t, s.Fx.PushAs, s.Fx.Repo, "scan.yml", wf)
	jobs := b.Gitea.WaitJobs(ctx, t, s.Fx.Repo, 1)
	got := b.ExpectCompleted(ctx, t, s.NS, s.Group, s.Fx.Repo, e2e.IDsOf(jobs, key), s.Dump)
	job := got[key].Runner

	// What the pod is given: no registration token in its env, in what its
	// env refers to, or in any Secret or ConfigMap it mounts.
	pods, err := b.Kube.CoreV1().Pods(s.NS).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1, s.Dump())
	pod := pods.Items[0]
	given := map[string]string{}
	for _, c := range pod.Spec.Containers {
		for _, e := range c.Env {
			assert.NotEqual(t, "GITEA_RUNNER_REGISTRATION_TOKEN", e.Name)
			given["env "+e.Name] = e.Value
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				sec, err := b.Kube.CoreV1().Secrets(s.NS).Get(ctx, e.ValueFrom.SecretKeyRef.Name, metav1.GetOptions{})
				require.NoError(t, err)
				given["env "+e.Name+" from Secret"] = string(sec.Data[e.ValueFrom.SecretKeyRef.Key])
			}
		}
	}
	var ownToken string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil:
			sec, err := b.Kube.CoreV1().Secrets(s.NS).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			require.NoError(t, err)
			for k, d := range sec.Data {
				given["Secret "+sec.Name+" "+k] = string(d)
			}
			if v.Name == runnerjob.StateVolume {
				var state struct{ Token string }
				require.NoError(t, json.Unmarshal(sec.Data[runnerjob.StateKey], &state))
				ownToken = state.Token
			}
		case v.ConfigMap != nil:
			cm, err := b.Kube.CoreV1().ConfigMaps(s.NS).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			require.NoError(t, err)
			for k, d := range cm.Data {
				given["ConfigMap "+cm.Name+" "+k] = d
			}
		}
	}
	require.NotEmpty(t, ownToken, "the pod mounts its own .runner")
	for where, v := range given {
		assert.False(t, strings.Contains(v, regToken), "%s holds the registration token", where)
	}

	// The runner exits with its job done, and Gitea forgets it.
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the runner Job succeeded and its registration is gone", s.Dump, func(ctx context.Context) (bool, string, error) {
		j, err := b.Kube.BatchV1().Jobs(s.NS).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		regs := b.OrgRunners(ctx, t, s.Fx.Spec.Org)
		_, registered := regs[job.Annotations[v1alpha1.AnnotationRunnerName]]
		return j.Status.Succeeded == 1 && !registered, fmt.Sprintf("succeeded %d, registered %v", j.Status.Succeeded, registered), nil
	})

	// What the job could reach.
	f, err := os.Open(found)
	require.NoError(t, err, "the job's scan left no result")
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		seen[sc.Text()] = true
	}
	require.NoError(t, sc.Err())
	assert.True(t, seen[digest(ownToken)], "the scan finds its runner's own token in the data dir, so it reads what it should")
	assert.False(t, seen[digest(regToken)], "a job reached the registration token")
}

// TestAPlatformThatPinsSelfRegistrationStillServesJobs: with
// scaler.runnerSelfRegistration on (a runner image whose entrypoint must
// register), the pod gets the registration token by secretKeyRef, no state
// Secret, and its runner registers itself and takes its job.
func TestAPlatformThatPinsSelfRegistrationStillServesJobs(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 6*time.Minute)
	values := e2e.DeploymentValues()
	values["scaler"].(map[string]any)["runnerSelfRegistration"] = true
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "selfreg", Max: 1, Values: values})

	key := e2e.JobKey("self")
	e2e.PushJobs(ctx, t, b, s.Fx, "self.yml", nil, e2e.WfJob{Key: key, RunsOn: []string{s.Label}})
	jobs := b.Gitea.WaitJobs(ctx, t, s.Fx.Repo, 1)
	got := b.ExpectCompleted(ctx, t, s.NS, s.Group, s.Fx.Repo, e2e.IDsOf(jobs, key), s.Dump)
	job := got[key].Runner

	c := job.Spec.Template.Spec.Containers[0]
	reg, ok := e2e.EnvOf(c, "GITEA_RUNNER_REGISTRATION_TOKEN")
	require.True(t, ok, "a self-registering runner gets the registration token")
	require.NotNil(t, reg.ValueFrom)
	require.NotNil(t, reg.ValueFrom.SecretKeyRef, "by reference, never as a value")
	for _, v := range job.Spec.Template.Spec.Volumes {
		assert.NotEqual(t, runnerjob.StateVolume, v.Name, "a self-registering runner makes its own .runner")
	}
	_, err := b.Kube.CoreV1().Secrets(s.NS).Get(ctx, runnerjob.StateSecretName(job.Name), metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "no state Secret for a self-registering runner: %v", err)
}
