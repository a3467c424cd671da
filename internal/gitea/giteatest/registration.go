package giteatest

import (
	"crypto/rand"
	"net/http"
	"strings"
)

// registrationTokenSeg is the last segment of the mint endpoints,
// /api/v1/{admin,orgs/{org},repos/{owner}/{repo},user}/actions/runners/registration-token.
const registrationTokenSeg = "registration-token"

// RegistrationScope names a scope's registration token in the fake: "" for
// global, the org or user name, or "owner/repo".
func registrationScope(scope []string, acct account) string {
	switch scope[0] {
	case "admin":
		return ""
	case "orgs":
		return scope[1]
	case "repos":
		return scope[1] + "/" + scope[2]
	default: // user: the token's own user
		return acct.user
	}
}

// mintRegistrationToken answers POST on a scope's registration-token
// endpoint the way Gitea does: the scope's active token, made on the first
// ask (testdata registration-token-org.json). The caller authorised the
// scope. Gitea 1.26 has no GET there: it reads the path as a runner's ID
// and answers 404 "Runner not found" (recorded on the bed), so a GET
// never sees a token.
func (s *Server) mintRegistrationToken(r *http.Request, scope string) reply {
	switch r.Method {
	case http.MethodPost:
	case http.MethodGet:
		return s.errorReply(http.StatusNotFound, "Runner not found")
	default:
		return s.errorReply(http.StatusMethodNotAllowed, "method not allowed")
	}
	tok, ok := s.regTokens[scope]
	if !ok {
		tok = newRegistrationToken()
		s.regTokens[scope] = tok
	}
	s.mints++
	return s.jsonReply(http.StatusOK, map[string]string{"token": tok}, nil)
}

// RegistrationToken returns the active registration token of a scope ("",
// an org or user name, or "owner/repo"), making one when there is none, as
// Gitea's runner settings page does when it shows it.
func (s *Server) RegistrationToken(scope string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, ok := s.regTokens[scope]
	if !ok {
		tok = newRegistrationToken()
		s.regTokens[scope] = tok
	}
	return tok
}

// SetRegistrationToken makes token the active registration token of a
// scope, as if the test's Secret had been filled from Gitea's settings.
func (s *Server) SetRegistrationToken(scope, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.regTokens[scope] = token
}

// ResetRegistrationToken replaces a scope's active registration token, as
// the reset button in Gitea's runner settings does: the next mint answers
// the new one.
func (s *Server) ResetRegistrationToken(scope string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.regTokens[scope] = newRegistrationToken()
}

// Mints counts the answered mint requests.
func (s *Server) Mints() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mints
}

// newRegistrationToken is 40 letters and digits, the shape Gitea's are.
func newRegistrationToken() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	var b strings.Builder
	raw := make([]byte, 40)
	_, _ = rand.Read(raw)
	for _, c := range raw {
		b.WriteByte(alphabet[int(c)%len(alphabet)])
	}
	return b.String()
}

// userReply answers GET /api/v1/user: the token's own user.
func (s *Server) userReply(acct account) reply {
	return s.jsonReply(http.StatusOK, map[string]any{"id": 1, "login": acct.user, "username": acct.user, "is_admin": acct.admin}, nil)
}
