package gitea

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	sdk "code.gitea.io/sdk/gitea"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/giteaurl"
)

// Error kinds. Every error from a request to Gitea is an *APIError whose
// Kind is one of these, so callers can write
// errors.Is(err, gitea.ErrUnauthorized).
var (
	// ErrUnauthorized: Gitea answered 401 (bad, expired or revoked token).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden: Gitea answered 403 (e.g. a non-admin token on the
	// global scope).
	ErrForbidden = errors.New("forbidden")
	// ErrNotFound: Gitea answered 404 (unknown org, user or repository).
	ErrNotFound = errors.New("not found")
	// ErrUnsupportedVersion: an Actions request failed and Gitea says it
	// is older than MinVersion, which has no such route.
	ErrUnsupportedVersion = errors.New("unsupported Gitea version")
	// ErrUnsupportedServer: an Actions request failed and the server says
	// it is Forgejo (a version with "+gitea-"), whose Actions API differs.
	ErrUnsupportedServer = errors.New("unsupported server: Forgejo")
	// ErrServer: Gitea answered 5xx or another status we do not expect, or
	// the request failed before any answer (connection refused, DNS).
	ErrServer = errors.New("server error")
	// ErrTimeout: no complete answer within the per-request timeout or the
	// caller's deadline.
	ErrTimeout = errors.New("timeout")
	// ErrBadResponse: Gitea answered 400 (we sent something it rejects, e.g.
	// an unknown status) or a 2xx body we cannot decode.
	ErrBadResponse = errors.New("bad response")
	// ErrURLNotAllowed: the request was stopped before it left, by the
	// allowed Gitea URLs (package giteaurl): a redirect elsewhere, or a
	// host that resolved to a loopback, link-local or metadata address.
	ErrURLNotAllowed = errors.New("not an allowed Gitea URL")
)

// APIError is a failed request to Gitea.
type APIError struct {
	// Method is the request's method; empty means GET.
	Method string
	// Kind is one of the Err* sentinels above.
	Kind error
	// URL is the request's path and query below the server origin, e.g.
	// "/api/v1/orgs/acme/actions/jobs?limit=50&page=1&status=queued". It
	// never holds credentials (the token travels in a header).
	URL string
	// Status is the HTTP status, 0 when no answer arrived.
	Status int
	// Message is Gitea's "message" field, or a short description of what
	// went wrong when there is none.
	Message string
}

// Error reads like
// "gitea: GET /api/v1/admin/actions/jobs?...: forbidden (HTTP 403): user should be the site admin".
func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("gitea: ")
	b.WriteString(cmp.Or(e.Method, http.MethodGet))
	b.WriteString(" ")
	b.WriteString(e.URL)
	b.WriteString(": ")
	if e.Kind != nil {
		b.WriteString(e.Kind.Error())
	} else {
		b.WriteString("error")
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Unwrap returns the kind, so errors.Is matches the sentinels.
func (e *APIError) Unwrap() error { return e.Kind }

// kindForStatus maps a non-2xx HTTP status to an error kind.
func kindForStatus(status int) error {
	switch status {
	case http.StatusBadRequest:
		return ErrBadResponse
	case http.StatusUnauthorized:
		return ErrUnauthorized
	case http.StatusForbidden:
		return ErrForbidden
	case http.StatusNotFound:
		return ErrNotFound
	default:
		return ErrServer
	}
}

// maxMessageRunes bounds the message an error carries from Gitea into
// logs, RunnerGroup conditions and events.
const maxMessageRunes = 200

// classify turns an SDK failure into an *APIError, or into a plain
// cancellation error when the caller gave up (that is not Gitea's fault and
// must not be reported as one). parent is the caller's context, not the
// per-request one; x is what the request learnt of the answer.
//
// The message is never a body Gitea did not write as its error: for an
// error status only Gitea's own JSON "message" is kept, so a proxy's HTML
// page or an echoed request cannot reach a condition or event.
func (c *client) classify(parent context.Context, uri string, resp *sdk.Response, x *exchange, err error) error {
	if perr := parent.Err(); errors.Is(perr, context.Canceled) {
		return fmt.Errorf("gitea: GET %s: %w", uri, perr)
	}
	e := &APIError{URL: uri}
	if resp != nil && resp.Response != nil {
		e.Status = resp.StatusCode
	}
	switch {
	case x.tooLarge && e.Status < http.StatusBadRequest:
		e.Kind = ErrBadResponse
		e.Message = x.tooLargeMessage()
	case isTimeout(err):
		// Checked before the status: a deadline can also strike while a 200
		// body is still being read.
		e.Kind = ErrTimeout
		e.Message = fmt.Sprintf("no complete answer in time (per-request timeout %s)", c.opts.Timeout)
		if parent.Err() != nil {
			e.Message = "no complete answer before the caller's deadline"
		}
	case errors.Is(err, giteaurl.ErrNotAllowed):
		// Checked before the status: a refused redirect comes with the
		// redirect's status.
		e.Kind = ErrURLNotAllowed
		e.Message = transportMessage(err)
	case e.Status == 0:
		e.Kind = ErrServer
		e.Message = transportMessage(err)
	case e.Status/100 == 2:
		e.Kind = ErrBadResponse
		e.Message = "cannot decode body: " + err.Error()
	default:
		e.Kind = kindForStatus(e.Status)
		e.Message = x.giteaMessage
		if x.tooLarge {
			e.Message = x.tooLargeMessage()
		}
	}
	e.Message = tidy(e.Message, c.token)
	return e
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// transportMessage drops the *url.Error wrapper, whose text repeats the full
// URL including the origin; the inner error says what failed.
func transportMessage(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err.Error()
	}
	return err.Error()
}

// tidy puts a message on one line, shortens it to maxMessageRunes and
// removes the token should a server or proxy ever echo it back.
func tidy(msg, token string) string {
	if token != "" {
		msg = strings.ReplaceAll(msg, token, "[redacted]")
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if utf8.RuneCountInString(msg) > maxMessageRunes {
		msg = string([]rune(msg)[:maxMessageRunes]) + "…"
	}
	return msg
}
