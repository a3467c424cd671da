// Package reason is a group's failure with the condition reason it shows
// (v1alpha1's Reason* constants): the pass records it on the group's
// conditions, and the why command reports it for a group it would not ask
// Gitea with, so both name a failure alike.
package reason

import (
	"errors"
	"fmt"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// Error is a failure of one group, with the condition reason it shows. It
// unwraps to its cause, so errors.Is(err, context.Canceled) still works.
type Error struct {
	reason string
	err    error
}

func (e *Error) Error() string { return e.err.Error() }
func (e *Error) Unwrap() error { return e.err }

// Errorf builds an Error whose message is formatted like fmt.Errorf's;
// wrap the cause with %w.
func Errorf(reason string, format string, args ...any) *Error {
	return &Error{reason: reason, err: fmt.Errorf(format, args...)}
}

// Of is the reason a group's failure shows. Every step of a pass fails
// with an Error; anything else counts as a Kubernetes error.
func Of(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.reason
	}
	return v1alpha1.ReasonKubernetesError
}
