package giteasetup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"strings"
)

// CancelRun cancels an Actions run (every job of it that has not ended) as
// a user with write access to the repository does in Gitea's web UI: Gitea
// 1.26.0's API has no way to (routers/api/v1/api.go: its DELETE of a run
// refuses one that has not ended), and its web UI's POST
// /{owner}/{repo}/actions/runs/{run}/cancel takes a signed-in session, not
// a token. So the client must hold a user's name and password
// (WithPassword): CancelRun signs in through the login form, as a browser
// would, and posts the cancel with that session. Neither request carries an
// Origin or Sec-Fetch-Site header, which Gitea's cross-origin protection
// lets through as a request that is not a browser's.
func (c *Client) CancelRun(ctx context.Context, r Repo, runID int64) error {
	if c.user == "" || c.pass == "" {
		return errors.New("cancelling a run takes a user's name and password (WithPassword): Gitea's web UI does it, with a session")
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		return err
	}
	web := &http.Client{
		Transport: c.hc.Transport,
		Timeout:   c.hc.Timeout,
		Jar:       jar,
		// A redirect is the answer: 303 after a login, or to the login
		// page when the session is not signed in.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	login := url.Values{"user_name": {c.user}, "password": {c.pass}}
	status, body, loc, err := c.webPost(ctx, web, "/user/login", login)
	if err != nil {
		return err
	}
	// Gitea answers a good login with a redirect; a bad one with the form
	// again (200) and its error.
	if status/100 != 3 || strings.Contains(loc, "/user/login") {
		return &Error{Method: http.MethodPost, Path: "/user/login", Status: status, Body: c.scrub(lastLines(body, 5))}
	}
	path := "/" + url.PathEscape(r.Owner) + "/" + url.PathEscape(r.Name) + "/actions/runs/" + strconv.FormatInt(runID, 10) + "/cancel"
	status, body, loc, err = c.webPost(ctx, web, path, nil)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return &Error{Method: http.MethodPost, Path: path, Status: status, Body: c.scrub(lastLines(body+" "+loc, 5))}
	}
	return nil
}

// webPost posts a form to a web UI path and returns the status, the end
// of the body and the redirect's target.
func (c *Client) webPost(ctx context.Context, web *http.Client, path string, form url.Values) (status int, body, location string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, "", "", fmt.Errorf("gitea POST %s: %s", path, c.scrub(err.Error()))
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := web.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return 0, "", "", fmt.Errorf("gitea POST %s: %w", path, ctxErr)
		}
		return 0, "", "", fmt.Errorf("gitea POST %s: %s", path, c.scrub(err.Error()))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, "", "", fmt.Errorf("gitea POST %s: read: %s", path, c.scrub(err.Error()))
	}
	return resp.StatusCode, string(raw), resp.Header.Get("Location"), nil
}
