package giteatest

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	runnerv1 "code.gitea.io/actions-proto-go/runner/v1"
	"code.gitea.io/actions-proto-go/runner/v1/runnerv1connect"
	"connectrpc.com/connect"
)

// RegisterPath is where the runner protocol's Register call arrives
// (gitea-runner's client speaks it under /api/actions).
const RegisterPath = "/api/actions" + runnerv1connect.RunnerServiceRegisterProcedure

// runnerProtocol answers the runner protocol's Register call as Gitea 1.26
// does (routers/api/actions/runner/runner.go): the registration token
// decides the scope, every refusal is a plain error (Connect code unknown)
// with Gitea's text, and the new runner has its own UUID and token, has
// never been in contact (offline) and declares the label names it was
// given. The other calls of the protocol are not served.
type runnerProtocol struct {
	runnerv1connect.UnimplementedRunnerServiceHandler
	s *Server
}

func (p runnerProtocol) Register(_ context.Context, req *connect.Request[runnerv1.RegisterRequest]) (*connect.Response[runnerv1.RegisterResponse], error) {
	if req.Msg.Token == "" || req.Msg.Name == "" {
		return nil, errors.New("missing runner token, name")
	}
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	scope, ok := "", false
	for sc, tok := range s.regTokens {
		if tok == req.Msg.Token {
			scope, ok = sc, true
			break
		}
	}
	if !ok {
		return nil, errors.New("runner registration token not found")
	}
	r := &Runner{Name: req.Msg.Name, Ephemeral: req.Msg.Ephemeral, Labels: slices.Clone(req.Msg.Labels)}
	r.Owner, r.Repo, _ = strings.Cut(scope, "/")
	for id := range s.runners {
		r.ID = max(r.ID, id)
	}
	r.ID++
	s.runners[r.ID] = r
	s.registered[r.ID] = registeredRunner{uuid: newRegistrationToken()[:36], token: newRegistrationToken()}
	return connect.NewResponse(&runnerv1.RegisterResponse{Runner: &runnerv1.Runner{
		Id: r.ID, Uuid: s.registered[r.ID].uuid, Token: s.registered[r.ID].token, Name: r.Name,
		Version: req.Msg.Version, Labels: r.Labels, Ephemeral: r.Ephemeral,
	}}), nil
}

// registeredRunner is what only the runner learns when it registers.
type registeredRunner struct{ uuid, token string }

// RunnerToken returns the token Gitea gave the runner with that ID when it
// registered through the runner protocol ("" for one added otherwise).
func (s *Server) RunnerToken(id int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registered[id].token
}

func (s *Server) runnerProtocolHandler() http.Handler {
	_, h := runnerv1connect.NewRunnerServiceHandler(runnerProtocol{s: s})
	return http.StripPrefix("/api/actions", h)
}
