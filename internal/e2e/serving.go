//go:build e2e

// Serving: the product's promise, one runner Job per queued Gitea job, checked
// against the group's runner Jobs and Gitea's view, with hold files that keep
// a job in progress until a test has seen it there.

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// Hold keeps the Gitea job with this workflow job key in progress once a
// runner takes it (the job's step waits while the file exists: jobSteps),
// until release (or the test's end) removes the file.
func (b *Testbed) Hold(t *testing.T, key string) {
	t.Helper()
	dir := filepath.Join(b.Dir, "hold")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	p := filepath.Join(dir, "name-"+key)
	require.NoError(t, os.WriteFile(p, nil, 0o644))
	t.Cleanup(func() { _ = os.Remove(p) })
}

func (b *Testbed) Release(t *testing.T, keys ...string) {
	t.Helper()
	for _, key := range keys {
		if err := os.Remove(filepath.Join(b.Dir, "hold", "name-"+key)); err != nil && !os.IsNotExist(err) {
			t.Fatalf("release hold %s: %v", key, err)
		}
	}
}

// Served is what one Gitea job got: the runner Job that claims it (labelled
// with its id) and the runner Job whose runner took it. Gitea hands a queued
// job to any idle runner of matching labels in scope, so when two runners of
// a group start together, each may take the other's job: the promise is one
// runner per job, not a fixed pairing.
type Served struct {
	Gitea  giteasetup.Job
	Claim  batchv1.Job
	Runner batchv1.Job
}

// servingState checks the promise for the Gitea jobs in ids against the
// group's runner Jobs: at most one runner Job claims each; a job taken by a
// runner is taken by one of the group's runner Jobs, each runner taking one
// job; and no job fails. It returns what each job got so far, whether every
// job has its claim and its runner, and a line describing the state.
func (b *Testbed) servingState(ctx context.Context, ns, group string, r giteasetup.Repo, ids map[string]int64) (map[string]Served, bool, string, error) {
	// Gitea first: a runner can take a job only once its Job exists, so
	// the runner Jobs read after Gitea's listing include every runner it
	// names. Read the other way round, a Job created between the two
	// reads, whose runner took a job at once, was taken for a stranger.
	gjobs, err := b.Gitea.RepoJobs(ctx, r)
	if err != nil {
		return nil, false, err.Error(), nil
	}
	jobs, err := b.RunnerJobs(ctx, ns, group)
	if err != nil {
		return nil, false, err.Error(), nil
	}
	current := map[int64]giteasetup.Job{}
	for _, j := range gjobs {
		current[j.ID] = j
	}
	// byName is keyed by the name each runner registered with in Gitea.
	byName := map[string]batchv1.Job{}
	for i, j := range jobs {
		byName[runnerjob.RunnerNameOf(&jobs[i])] = j
	}
	claims := ByGiteaJob(jobs)
	runners := map[string]string{}
	out := map[string]Served{}
	all := true
	var state []string
	for k, id := range ids {
		gj := current[id]
		cj := claims[id]
		state = append(state, fmt.Sprintf("%s#%d=%s runner=%q claimed-by=%v", k, id, gj.State(), gj.RunnerName, JobNames(cj)))
		if len(cj) > 1 {
			//lint:ignore ST1005 the message starts with a name, Gitea
			return nil, false, "", fmt.Errorf("Gitea job %s (#%d) has %d runner Jobs: %v", k, id, len(cj), JobNames(cj))
		}
		if gj.Status == "completed" && gj.Conclusion != "success" {
			//lint:ignore ST1005 the message starts with a name, Gitea
			return nil, false, "", fmt.Errorf("Gitea job %s (#%d) ended %s", k, id, gj.State())
		}
		if len(cj) == 1 && JobCondition(&cj[0], batchv1.JobFailed) {
			return nil, false, "", fmt.Errorf("runner Job %s claiming Gitea job %s failed", cj[0].Name, k)
		}
		if gj.RunnerName != "" {
			if _, ok := byName[gj.RunnerName]; !ok {
				//lint:ignore ST1005 the message starts with a name, Gitea
				return nil, false, "", fmt.Errorf("Gitea job %s (#%d) was taken by runner %q, which is none of %s's runner Jobs %v", k, id, gj.RunnerName, group, JobNames(jobs))
			}
			if other, dup := runners[gj.RunnerName]; dup {
				return nil, false, "", fmt.Errorf("runner %s took two Gitea jobs, %s and %s", gj.RunnerName, other, k)
			}
			runners[gj.RunnerName] = k
		}
		if len(cj) == 0 || gj.RunnerName == "" {
			all = false
			continue
		}
		out[k] = Served{Gitea: gj, Claim: cj[0], Runner: byName[gj.RunnerName]}
	}
	sort.Strings(state)
	return out, all, strings.Join(state, "; "), nil
}

func IDsOf(jobs map[string]giteasetup.Job, keys ...string) map[string]int64 {
	out := map[string]int64{}
	for _, k := range keys {
		out[k] = jobs[k].ID
	}
	return out
}

// ExpectServed proves, for the Gitea jobs with these keys, the product's
// main promise: each gets exactly one runner Job of the group; a runner of
// the group registers under its Job's name and takes the job (held
// in_progress until then); and once released, the job ends in success and
// the runner Job completes. The keys must have been held (b.hold) before the
// workflow was pushed.
func (b *Testbed) ExpectServed(ctx context.Context, t *testing.T, ns, group string, r giteasetup.Repo, keys []string, dump func() string) map[string]Served {
	t.Helper()
	ids := IDsOf(b.Gitea.WaitJobs(ctx, t, r, len(keys)), keys...)
	var out map[string]Served
	WaitUntil(ctx, t, StepWait, fmt.Sprintf("runners of %s taking each of %v in %s", group, keys, r), dump, func(ctx context.Context) (bool, string, error) {
		got, all, state, err := b.servingState(ctx, ns, group, r, ids)
		if err != nil || !all {
			return false, state, err
		}
		for _, s := range got {
			if s.Gitea.Status != "in_progress" {
				return false, state, nil
			}
		}
		out = got
		return true, state, nil
	})
	for _, k := range keys {
		checkRunnerJob(t, ns, group, out[k])
		t.Logf("Gitea job %s (#%d): claimed by runner Job %s, in progress on runner %s", k, out[k].Gitea.ID, out[k].Claim.Name, out[k].Runner.Name)
	}
	b.Release(t, keys...)
	return b.ExpectCompleted(ctx, t, ns, group, r, ids, dump)
}

// ExpectCompletedOnPool waits until every sample succeeded on a runner of
// the group, and fails when a job has two runner Jobs claiming it, when a
// runner outside the group took one or when one runner took two. It
// returns how many were taken by a runner that no job claimed (a warm
// runner).
func (b *Testbed) ExpectCompletedOnPool(ctx context.Context, t *testing.T, ns, group string, r giteasetup.Repo, ids map[string]int64, dump func() string) int {
	t.Helper()
	warm := 0
	WaitUntil(ctx, t, StepWait, fmt.Sprintf("Gitea jobs of %s succeeded on its runners", group), dump, func(ctx context.Context) (bool, string, error) {
		jobs, err := b.RunnerJobs(ctx, ns, group)
		if err != nil {
			return false, err.Error(), nil
		}
		gjobs, err := b.Gitea.RepoJobs(ctx, r)
		if err != nil {
			return false, err.Error(), nil
		}
		byName := map[string]batchv1.Job{}
		for i := range jobs {
			byName[runnerjob.RunnerNameOf(&jobs[i])] = jobs[i]
		}
		claims := ByGiteaJob(jobs)
		byID := map[int64]giteasetup.Job{}
		for _, gj := range gjobs {
			byID[gj.ID] = gj
		}
		took := map[string]string{}
		warm = 0
		done := 0
		for key, id := range ids {
			if n := len(claims[id]); n > 1 {
				return false, "", fmt.Errorf("job %s (#%d) in Gitea has %d runner Jobs: %v", key, id, n, JobNames(claims[id]))
			}
			gj := byID[id]
			if gj.Status == "completed" && gj.Conclusion != "success" {
				return false, "", fmt.Errorf("job %s (#%d) in Gitea ended %s", key, id, gj.State())
			}
			if gj.RunnerName == "" {
				continue
			}
			rj, ok := byName[gj.RunnerName]
			if !ok {
				return false, "", fmt.Errorf("job %s (#%d) in Gitea was taken by runner %q, none of %s's runner Jobs", key, id, gj.RunnerName, group)
			}
			if other, dup := took[gj.RunnerName]; dup {
				return false, "", fmt.Errorf("runner %s took two Gitea jobs, %s and %s", gj.RunnerName, other, key)
			}
			took[gj.RunnerName] = key
			if runnerjob.GiteaJobID(&rj) != id {
				warm++
			}
			if gj.State() == "completed/success" {
				done++
			}
		}
		return done == len(ids), fmt.Sprintf("%d of %d succeeded, %d on warm runners", done, len(ids), warm), nil
	})
	return warm
}

// ExpectCompleted waits until each Gitea job (by key) ended in success on a
// runner of the group, claimed by exactly one runner Job, and the runner
// Jobs involved are Complete. A broken promise fails the test at once.
func (b *Testbed) ExpectCompleted(ctx context.Context, t *testing.T, ns, group string, r giteasetup.Repo, ids map[string]int64, dump func() string) map[string]Served {
	t.Helper()
	var out map[string]Served
	WaitUntil(ctx, t, StepWait, fmt.Sprintf("Gitea jobs of %s in %s succeeded on its runners", group, r), dump, func(ctx context.Context) (bool, string, error) {
		got, all, state, err := b.servingState(ctx, ns, group, r, ids)
		if err != nil || !all {
			return false, state, err
		}
		for _, s := range got {
			if s.Gitea.State() != "completed/success" || !JobCondition(&s.Claim, batchv1.JobComplete) || !JobCondition(&s.Runner, batchv1.JobComplete) {
				return false, state, nil
			}
		}
		out = got
		return true, state, nil
	})
	return out
}

// checkRunnerJob checks a runner Job's shape as the README's "The runner
// Job" section gives it: named <group>-<5 characters>, labelled with its
// group, the manager and the Gitea job, controlled by the group, and one
// runner container that registers as an ephemeral runner under the Job's
// name, with the registration token from a Secret and the job's labels, in a
// pod autoscalers must not evict.
func checkRunnerJob(t *testing.T, ns, group string, s Served) {
	t.Helper()
	j := s.Claim
	require.Regexp(t, `^`+group+`-[bcdfghjklmnpqrstvwxz2456789]{5}$`, j.Name, "runner Job name")
	require.Equal(t, ns, j.Namespace)
	require.Equal(t, group, j.Labels[LabelGroup])
	require.Equal(t, "gitea-runner-operator", j.Labels[LabelManagedBy])
	require.Equal(t, strconv.FormatInt(s.Gitea.ID, 10), j.Labels[LabelGiteaJob])
	ref := metav1.GetControllerOf(&j)
	require.NotNil(t, ref, "runner Job %s has no controller", j.Name)
	require.Equal(t, v1alpha1.Kind, ref.Kind)
	require.Equal(t, group, ref.Name)
	pod := j.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	require.Equal(t, runnerContainer, c.Name)
	name, ok := EnvOf(c, "GITEA_RUNNER_NAME")
	require.True(t, ok)
	require.Equal(t, runnerjob.RunnerName(&v1alpha1.RunnerGroup{ObjectMeta: metav1.ObjectMeta{UID: ref.UID}}, j.Name), name.Value,
		"the runner registers with the Job's name and its group's owner tag")
	require.Equal(t, name.Value, j.Annotations[v1alpha1.AnnotationRunnerName])
	eph, _ := EnvOf(c, "GITEA_RUNNER_EPHEMERAL")
	require.Equal(t, "true", eph.Value)
	if reg, ok := EnvOf(c, "GITEA_RUNNER_REGISTRATION_TOKEN"); ok {
		require.Empty(t, reg.Value, "the registration token must come from a secretKeyRef, not a value")
		require.NotNil(t, reg.ValueFrom)
		require.NotNil(t, reg.ValueFrom.SecretKeyRef)
	} else {
		requireOwnState(t, j)
	}
	labels, _ := EnvOf(c, "GITEA_RUNNER_LABELS")
	for _, l := range s.Gitea.Labels {
		require.Contains(t, strings.Split(labels.Value, ","), l, "GITEA_RUNNER_LABELS %q lacks the job's label %q", labels.Value, l)
	}
	require.Equal(t, "false", j.Spec.Template.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"])
}

// requireOwnState checks that a runner the scaler registered reads its own
// .runner, read-only, from the Secret of its Job.
func requireOwnState(t *testing.T, j batchv1.Job) {
	t.Helper()
	pod := j.Spec.Template.Spec
	var state *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == runnerjob.StateVolume {
			state = &pod.Volumes[i]
		}
	}
	require.NotNil(t, state, "a runner without a registration token needs its state volume")
	require.NotNil(t, state.Secret)
	require.Equal(t, runnerjob.StateSecretName(j.Name), state.Secret.SecretName)
	require.Contains(t, pod.Containers[0].VolumeMounts, corev1.VolumeMount{
		Name: runnerjob.StateVolume, MountPath: runnerjob.StatePath, SubPath: runnerjob.StateKey, ReadOnly: true})
}

// WaitServed waits until a pass has served the group (it asked Gitea for
// the group's jobs: status.lastCheckTime): only then does the assignment
// rule count it as able to serve (a group no listener has served keeps no
// job), so a test of which group gets a job pushes the job after this.
func (b *Testbed) WaitServed(ctx context.Context, t *testing.T, ns, name string, dump func() string) {
	t.Helper()
	WaitUntil(ctx, t, StepWait, fmt.Sprintf("group %s/%s served", ns, name), dump, func(ctx context.Context) (bool, string, error) {
		rg, err := b.Group(ctx, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return rg.Status.LastCheckTime != nil, StatusLine(rg), nil
	})
}
