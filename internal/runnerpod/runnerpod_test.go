package runnerpod

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The statuses below are shaped as the bed's real kubelet (1.34) wrote them
// for a runner pod whose image the registry does not have.
func TestStarted(t *testing.T) {
	const missing = "127.0.0.1:25000/e2e/runner:missing"
	pullFailed := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason:  "ErrImagePull",
		Message: "failed to pull and unpack image \"" + missing + "\": not found",
	}}
	backOff := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason:  "ImagePullBackOff",
		Message: "Back-off pulling image \"" + missing + "\"",
	}}
	initializing := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	scheduled := []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}

	tests := []struct {
		name        string
		status      corev1.PodStatus
		wantStarted bool
		wantReason  string
		wantMessage string
	}{
		{
			name:        "the runner's image cannot be pulled",
			status:      corev1.PodStatus{Phase: corev1.PodPending, Conditions: scheduled, ContainerStatuses: []corev1.ContainerStatus{{Name: "runner", Image: missing, State: pullFailed}}},
			wantReason:  "ErrImagePull",
			wantMessage: pullFailed.Waiting.Message,
		},
		{
			name:        "the kubelet backs off pulling it",
			status:      corev1.PodStatus{Phase: corev1.PodPending, Conditions: scheduled, ContainerStatuses: []corev1.ContainerStatus{{Name: "runner", Image: missing, State: backOff}}},
			wantReason:  "ImagePullBackOff",
			wantMessage: backOff.Waiting.Message,
		},
		{
			// The kubelet shows the runner waiting on PodInitializing: the
			// reason is the init container's.
			name: "an init container's image cannot be pulled",
			status: corev1.PodStatus{
				Phase: corev1.PodPending, Conditions: scheduled,
				InitContainerStatuses: []corev1.ContainerStatus{{Name: "runner-config", Image: missing, State: backOff}},
				ContainerStatuses:     []corev1.ContainerStatus{{Name: "runner", State: initializing}},
			},
			wantReason:  "ImagePullBackOff",
			wantMessage: backOff.Waiting.Message,
		},
		{
			name: "a sidecar's image cannot be pulled while the runner runs",
			status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: scheduled, ContainerStatuses: []corev1.ContainerStatus{
				{Name: "runner", State: running}, {Name: "cache-proxy", State: backOff},
			}},
			wantStarted: true,
		},
		{
			name: "not scheduled",
			status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"},
			}},
			wantReason:  "Unschedulable",
			wantMessage: "0/3 nodes are available",
		},
		{
			name:        "scheduled, nothing reported yet",
			status:      corev1.PodStatus{Phase: corev1.PodPending, Conditions: scheduled},
			wantReason:  "Pending",
			wantMessage: "pod runner-1 has not started",
		},
		{
			name:        "ended",
			status:      corev1.PodStatus{Phase: corev1.PodSucceeded},
			wantStarted: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "runner-1"}, Status: tt.status}
			started, reason, message := Started(p)
			assert.Equal(t, tt.wantStarted, started)
			assert.Equal(t, tt.wantReason, reason)
			assert.Equal(t, tt.wantMessage, message)
		})
	}
}
