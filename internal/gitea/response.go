package gitea

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// errResponseTooLarge is what a body larger than the limit returns instead
// of its next bytes. do reports it from the exchange, not from this error,
// because the SDK keeps only the text of a read error on an error status.
var errResponseTooLarge = errors.New("response larger than the limit")

// exchange is what one request learns of Gitea's answers besides what the
// SDK returns: whether a body went past the limit, and Gitea's own error
// message when it sent one. Each request has its own, used by one
// goroutine at a time (the one the SDK sends and reads from).
type exchange struct {
	max int64
	// tooLarge is set once a body proved larger than max.
	tooLarge bool
	// giteaMessage is the "message" of a JSON error body, as Gitea writes
	// it for every API error; empty for any other body.
	giteaMessage string
}

// httpClient is base with every answer going through the exchange. It
// shares base's transport, so connections are still reused across requests.
func (x *exchange) httpClient(base *http.Client) *http.Client {
	c := *base
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c.Transport = boundedTransport{base: rt, x: x}
	return &c
}

// tooLargeMessage says what went wrong for a body past the limit.
func (x *exchange) tooLargeMessage() string {
	return fmt.Sprintf("response larger than %d bytes", x.max)
}

// boundedTransport bounds each body and reads error bodies itself, within
// the same bound, for Gitea's message.
type boundedTransport struct {
	base http.RoundTripper
	x    *exchange
}

func (t boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > t.x.max {
		// Said up front: refuse without reading a byte of it.
		_ = resp.Body.Close()
		t.x.tooLarge = true
		resp.Body = io.NopCloser(failingReader{errResponseTooLarge})
		return resp, nil
	}
	body := &boundedBody{rc: resp.Body, left: t.x.max, x: t.x}
	if resp.StatusCode < http.StatusBadRequest {
		resp.Body = body
		return resp, nil
	}
	data, err := io.ReadAll(body)
	_ = body.Close()
	if err == nil {
		t.x.giteaMessage = giteaMessage(data)
	}
	// The SDK reads the error body again for its own error; give it what
	// was read (nothing past the limit).
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp, nil
}

// giteaMessage is the "message" string of a JSON object, or "".
func giteaMessage(body []byte) string {
	var e struct {
		Message *string `json:"message"`
	}
	if json.Unmarshal(body, &e) != nil || e.Message == nil {
		return ""
	}
	return *e.Message
}

// boundedBody reads at most left bytes of rc and fails, rather than ending
// early, when there are more: a body cut short could decode as a smaller,
// wrong answer.
type boundedBody struct {
	rc   io.ReadCloser
	left int64
	x    *exchange
	err  error
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	// Ask for one byte past the limit: only a byte that arrives proves the
	// body too large.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	if int64(n) <= b.left {
		b.left -= int64(n)
		return n, err
	}
	b.x.tooLarge = true
	b.err = errResponseTooLarge
	return int(b.left), b.err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }
