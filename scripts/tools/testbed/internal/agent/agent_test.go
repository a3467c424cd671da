package agent

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// fakeScaler stands in for the scaler binary; MODE picks its behaviour. Its HOME is
// the container's directory, which survives restarts, so "flaky" can count runs.
const fakeScaler = `#!/bin/sh
echo "argv: $*"
case "$MODE" in
ok) exit 0 ;;
fail) exit 3 ;;
flaky)
  n=$(cat "$HOME/runs" 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" >"$HOME/runs"
  [ "$n" -ge 2 ] && exit 0; exit 1 ;;
sleep) trap 'echo got TERM; exit 0' TERM; while :; do sleep 0.05; done ;;
esac
exit 9
`

// syncBuffer collects the agent's log for a failing test's output.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type harness struct {
	t      *testing.T
	client *fake.Clientset
	logDir string
	cancel context.CancelFunc
	done   chan struct{}
}

func startAgent(t *testing.T) *harness {
	t.Helper()
	dir := t.TempDir()
	var logs syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	})
	scaler := filepath.Join(dir, "scaler")
	require.NoError(t, os.WriteFile(scaler, []byte(fakeScaler), 0o755))
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "fake-1", Labels: map[string]string{"testbed.gitea.bpg.pw/fake-node": "true"},
	}})
	// The fake clientset has no resource versions: an object created between the
	// informer's list and its watch is never seen. Tests create pods only once the
	// agent watches them.
	watching := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("pods", func(clienttesting.Action) (bool, watch.Interface, error) {
		once.Do(func() { close(watching) })
		return false, nil, nil
	})
	h := &harness{t: t, client: client, logDir: filepath.Join(dir, "logs"), done: make(chan struct{})}
	a, err := New(Config{
		Client: client, NodeSelector: "testbed.gitea.bpg.pw/fake-node=true", APIServer: "https://127.0.0.1:1",
		ScalerBin: scaler, SteeredRunnerBin: "/nonexistent/runner", LogDir: h.logDir, WorkDir: filepath.Join(dir, "work"),
		BackoffBase: 20 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		defer close(h.done)
		assert.NoError(t, a.Run(ctx))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(30 * time.Second):
			t.Error("agent did not stop")
		}
	})
	select {
	case <-watching:
		time.Sleep(50 * time.Millisecond)
	case <-time.After(10 * time.Second):
		t.Fatal("the agent never watched pods")
	}
	return h
}

func scalerPod(name string, policy corev1.RestartPolicy, mode string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: corev1.PodSpec{
			NodeName:                     "fake-1",
			RestartPolicy:                policy,
			AutomountServiceAccountToken: ptr(false),
			Containers: []corev1.Container{
				{
					Name: "scaler", Image: "ghcr.io/gitea-runner-operator/gitea-runner-scaler:dev",
					Command: []string{"gitea-runner-scaler"}, Args: []string{"run", "--namespace=$(POD_NS)"},
					Env: []corev1.EnvVar{
						{Name: "MODE", Value: mode},
						{Name: "POD_NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
					},
				},
				{Name: "sidecar", Image: "busybox:1.36"},
			},
		},
	}
}

func (h *harness) create(pod *corev1.Pod) {
	h.t.Helper()
	pod.UID = types.UID("uid-" + pod.Name)
	_, err := h.client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(h.t, err)
}

func (h *harness) get(name string) *corev1.Pod {
	p, err := h.client.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

func (h *harness) waitPhase(name string, phase corev1.PodPhase) *corev1.Pod {
	h.t.Helper()
	var pod *corev1.Pod
	require.Eventually(h.t, func() bool {
		pod = h.get(name)
		return pod != nil && pod.Status.Phase == phase
	}, 15*time.Second, 20*time.Millisecond, "pod %s never reached %s", name, phase)
	return pod
}

func status(pod *corev1.Pod, container string) corev1.ContainerStatus {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == container {
			return s
		}
	}
	return corev1.ContainerStatus{}
}

func TestPodPhaseFollowsProcesses(t *testing.T) {
	tests := map[string]struct {
		policy       corev1.RestartPolicy
		mode         string
		phase        corev1.PodPhase
		exitCode     int32
		restartCount int32
	}{
		"success ends the pod":             {corev1.RestartPolicyNever, "ok", corev1.PodSucceeded, 0, 0},
		"failure with Never fails the pod": {corev1.RestartPolicyNever, "fail", corev1.PodFailed, 3, 0},
		"OnFailure restarts until success": {corev1.RestartPolicyOnFailure, "flaky", corev1.PodSucceeded, 0, 1},
		"missing behaviour exits non-zero": {corev1.RestartPolicyNever, "", corev1.PodFailed, 9, 0},
	}
	h := startAgent(t)
	i := 0
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			i++
			podName := "p" + string(rune('a'+i))
			h.create(scalerPod(podName, tc.policy, tc.mode))
			pod := h.waitPhase(podName, tc.phase)

			main := status(pod, "scaler")
			require.NotNil(t, main.State.Terminated, "scaler status: %+v", main)
			assert.Equal(t, tc.exitCode, main.State.Terminated.ExitCode)
			assert.Equal(t, tc.restartCount, main.RestartCount)
			assert.Equal(t, PodIP, pod.Status.PodIP)
			if tc.restartCount > 0 {
				assert.NotNil(t, main.LastTerminationState.Terminated, "a restarted container keeps its last termination")
			}
			side := status(pod, "sidecar")
			require.NotNil(t, side.State.Terminated, "the stand-in ends with the main container")
			assert.Zero(t, side.State.Terminated.ExitCode)

			logs, err := os.ReadFile(filepath.Join(h.logDir, "ns_"+podName+"_scaler.log"))
			require.NoError(t, err)
			assert.Contains(t, string(logs), "argv: run --namespace=ns", "command, args and $(VAR) reach the process")
		})
	}
}

func TestDeletedPodIsStoppedAndRemoved(t *testing.T) {
	h := startAgent(t)
	h.create(scalerPod("del", corev1.RestartPolicyNever, "sleep"))
	pod := h.waitPhase("del", corev1.PodRunning)
	require.Eventually(t, func() bool {
		p := h.get("del")
		return p != nil && status(p, "scaler").State.Running != nil && status(p, "scaler").Ready
	}, 10*time.Second, 20*time.Millisecond)

	// The fake clientset removes objects at once on delete; mark the pod as an API
	// server does for a graceful delete instead.
	now := metav1.Now()
	pod.DeletionTimestamp = &now
	pod.DeletionGracePeriodSeconds = ptr(int64(5))
	_, err := h.client.CoreV1().Pods("ns").Update(context.Background(), pod, metav1.UpdateOptions{})
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		_, err := h.client.CoreV1().Pods("ns").Get(context.Background(), "del", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 10*time.Second, 20*time.Millisecond, "the agent removes a deleted pod once its processes are gone")
	logs, err := os.ReadFile(filepath.Join(h.logDir, "ns_del_scaler.log"))
	require.NoError(t, err)
	assert.Contains(t, string(logs), "got TERM", "the process gets SIGTERM first")
}

func TestStandInExitsAfterAnnotation(t *testing.T) {
	h := startAgent(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "standin", Namespace: "ns", Annotations: map[string]string{
			AnnotationExitAfter: "100ms", AnnotationExitCode: "4",
		}},
		Spec: corev1.PodSpec{
			NodeName: "fake-1", RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: ptr(false),
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
			Containers:     []corev1.Container{{Name: "app", Image: "busybox"}},
		},
	}
	h.create(pod)
	got := h.waitPhase("standin", corev1.PodFailed)
	assert.Equal(t, int32(4), status(got, "app").State.Terminated.ExitCode)
	require.Len(t, got.Status.InitContainerStatuses, 1)
	assert.Zero(t, got.Status.InitContainerStatuses[0].State.Terminated.ExitCode)
}

func TestMissingSecretWaitsThenRuns(t *testing.T) {
	h := startAgent(t)
	pod := scalerPod("needs-secret", corev1.RestartPolicyNever, "ok")
	pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "later"}, Key: "k"},
	}})
	h.create(pod)
	require.Eventually(t, func() bool {
		p := h.get("needs-secret")
		w := status(p, "scaler").State.Waiting
		return w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, `"later"`)
	}, 10*time.Second, 20*time.Millisecond)

	_, err := h.client.CoreV1().Secrets("ns").Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "later", Namespace: "ns"}, Data: map[string][]byte{"k": []byte("v")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	h.waitPhase("needs-secret", corev1.PodSucceeded)
}

func TestPodsRunningBeforeTheAgentStarted(t *testing.T) {
	tests := map[string]struct {
		policy   corev1.RestartPolicy
		phase    corev1.PodPhase
		restarts int32
	}{
		"restartable pods get their containers back": {corev1.RestartPolicyOnFailure, corev1.PodSucceeded, 3},
		"pods that may not restart fail":             {corev1.RestartPolicyNever, corev1.PodFailed, 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := startAgent(t)
			pod := scalerPod("old", tc.policy, "ok")
			pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "scaler", RestartCount: 2}}}
			h.create(pod)
			got := h.waitPhase("old", tc.phase)
			assert.Equal(t, tc.restarts, status(got, "scaler").RestartCount)
		})
	}
}
