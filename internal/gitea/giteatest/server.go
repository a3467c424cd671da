// Package giteatest is an in-memory Gitea API for tests and fault
// injection, in the manner of net/http/httptest. It serves a configurable
// scene (orgs, users, repositories, Actions jobs) on loopback, through the
// endpoints the scaler reads and with the JSON shapes, status codes, headers and pagination that
// Gitea 1.26.0 produces (internal/gitea/testdata holds the recordings it is
// checked against):
//
//	GET /api/v1/version
//	GET /api/v1/admin/actions/jobs               site admin token only (403)
//	GET /api/v1/orgs/{org}/actions/jobs          admin or org member (403)
//	GET /api/v1/repos/{owner}/{repo}/actions/jobs
//	GET /api/v1/user/actions/jobs                jobs of the token's own user
//	GET /api/v1/users/{user}/repos
//	GET, PATCH {"disabled":bool}, DELETE on /api/v1/{admin,orgs/{org},
//	    repos/{owner}/{repo},user}/actions/runners[/{id}]: site admin,
//	    org owner, repository owner, the token's own user
//	POST on the same scopes' /actions/runners/registration-token: the
//	    scope's active runner registration token, same rights (a GET is
//	    404 "Runner not found", as in Gitea 1.26)
//	GET /api/v1/user                             the token's own user
//	POST /api/actions/runner.v1.RunnerService/Register: the runner
//	    protocol's registration, with a scope's registration token
//	    (register.go)
//
// Job listings take repeated status filters with Gitea's meaning (pending,
// waiting, requested and action_required all select blocked jobs) and answer
// 400 {"message":"Invalid status X"} for anything else; every listing takes
// limit and page and answers with Link, X-Total-Count and (for jobs)
// total_count. Any other path gets Gitea's plain-text 404.
//
// AnswerAs(Gitea127) makes it answer as Gitea 1.27.3 where that release
// differs in what the scaler reads (version.go): read from its source, not
// recorded.
//
// It is not a Gitea: no write endpoints but the runners', no private repositories, no
// permissions beyond the few checks above.
package giteatest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"
)

// This file holds the server and its request log; scene.go the data it
// serves, routing.go how a request is answered, json.go the shapes of the
// answers, pagination.go the paging, faults.go the injected faults, and
// register.go the runner protocol's Register call.

// account is what a token stands for.
type account struct {
	user  string
	admin bool
}

// Server is a running fake Gitea. All methods are safe for concurrent use,
// also while requests are being served.
type Server struct {
	// URL is the origin, e.g. "http://127.0.0.1:41234".
	URL string

	srv *httptest.Server

	mu     sync.Mutex
	owners map[string]*owner
	repos  []*repo
	// goneRepos are the IDs of repositories deleted with their jobs kept
	// (DeleteRepoKeepingJobs), by "owner/name".
	goneRepos map[string]int64
	jobs      map[int64]*Job
	runners   map[int64]*Runner
	tokens    map[string]account
	faults    []*fault
	requests  []string
	version   string
	// regTokens are the scopes' active registration tokens (registration.go)
	// and mints counts the mint requests answered.
	regTokens map[string]string
	mints     int
	// registered are the credentials of the runners registered through
	// the runner protocol (register.go), served by protocol.
	registered map[int64]registeredRunner
	protocol   http.Handler
	// answers is the release the fake answers as (version.go); "" is
	// Gitea126.
	answers Version
}

// New starts a fake with an empty scene and no tokens. Close it when done.
func New() *Server {
	s := &Server{
		owners:    map[string]*owner{},
		jobs:      map[int64]*Job{},
		runners:   map[int64]*Runner{},
		tokens:    map[string]account{},
		version:   "development",
		regTokens: map[string]string{},

		registered: map[int64]registeredRunner{},
	}
	s.protocol = s.runnerProtocolHandler()
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	s.URL = s.srv.URL
	return s
}

// Close stops the server. Requests held back by a Delay fault end early.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// AddToken makes token valid for user; admin tokens may use /admin and see
// every org.
func (s *Server) AddToken(token, user string, admin bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[token] = account{user: user, admin: admin}
}

// SetVersion sets what /api/v1/version answers (default "development", what
// a Gitea built from source says).
func (s *Server) SetVersion(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version = v
}

// RequestCount is how many requests arrived since the start or the last
// ResetRequests.
func (s *Server) RequestCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Requests lists the requests since the start or the last ResetRequests as
// "GET /api/v1/...?query", in arrival order.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// ResetRequests clears the request log.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// reply is an answer computed under the lock and written after it.
type reply struct {
	status int
	header map[string]string
	body   []byte
	// notFound answers with net/http's plain-text 404, which is what Gitea's
	// router gives for a path it does not know.
	notFound bool
}

// handle answers one request: an injected fault first, else the route's
// answer.
func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	f := s.arrive(r)
	if f != nil && f.RewriteQuery != nil {
		q := r.URL.Query()
		f.RewriteQuery(q)
		r.URL.RawQuery = q.Encode()
	}
	if f != nil && f.Before != nil {
		f.Before()
	}
	if f != nil && f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if f != nil && f.LargeBody > 0 {
		writeLargeBody(w, *f)
		return
	}
	var rep reply
	if f != nil && f.Status != 0 {
		rep = s.faultReply(*f)
	} else if strings.HasPrefix(r.URL.Path, "/api/actions/") {
		s.protocol.ServeHTTP(w, r)
		return
	} else {
		rep = s.answer(r)
	}
	if rep.notFound {
		http.NotFound(w, r)
		return
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body)
}

const jsonType = "application/json;charset=utf-8"

func (s *Server) jsonReply(status int, v any, header map[string]string) reply {
	body, err := json.Marshal(v)
	if err != nil {
		return reply{status: http.StatusInternalServerError, body: []byte(err.Error())}
	}
	h := map[string]string{"Content-Type": jsonType}
	for k, v := range header {
		h[k] = v
	}
	return reply{status: status, header: h, body: body}
}

// errorReply is Gitea's APIError body: {"message":..., "url": swagger}.
func (s *Server) errorReply(status int, msg string) reply {
	return s.jsonReply(status, map[string]any{"message": msg, "url": s.URL + "/api/swagger"}, nil)
}

// notFoundReply is Gitea's APIErrorNotFound answer (notFoundBody).
func (s *Server) notFoundReply(msg string, errs []string) reply {
	return s.jsonReply(http.StatusNotFound, s.notFoundBody(msg, errs), nil)
}
