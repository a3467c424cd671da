package giteatest

import (
	"cmp"
	"fmt"
	"net/http"
	"time"
)

// Fault changes how the next requests are answered.
type Fault struct {
	// Delay holds the answer back (or until the client gives up).
	Delay time.Duration
	// Status, when not 0, replaces the answer: this status with Body (or a
	// Gitea-style JSON error when Body is empty). Status 0 means the normal
	// answer after Delay.
	Status int
	Body   string
	// ContentType of Body; default "application/json;charset=utf-8".
	ContentType string
}

// fault is an injected Fault with the number of requests it still applies to.
type fault struct {
	Fault
	left int
}

// InjectFault applies f to the next n requests, whatever their path. Faults
// injected one after the other apply one after the other.
func (s *Server) InjectFault(n int, f Fault) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &fault{Fault: f, left: n})
}

// arrive logs the request and takes the fault that applies to it, if any.
func (s *Server) arrive(r *http.Request) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r.Method+" "+r.URL.RequestURI())
	if len(s.faults) == 0 {
		return nil
	}
	f := s.faults[0]
	f.left--
	if f.left == 0 {
		s.faults = s.faults[1:]
	}
	c := f.Fault
	return &c
}

func (s *Server) faultReply(f Fault) reply {
	if f.Body == "" {
		return s.errorReply(f.Status, fmt.Sprintf("injected fault: HTTP %d", f.Status))
	}
	ct := cmp.Or(f.ContentType, jsonType)
	return reply{status: f.Status, header: map[string]string{"Content-Type": ct}, body: []byte(f.Body)}
}
