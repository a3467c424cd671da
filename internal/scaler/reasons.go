package scaler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/owned"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reason"
)

// ownedObjectError is the group's failure to keep an object it owns (what
// names it in the message): notOwned, saying why, when an object of the
// name is another's; a Kubernetes error when the API server refused a read
// or write; the error as it is otherwise (the object's content could not
// be made).
func ownedObjectError(err error, notOwned, what, why string) error {
	var req *owned.RequestError
	switch {
	case errors.Is(err, owned.ErrNotOwned):
		return reason.Errorf(notOwned, "%s: %v, %s", what, err, why)
	case errors.As(err, &req):
		return reason.Errorf(v1alpha1.ReasonKubernetesError, "%s: %w", what, err)
	}
	return err
}

// failure is the reason and message a failed group shows (package reason
// carries it on the error). A group whose deadline passed shows
// GroupTimeout, unless Gitea was what it waited for: GiteaTimeout says
// where to look. ctx is the group's context: client-go
// does not always wrap its deadline (its rate limiter words its own), so
// the context, not the error, tells a timeout.
func failure(ctx context.Context, timeout time.Duration, err error) (why, message string) {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = outOfTime(timeout, err)
	}
	return reason.Of(err), boundMessage(err)
}

// outOfTime is err as the failure of a group whose deadline passed.
func outOfTime(timeout time.Duration, err error) error {
	if r := reason.Of(err); r == v1alpha1.ReasonGiteaTimeout || r == v1alpha1.ReasonGroupTimeout {
		return err
	}
	return reason.Errorf(v1alpha1.ReasonGroupTimeout, "not done within the group timeout of %s: %w", timeout, err)
}

// Bounds of the messages a group's conditions and events carry. The CRD
// refuses a condition message over 32,768 characters, and with it the
// whole status patch; a message joining every failed runner Job could grow
// past that.
const (
	// maxMessageRunes bounds a whole message.
	maxMessageRunes = 1024
	// maxCauses are shown of an error with several; the rest are counted.
	maxCauses = 3
	// maxCauseRunes bounds each cause shown, so the count still fits.
	maxCauseRunes = 256
)

// boundMessage is err's text, at most maxMessageRunes long. Of an error with
// several causes (one %w per runner Job that failed, errors.Join) it keeps
// the first maxCauses, each shortened, and counts the rest: "…; and 37
// more".
func boundMessage(err error) string {
	full := err.Error()
	var multi interface{ Unwrap() []error }
	if errors.As(err, &multi) {
		if causes := multi.Unwrap(); len(causes) > maxCauses {
			full = firstCauses(full, causes)
		}
	}
	return cutRunes(full, maxMessageRunes)
}

// firstCauses rewrites full, the text of an error with these causes, to
// show only the first maxCauses of them. The text before the first cause
// and after the last is kept; full is returned as is when the causes cannot
// be found in it.
func firstCauses(full string, causes []error) string {
	first := causes[0].Error()
	last := causes[len(causes)-1].Error()
	start := strings.Index(full, first)
	end := strings.LastIndex(full, last)
	if start < 0 || end < start {
		return full
	}
	sep := "; "
	if i := start + len(first); i < len(full) && full[i] == '\n' {
		sep = "\n" // errors.Join
	}
	shown := make([]string, maxCauses)
	for i, c := range causes[:maxCauses] {
		shown[i] = cutRunes(c.Error(), maxCauseRunes)
	}
	return fmt.Sprintf("%s%s; and %d more%s", full[:start], strings.Join(shown, sep), len(causes)-maxCauses, full[end+len(last):])
}

// cutRunes shortens s to at most n runes, the last being "…" when it cut.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// giteaReason maps a failed Gitea listing to its reason.
func giteaReason(err error) string {
	switch {
	case errors.Is(err, gitea.ErrUnauthorized):
		return v1alpha1.ReasonGiteaUnauthorized
	case errors.Is(err, gitea.ErrForbidden):
		return v1alpha1.ReasonGiteaForbidden
	case errors.Is(err, gitea.ErrUnsupportedVersion):
		return v1alpha1.ReasonGiteaVersionUnsupported
	case errors.Is(err, gitea.ErrUnsupportedServer):
		return v1alpha1.ReasonForgejoNotSupported
	case errors.Is(err, gitea.ErrNotFound):
		return v1alpha1.ReasonGiteaNotFound
	case errors.Is(err, gitea.ErrTimeout):
		return v1alpha1.ReasonGiteaTimeout
	case errors.Is(err, gitea.ErrBadResponse):
		return v1alpha1.ReasonGiteaBadResponse
	case errors.Is(err, gitea.ErrURLNotAllowed):
		return v1alpha1.ReasonGiteaURLNotAllowed
	default:
		return v1alpha1.ReasonGiteaUnavailable
	}
}
