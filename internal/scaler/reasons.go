package scaler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
)

// Condition and event reasons. A failed group's Ready condition and Warning
// event carry the reason of its groupError.
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
	ReasonGroupTimeout      = "GroupTimeout"
	ReasonStateConflict     = "StateConflict"
	ReasonStateNotOwned     = "StateNotOwned"
	ReasonStateRebuilt      = "StateRebuilt"
	ReasonJobCreateFailed   = "RunnerJobCreateFailed"
	ReasonRunnerCreated     = "RunnerJobCreated"
	ReasonScaling           = "Scaling"
	ReasonPaused            = "Paused"
	ReasonAtCapacity        = "AtCapacity"
)

// groupError is a failure of one group, with the condition reason it shows.
// It unwraps to its cause, so errors.Is(err, context.Canceled) still works.
type groupError struct {
	reason string
	err    error
}

func (e *groupError) Error() string { return e.err.Error() }
func (e *groupError) Unwrap() error { return e.err }

// newGroupError builds a groupError whose message is formatted like
// fmt.Errorf's; wrap the cause with %w.
func newGroupError(reason string, format string, args ...any) *groupError {
	return &groupError{reason: reason, err: fmt.Errorf(format, args...)}
}

// reasonOf is the reason a group's failure shows. Every step fails with a
// groupError; anything else counts as a Kubernetes error.
func reasonOf(err error) string {
	var ge *groupError
	if errors.As(err, &ge) {
		return ge.reason
	}
	return ReasonKubernetesError
}

// failure is the reason and message a failed group shows. A group whose
// deadline passed shows GroupTimeout, unless Gitea was what it waited for:
// GiteaTimeout says where to look. ctx is the group's context: client-go
// does not always wrap its deadline (its rate limiter words its own), so
// the context, not the error, tells a timeout.
func failure(ctx context.Context, timeout time.Duration, err error) (reason, message string) {
	reason, message = reasonOf(err), err.Error()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && reason != ReasonGiteaTimeout {
		reason = ReasonGroupTimeout
		message = fmt.Sprintf("not done within the group timeout of %s: %s", timeout, message)
	}
	return reason, message
}

// giteaReason maps a failed Gitea listing to its reason.
func giteaReason(err error) string {
	switch {
	case errors.Is(err, gitea.ErrUnauthorized):
		return ReasonGiteaUnauthorized
	case errors.Is(err, gitea.ErrForbidden):
		return ReasonGiteaForbidden
	case errors.Is(err, gitea.ErrNotFound):
		return ReasonGiteaNotFound
	case errors.Is(err, gitea.ErrTimeout):
		return ReasonGiteaTimeout
	case errors.Is(err, gitea.ErrBadResponse):
		return ReasonGiteaBadResponse
	default:
		return ReasonGiteaUnavailable
	}
}
