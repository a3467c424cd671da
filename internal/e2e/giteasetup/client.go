// Package giteasetup is the one client that sets up Gitea for tests and demos:
// organisations, users, repositories, access and runner registration tokens,
// workflows, and the Actions job listing a test watches. The e2e tests import
// it; scripts/testbed and scripts/demo reach it through the gitea-setup
// command (internal/e2e/cmd/gitea-setup).
//
// It speaks plain net/http rather than the SDK the scaler uses: it needs calls
// the SDK does not model (runner registration tokens at every scope, tokens
// minted with basic auth), and its errors must never carry a credential.
package giteasetup

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client calls Gitea's REST API with one set of credentials: an access
// token, or a user name and password (which Gitea accepts only to mint
// tokens here).
type Client struct {
	base       string
	token      string
	user, pass string
	hc         *http.Client
}

// New returns a client of the Gitea at baseURL that authenticates with
// token. A nil hc gets a 90-second timeout per request: on a loaded
// machine Gitea takes tens of seconds to create a repository or commit a
// file (it runs git for each), and a setup request that gives up sooner
// fails a test on the machine's load, not on what it tests.
func New(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 90 * time.Second}
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, hc: hc}
}

// URL is Gitea's base URL, without a trailing slash.
func (c *Client) URL() string { return c.base }

// WithToken is the same Gitea with another access token.
func (c *Client) WithToken(token string) *Client {
	return &Client{base: c.base, token: token, hc: c.hc}
}

// WithPassword is the same Gitea with a user's name and password.
func (c *Client) WithPassword(user, pass string) *Client {
	return &Client{base: c.base, user: user, pass: pass, hc: c.hc}
}

// Error is a call Gitea answered with a status other than 2xx.
type Error struct {
	Method, Path string
	Status       int
	// Body is the end of Gitea's answer, without the client's credentials.
	Body string
}

func (e *Error) Error() string {
	return fmt.Sprintf("gitea %s %s: %d %s: %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Body)
}

// IsNotFound says whether err is Gitea's 404.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// apiPath joins escaped path segments under /api/v1.
func apiPath(segments ...string) string {
	var sb strings.Builder
	for _, s := range segments {
		sb.WriteByte('/')
		sb.WriteString(url.PathEscape(s))
	}
	return sb.String()
}

// Version is the server's version, as /api/v1/version answers it.
func (c *Client) Version(ctx context.Context) (string, error) {
	var v struct {
		Version string `json:"version"`
	}
	err := c.call(ctx, http.MethodGet, "/version", nil, &v)
	return v.Version, err
}

// call sends in as JSON (when not nil) and decodes the answer into out
// (when not nil). path is below /api/v1 and may carry a query.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("gitea %s %s: encode: %w", method, path, err)
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+"/api/v1"+path, body)
	if err != nil {
		return fmt.Errorf("gitea %s %s: %s", method, path, c.scrub(err.Error()))
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	switch {
	case c.token != "":
		req.Header.Set("Authorization", "token "+c.token)
	case c.user != "":
		req.SetBasicAuth(c.user, c.pass)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// A transport error may wrap the context's cause; keep it testable.
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("gitea %s %s: %w", method, path, ctxErr)
		}
		return fmt.Errorf("gitea %s %s: %s", method, path, c.scrub(err.Error()))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("gitea %s %s: read: %s", method, path, c.scrub(err.Error()))
	}
	if resp.StatusCode/100 != 2 {
		return &Error{Method: method, Path: path, Status: resp.StatusCode, Body: c.scrub(lastLines(string(raw), 5))}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("gitea %s %s: decode: %w", method, path, err)
		}
	}
	return nil
}

// exists asks for path and tells a 404 from other failures.
func (c *Client) exists(ctx context.Context, path string) (bool, error) {
	err := c.call(ctx, http.MethodGet, path, nil, nil)
	if IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// scrub removes the client's credentials, also as a basic-auth header
// carries them, from text that may reach a log.
func (c *Client) scrub(s string) string {
	secrets := []string{c.token}
	if c.pass != "" {
		secrets = append(secrets, c.pass, base64.StdEncoding.EncodeToString([]byte(c.user+":"+c.pass)))
	}
	for _, secret := range secrets {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "<redacted>")
		}
	}
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
