package scaler

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// Condition types on a RunnerGroup.
const (
	// ConditionReady is True when the last pass served the group without error.
	ConditionReady = "Ready"
	// ConditionScalingActive is False when the group cannot start runners:
	// paused, or at its maxActiveRunners while jobs wait.
	ConditionScalingActive = "ScalingActive"
)

// Condition and event reasons.
const (
	ReasonReconciled        = "Reconciled"
	ReasonInvalidSpec       = "InvalidSpec"
	ReasonSecretNotFound    = "SecretNotFound"
	ReasonSecretKeyMissing  = "SecretKeyMissing"
	ReasonGiteaUnauthorized = "GiteaUnauthorized"
	ReasonGiteaForbidden    = "GiteaForbidden"
	ReasonGiteaNotFound     = "GiteaNotFound"
	ReasonGiteaTimeout      = "GiteaTimeout"
	ReasonGiteaBadResponse  = "GiteaBadResponse"
	ReasonGiteaUnavailable  = "GiteaUnavailable"
	ReasonKubernetesError   = "KubernetesError"
	ReasonStateConflict     = "StateConflict"
	ReasonStateNotOwned     = "StateNotOwned"
	ReasonStateRebuilt      = "StateRebuilt"
	ReasonJobCreateFailed   = "RunnerJobCreateFailed"
	ReasonRunnerCreated     = "RunnerJobCreated"
	ReasonScaling           = "Scaling"
	ReasonPaused            = "Paused"
	ReasonAtCapacity        = "AtCapacity"
)

// event records a core/v1 Event on the RunnerGroup. It is written directly
// rather than through client-go's broadcaster, whose asynchronous sink could
// drop the last events when a short-lived pass exits. Failures are logged
// and otherwise ignored: an event is a courtesy, the status is the record.
// Messages are built from object names and errors only, never secret values.
func (s *Scaler) event(ctx context.Context, rg *v1alpha1.RunnerGroup, typ, reason, message string) {
	if s.Config.DryRun {
		return
	}
	now := metav1.NewTime(s.Now())
	host, _ := os.Hostname()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: rg.Name + ".", Namespace: rg.Namespace},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind,
			Namespace: rg.Namespace, Name: rg.Name, UID: rg.UID, ResourceVersion: rg.ResourceVersion,
		},
		Type: typ, Reason: reason, Message: truncate(message, 1024),
		Source:         corev1.EventSource{Component: v1alpha1.FieldManager},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: v1alpha1.ReportingController, ReportingInstance: host,
	}
	if _, err := s.Kube.CoreV1().Events(rg.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		s.Log.Warn("cannot record event", "runnergroup", rg.Namespace+"/"+rg.Name, "reason", reason, "error", err)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s…", s[:n])
}
