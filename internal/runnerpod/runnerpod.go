// Package runnerpod says whether a runner Job's pod started, and if not,
// why, in the words Kubernetes gave: the pass records it on the group and
// the why command shows it for a job's runner.
package runnerpod

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Started says whether a pod has run, and if not, why: its PodScheduled
// condition when it was not scheduled (Unschedulable), else a waiting
// container's reason (ErrImagePull, ImagePullBackOff,
// CreateContainerConfigError). Init containers come first: while one
// waits, the kubelet shows every other container waiting on
// PodInitializing, which says nothing a user can act on.
func Started(p *corev1.Pod) (started bool, reason, message string) {
	if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return true, "", ""
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running != nil || c.State.Terminated != nil || c.LastTerminationState.Terminated != nil {
			return true, "", ""
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return false, c.Reason, c.Message
		}
	}
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, c := range statuses {
			if w := c.State.Waiting; w != nil && w.Reason != "" {
				return false, w.Reason, w.Message
			}
		}
	}
	return false, "Pending", fmt.Sprintf("pod %s has not started", p.Name)
}

// FailedCreate is the newest FailedCreate event of a Job that has no pod:
// the Job controller's words for what refused the pod (Pod Security
// Admission, a ResourceQuota).
func FailedCreate(ctx context.Context, kube kubernetes.Interface, j *batchv1.Job) (reason, message string) {
	reason, message = "NoPod", "the Job controller created no pod"
	list, err := kube.CoreV1().Events(j.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(j.UID) + ",reason=FailedCreate"})
	if err != nil {
		return reason, message + fmt.Sprintf(" (its events cannot be read: %v)", err)
	}
	var newest time.Time
	for _, ev := range list.Items {
		t := ev.LastTimestamp.Time
		if t.IsZero() {
			t = ev.EventTime.Time
		}
		if ev.InvolvedObject.UID == j.UID && ev.Reason == "FailedCreate" && !t.Before(newest) {
			newest, reason, message = t, ev.Reason, ev.Message
		}
	}
	return reason, message
}
