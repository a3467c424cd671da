package scaler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerconfig"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// withGrace gives the group's runner pods a grace period of seconds.
func withGrace(seconds int64) func(*v1alpha1.RunnerGroup) {
	return func(rg *v1alpha1.RunnerGroup) {
		rg.Spec.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To(seconds)}}
	}
}

// shutdownTimeoutOf is the runner.shutdown_timeout that the runner of j
// reads when its pod starts: the key of the runner config ConfigMap its
// config volume mounts, read from the ConfigMap as it is now. ok is false
// when the pod could not mount it (no ConfigMap, no such key).
func shutdownTimeoutOf(t *testing.T, e *env, j *batchv1.Job) (timeout string, ok bool) {
	t.Helper()
	var src *corev1.ConfigMapVolumeSource
	for _, v := range j.Spec.Template.Spec.Volumes {
		if v.Name == runnerjob.ConfigVolume {
			src = v.ConfigMap
		}
	}
	require.NotNil(t, src, "Job %s mounts no runner config", j.Name)
	require.Len(t, src.Items, 1)
	assert.Equal(t, runnerjob.ConfigKey, src.Items[0].Path, "the runner reads the file CONFIG_FILE names")
	cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), src.Name, metav1.GetOptions{})
	if err != nil {
		return "", false
	}
	raw, ok := cm.Data[src.Items[0].Key]
	if !ok {
		return "", false
	}
	var cfg struct {
		Runner struct {
			ShutdownTimeout string `yaml:"shutdown_timeout"`
		} `yaml:"runner"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(raw), &cfg))
	return cfg.Runner.ShutdownTimeout, true
}

// ownShutdownTimeout is the shutdown_timeout made for j's own pod.
func ownShutdownTimeout(j *batchv1.Job) string {
	return runnerconfig.ShutdownTimeout(runnerjob.Grace(&j.Spec.Template)).String()
}

// TestEachRunnerReadsTheShutdownTimeoutOfItsOwnGrace: whatever happens to
// the group after its runner Job is made (its grace lowered or raised, its
// runner config ConfigMap deleted by hand), a pod of that Job that starts
// or restarts later reads the shutdown_timeout made from its own pod's
// grace, so a drain neither cancels a job its pod would let finish nor
// outlives the grace. What no live Job mounts goes.
func TestEachRunnerReadsTheShutdownTimeoutOfItsOwnGrace(t *testing.T) {
	tests := []struct {
		name          string
		before, after int64
	}{
		{"grace lowered", 3600, 600},
		{"grace raised", 600, 3600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, newGroup("ci", 5, withGrace(tt.before)))
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}
			e.pass()
			require.Len(t, e.jobs(), 1)
			old := e.jobs()[0]

			e.editGroupSpec("ci", withGrace(tt.after))
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest"), queued(8, "ubuntu-latest")}}
			e.pass()
			require.Len(t, e.jobs(), 2)

			check := func(when string) {
				t.Helper()
				for _, j := range e.jobs() {
					got, ok := shutdownTimeoutOf(t, e, &j)
					require.True(t, ok, "%s: the pod of %s cannot mount its runner config", when, j.Name)
					assert.Equal(t, ownShutdownTimeout(&j), got, "%s: %s", when, j.Name)
				}
			}
			check("after the grace changed")
			assert.NotEqual(t, ownShutdownTimeout(&e.jobs()[0]), ownShutdownTimeout(&e.jobs()[1]))

			// Deleted by hand while both runners live: the next pass,
			// which creates nothing, puts it back for both.
			require.NoError(t, e.kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), runnerjob.ConfigMapName("ci"), metav1.DeleteOptions{}))
			e.pass()
			require.Len(t, e.jobs(), 2)
			check("after the ConfigMap was deleted by hand")

			// The old Job goes: what only it mounted goes with it; what
			// the live one mounts stays.
			require.NoError(t, e.kube.BatchV1().Jobs(ns).Delete(context.Background(), old.Name, metav1.DeleteOptions{}))
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(8, "ubuntu-latest"), queued(9, "ubuntu-latest")}}
			e.pass()
			require.Len(t, e.jobs(), 2)
			check("after the old Job went")
			cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), runnerjob.ConfigMapName("ci"), metav1.GetOptions{})
			require.NoError(t, err)
			assert.Len(t, cm.Data, 1, "one grace left, one config: %v", keysOf(cm.Data))
		})
	}
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestTwoPassesRacingForTheRunnerConfigBothKeepTheirGrace: two passes,
// each with its own view of the group's grace, write the runner config at
// once. The one that loses the race for the ConfigMap's resourceVersion
// reads it again and writes once more: the config of each pass's runner
// Job is there.
func TestTwoPassesRacingForTheRunnerConfigBothKeepTheirGrace(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5, withGrace(600)))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}
	e.pass()
	require.Len(t, e.jobs(), 1)

	// The other pass saw the group with another grace, and made its
	// runner Job with it; its write lands between this pass's read of
	// the ConfigMap and its update.
	other := newGroup("ci", 5, withGrace(1800))
	other.UID = e.group("ci").UID
	raced := false
	e.kube.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		cm := a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap)
		if cm.Name != runnerjob.ConfigMapName("ci") || raced {
			return false, nil, nil
		}
		raced = true
		// Straight to the tracker: the fake clientset is locked while
		// its reactors run.
		grace := 1800 * time.Second
		rendered, err := runnerjob.ConfigFor(other, runnerjob.Options{}, grace)
		require.NoError(t, err)
		cur, err := e.kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("configmaps"), ns, cm.Name)
		require.NoError(t, err)
		theirs := cur.(*corev1.ConfigMap).DeepCopy()
		theirs.Data[runnerjob.ConfigKeyFor(grace)] = string(rendered)
		e.cms.write(t, e.kube, theirs)
		j, err := runnerjob.Build(other, "ci-other", 9, e.scaler().cfg.Runner)
		require.NoError(t, err)
		require.NoError(t, e.kube.Tracker().Add(j))
		return false, nil, nil
	})
	e.editGroupSpec("ci", withGrace(300))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest"), queued(8, "ubuntu-latest")}}
	e.pass()
	require.True(t, raced, "the other pass wrote in between")
	require.Len(t, e.jobs(), 3)
	for _, j := range e.jobs() {
		got, ok := shutdownTimeoutOf(t, e, &j)
		require.True(t, ok, "the pod of %s cannot mount its runner config", j.Name)
		assert.Equal(t, ownShutdownTimeout(&j), got, j.Name)
	}
}

// TestTheRunnerConfigOfAJobTheViewMissesStays: a loop's watch cache may
// not list yet a runner Job made a moment ago (by this loop's last pass, or
// by another pass). The config that Job mounts is removed only when a fresh
// list of the group's Jobs confirms that none mounts it.
func TestTheRunnerConfigOfAJobTheViewMissesStays(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5, withGrace(600)))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}
	e.pass()
	require.Len(t, e.jobs(), 1)
	young := e.jobs()[0]

	e.editGroupSpec("ci", withGrace(300))
	s := e.scaler()
	g := &groupRun{rg: e.group("ci"), log: s.log}
	// The view lists no runner Job: the one above is too young for it.
	require.NoError(t, s.ensureRunnerConfig(context.Background(), g, nil))

	got, ok := shutdownTimeoutOf(t, e, &young)
	require.True(t, ok, "the config of a Job the view missed was removed")
	assert.Equal(t, ownShutdownTimeout(&young), got)
}
