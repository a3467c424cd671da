package gitea

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	sdk "code.gitea.io/sdk/gitea"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// Registration mints runner registration tokens. Implementations are safe
// for concurrent use.
type Registration interface {
	// RegistrationToken returns the target's runner registration token,
	// through POST .../actions/runners/registration-token. Gitea answers
	// the scope's active token and makes one only when there is none
	// (testdata/registration-token-org.json), so asking again returns the
	// same token until someone resets it in Gitea.
	//
	// A user target mints for the API token's own user only (Gitea has
	// /user/actions/runners/registration-token and no endpoint for another
	// user): the owner is checked against the token's user first, so a
	// runner never registers for a user the group does not name.
	//
	// The token is a secret: it is never part of an error.
	RegistrationToken(ctx context.Context, t scope.Place) (string, error)
}

// ErrWrongUser: a user target names another user than the API token's
// own, and Gitea mints registration tokens only for the token's user.
var ErrWrongUser = errors.New("the API token belongs to another user")

// RegistrationToken implements Registration.
func (c *client) RegistrationToken(ctx context.Context, t scope.Place) (string, error) {
	ctx = WithTarget(ctx, t)
	if err := validate(t); err != nil {
		return "", err
	}
	var (
		apiPath string
		mint    func(*sdk.Client) (*sdk.RegistrationToken, *sdk.Response, error)
	)
	switch t.Scope() {
	case ScopeGlobal:
		apiPath, mint = "/admin/actions/runners/registration-token", (*sdk.Client).CreateAdminActionRunnerRegistrationToken
	case ScopeOrg:
		org := t.Owner()
		apiPath = "/orgs/" + url.PathEscape(org) + "/actions/runners/registration-token"
		mint = func(sc *sdk.Client) (*sdk.RegistrationToken, *sdk.Response, error) {
			return sc.CreateOrgActionRunnerRegistrationToken(org)
		}
	case ScopeRepo:
		owner, repo := t.Owner(), t.Repo()
		apiPath = "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(repo) + "/actions/runners/registration-token"
		mint = func(sc *sdk.Client) (*sdk.RegistrationToken, *sdk.Response, error) {
			return sc.CreateRepoActionRunnerRegistrationToken(owner, repo)
		}
	default: // ScopeUser
		if err := c.checkTokenUser(ctx, t.Owner()); err != nil {
			return "", err
		}
		apiPath, mint = "/user/actions/runners/registration-token", (*sdk.Client).CreateUserActionRunnerRegistrationToken
	}
	var tok *sdk.RegistrationToken
	_, err := c.doMethod(ctx, http.MethodPost, c.requestURI(apiPath, nil), func(sc *sdk.Client) (*sdk.Response, error) {
		var (
			resp *sdk.Response
			err  error
		)
		tok, resp, err = mint(sc)
		return resp, err
	})
	if err != nil {
		return "", err
	}
	if tok == nil || strings.TrimSpace(tok.Token) == "" {
		return "", &APIError{Method: http.MethodPost, Kind: ErrBadResponse, URL: c.requestURI(apiPath, nil), Message: "no token in the answer"}
	}
	return strings.TrimSpace(tok.Token), nil
}

// checkTokenUser fails unless the API token belongs to user (Gitea's user
// names are case-insensitive).
func (c *client) checkTokenUser(ctx context.Context, user string) error {
	var me *sdk.User
	_, err := c.do(ctx, c.requestURI("/user", nil), func(sc *sdk.Client) (*sdk.Response, error) {
		var (
			resp *sdk.Response
			err  error
		)
		me, resp, err = sc.GetMyUserInfo()
		return resp, err
	})
	if err != nil {
		return err
	}
	if me == nil || !strings.EqualFold(me.UserName, user) {
		got := ""
		if me != nil {
			got = me.UserName
		}
		return fmt.Errorf("gitea: cannot mint a registration token for user %s: %w (%q); Gitea mints user-scope tokens only for the token's own user", user, ErrWrongUser, got)
	}
	return nil
}

// RegistrationCheck tells whether a runner registration token lets
// runners take a scope's jobs. Implementations are safe for concurrent
// use.
type RegistrationCheck interface {
	// RegistrationScope asks Gitea for the active registration
	// token of the target and, until one matches, of each scope that
	// contains it (a repository's owner, org or user, then the instance),
	// with the API token, and compares each with token. A runner
	// registered with any of them may take the target's jobs (an org's
	// runners serve its repositories), and Gitea keeps one active token
	// per scope, so it answers no match only when every one of those scopes
	// answered and none is token's: then token is another scope's, or was
	// reset, and runners given it never take the target's jobs.
	//
	// Each ask is a POST on .../actions/runners/registration-token
	// (Gitea 1.26 answers GET there with 404 "Runner not found"), which
	// makes a token only for a scope that has none, and needs the rights
	// of RegistrationToken. When a scope that may hold token refuses
	// (ErrForbidden, ErrUnauthorized, ErrWrongUser) and none matched, it
	// returns no match and that refusal: nothing can be told. Gitea's tokens
	// never leave the client.
	//
	// where is the scope whose token matched: runners registered with it
	// are listed in that scope's runners API, not the target's, and take
	// any job of that scope whose labels they offer.
	RegistrationScope(ctx context.Context, t scope.Place, token string) (where scope.Place, matched bool, err error)
}

// RegistrationScope implements RegistrationCheck.
func (c *client) RegistrationScope(ctx context.Context, t scope.Place, token string) (scope.Place, bool, error) {
	if err := validate(t); err != nil {
		return scope.Place{}, false, err
	}
	token = strings.TrimSpace(token)
	var refused error
	// ask asks for one scope's token: whether it matched, and whether
	// Gitea answered at all.
	ask := func(s scope.Place) (matched, answered bool, err error) {
		active, err := c.RegistrationToken(ctx, s)
		if err != nil {
			return false, false, err
		}
		return subtle.ConstantTimeCompare([]byte(active), []byte(token)) == 1, true, nil
	}
	scopes := []scope.Place{t}
	if t.Scope() != ScopeGlobal {
		scopes = append(scopes, t.On(ScopeGlobal, ""))
	}
	for _, s := range scopes {
		matched, _, err := ask(s)
		switch {
		case matched:
			return s, true, nil
		case err != nil && !isRefusal(err):
			return scope.Place{}, false, err
		case err != nil && refused == nil:
			refused = err
		}
		if s != t || t.Scope() != ScopeRepo {
			continue
		}
		// The repository's owner, an org or a user: Gitea answers an
		// org's token only for an org, and a user's only to the user's
		// own token, so whichever answers is the owner's.
		org := t.On(ScopeOrg, t.Owner())
		matched, orgAnswered, orgErr := ask(org)
		if matched {
			return org, true, nil
		}
		if orgErr != nil && !isRefusal(orgErr) {
			return scope.Place{}, false, orgErr
		}
		if orgAnswered {
			continue
		}
		user := t.On(ScopeUser, t.Owner())
		matched, userAnswered, userErr := ask(user)
		switch {
		case matched:
			return user, true, nil
		case userErr != nil && !isRefusal(userErr):
			return scope.Place{}, false, userErr
		case userAnswered:
			// The owner is the token's user: the org's refusal was
			// about a scope that does not exist.
		case refused == nil && errors.Is(orgErr, ErrNotFound):
			// No org of that name, and another user's: the user's
			// refusal says why.
			refused = userErr
		case refused == nil:
			refused = orgErr
		}
	}
	return scope.Place{}, false, refused
}

// isRefusal: Gitea refused the API token this ask (it may not manage that
// scope's runners, or there is no such scope for it), which asking again
// does not change.
func isRefusal(err error) bool {
	return errors.Is(err, ErrForbidden) || errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrWrongUser) || errors.Is(err, ErrNotFound)
}
