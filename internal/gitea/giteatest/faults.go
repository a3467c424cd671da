package giteatest

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Fault changes how the next requests are answered.
type Fault struct {
	// Path, when set, limits the fault to requests whose path starts with
	// it (e.g. "/api/v1/orgs/big/"); other requests pass it by and do not
	// use it up, so one group of a pass can fail while the others are served.
	Path string
	// Delay holds the answer back (or until the client gives up).
	Delay time.Duration
	// Status, when not 0, replaces the answer: this status with Body (or a
	// Gitea-style JSON error when Body is empty). Status 0 means the normal
	// answer after Delay.
	Status int
	Body   string
	// ContentType of Body; default "application/json;charset=utf-8".
	ContentType string
	// LargeBody, when positive, replaces the answer with a valid but empty
	// job listing padded to exactly this many bytes, with Status (default
	// 200). It is written in small pieces from one shared buffer, so the
	// fake holds almost none of it in memory and a test can measure what
	// the client allocates. Reading stops when the client hangs up.
	LargeBody int64
	// DeclareLength sends LargeBody's size as Content-Length; without it the
	// body is chunked and only its end tells how long it was.
	DeclareLength bool
	// Before runs before the request is answered, outside the fake's
	// lock: the scene changing between two pages of one listing (a job
	// that finishes after page 1 was read shifts every later job back).
	Before func()
	// RewriteQuery changes the request's query before it is answered, as
	// a proxy in front of Gitea might (one that keeps only the first of
	// repeated parameters, or drops them).
	RewriteQuery func(q url.Values)
}

// fault is an injected Fault with the number of requests it still applies to.
type fault struct {
	Fault
	left int
}

// InjectFault applies f to the next n requests (of f.Path, when set).
// Faults injected one after the other apply one after the other.
func (s *Server) InjectFault(n int, f Fault) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &fault{Fault: f, left: n})
}

// arrive logs the request and takes the first fault that applies to it, if
// any.
func (s *Server) arrive(r *http.Request) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r.Method+" "+r.URL.RequestURI())
	for i, f := range s.faults {
		if !strings.HasPrefix(r.URL.Path, f.Path) {
			continue
		}
		f.left--
		if f.left == 0 {
			s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
		}
		c := f.Fault
		return &c
	}
	return nil
}

func (s *Server) faultReply(f Fault) reply {
	if f.Body == "" {
		return s.errorReply(f.Status, fmt.Sprintf("injected fault: HTTP %d", f.Status))
	}
	ct := cmp.Or(f.ContentType, jsonType)
	return reply{status: f.Status, header: map[string]string{"Content-Type": ct}, body: []byte(f.Body)}
}

// The pieces of a LargeBody answer: an empty listing whose padding field
// fills it up to the size asked for.
const (
	largeBodyHead = `{"total_count":0,"jobs":[],"padding":"`
	largeBodyTail = `"}`
)

// padding is what LargeBody answers are written from, piece by piece.
var padding = []byte(strings.Repeat("x", 32<<10))

// writeLargeBody answers with f.LargeBody bytes, or fewer when the size
// cannot hold the listing's frame; it stops when the client hangs up.
func writeLargeBody(w http.ResponseWriter, f Fault) {
	w.Header().Set("Content-Type", jsonType)
	if f.DeclareLength {
		w.Header().Set("Content-Length", strconv.FormatInt(f.LargeBody, 10))
	}
	w.WriteHeader(cmp.Or(f.Status, http.StatusOK))
	if _, err := w.Write([]byte(largeBodyHead)); err != nil {
		return
	}
	for left := f.LargeBody - int64(len(largeBodyHead)+len(largeBodyTail)); left > 0; {
		n, err := w.Write(padding[:min(left, int64(len(padding)))])
		if err != nil {
			return
		}
		left -= int64(n)
	}
	_, _ = w.Write([]byte(largeBodyTail))
}
