package webhook

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingBody is a request body that counts the bytes the handler reads
// from it: what an anonymous client can make the listener hold.
type countingBody struct {
	r    io.Reader
	read atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (c *countingBody) Close() error { return nil }

// A request without a signature, or for another event, or announcing a
// body past MaxBody, is answered before a byte of its body is read; a
// signed one past MaxBody is cut at MaxBody. (Before: 1 MiB was read from
// anyone, which let 48 stalled connections pin 69 MiB.)
func TestRequestsAreRefusedBeforeTheirBodyIsRead(t *testing.T) {
	d := loadDelivery(t, "queued")
	big := strings.Repeat("x", 1<<20)
	tests := []struct {
		name          string
		headers       map[string]string
		contentLength int64
		wantCode      int
		wantOutcome   string
		maxRead       int64
	}{
		{"no signature", map[string]string{"X-Gitea-Event": "workflow_job"}, -1, http.StatusUnauthorized, OutcomeUnauthorized, 0},
		{"a signature that is not hex HMAC-SHA256", map[string]string{"X-Gitea-Event": "workflow_job", "X-Gitea-Signature": "sha256=abc"}, -1, http.StatusUnauthorized, OutcomeUnauthorized, 0},
		{"another event", map[string]string{"X-Gitea-Event": "push", "X-Gitea-Signature": d.Headers["X-Gitea-Signature"]}, -1, http.StatusNoContent, OutcomeIgnored, 0},
		{"no event", map[string]string{"X-Gitea-Signature": d.Headers["X-Gitea-Signature"]}, -1, http.StatusNoContent, OutcomeIgnored, 0},
		{"a Content-Length past the bound", map[string]string{"X-Gitea-Event": "workflow_job", "X-Gitea-Signature": d.Headers["X-Gitea-Signature"]}, int64(len(big)), http.StatusRequestEntityTooLarge, OutcomeBadRequest, 0},
		{"a chunked body past the bound", map[string]string{"X-Gitea-Event": "workflow_job", "X-Gitea-Signature": d.Headers["X-Gitea-Signature"]}, -1, http.StatusRequestEntityTooLarge, OutcomeBadRequest, MaxBody + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := &countingBody{r: strings.NewReader(big)}
			req := httptest.NewRequest(http.MethodPost, "/webhook", nil)
			req.Body, req.ContentLength = body, tt.contentLength
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			var outcomes []string
			h := &Handler{Secret: []byte(fixtureSecret), Outcome: func(o string) { outcomes = append(outcomes, o) }, Trigger: func(Job) { t.Error("triggered") }}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			assert.Equal(t, tt.wantCode, rec.Code)
			assert.Equal(t, []string{tt.wantOutcome}, outcomes)
			assert.LessOrEqual(t, body.read.Load(), tt.maxRead, "bytes read before the refusal")
		})
	}
}

// MaxBody is what a delivery needs: the largest recorded delivery is
// under a tenth of it.
func TestMaxBodyHoldsTheRecordedDeliveries(t *testing.T) {
	for _, name := range []string{"queued", "waiting", "in-progress", "completed", "queued-after-needs"} {
		d := loadDelivery(t, name)
		assert.Less(t, len(d.Body)*10, MaxBody, name)
	}
	assert.LessOrEqual(t, MaxBody, 64<<10)
}

// A captured delivery sent again triggers nothing more: neither the same
// X-Gitea-Delivery, nor the same signed body under a new one (the header
// is not signed, so a replayer can change it).
func TestRepeatedDeliveriesAreIgnored(t *testing.T) {
	d := loadDelivery(t, "queued")
	var jobs []Job
	outcomes := map[string]int{}
	h := &Handler{Secret: []byte(fixtureSecret), Trigger: func(j Job) { jobs = append(jobs, j) }, Outcome: func(o string) { outcomes[o]++ }}
	send := func(headers map[string]string, body string) int {
		req := httptest.NewRequest(http.MethodPost, "/webhook", strings.NewReader(body))
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	assert.Equal(t, http.StatusAccepted, send(d.Headers, d.Body))
	for range 49 {
		assert.Equal(t, http.StatusNoContent, send(d.Headers, d.Body))
	}
	renamed := map[string]string{}
	for k, v := range d.Headers {
		renamed[k] = v
	}
	renamed["X-Gitea-Delivery"] = "00000000-0000-4000-8000-000000000001"
	assert.Equal(t, http.StatusNoContent, send(renamed, d.Body))
	assert.Len(t, jobs, 1)
	assert.Equal(t, map[string]int{OutcomeTriggered: 1, OutcomeDuplicate: 50}, outcomes)

	after := loadDelivery(t, "queued-after-needs")
	assert.Equal(t, http.StatusAccepted, send(after.Headers, after.Body), "another delivery still triggers")
}

// The memory of deliveries is bounded: past its size the oldest are
// forgotten.
func TestRecentIsBounded(t *testing.T) {
	r := newRecent(3)
	for i := range 10 {
		assert.False(t, r.seen(fmt.Sprint(i)))
	}
	assert.Equal(t, 3, r.len())
	assert.True(t, r.seen("9"))
	assert.True(t, r.seen("7"))
	assert.False(t, r.seen("0"), "forgotten")
	assert.Equal(t, 3, r.len())
}

// The listener holds at most its limit of connections: one more is
// closed at once, before a byte of it is read, and its slot comes back
// when a held one closes.
func TestLimitListenerRefusesConnectionsPastItsLimit(t *testing.T) {
	base, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := LimitListener(base, 2)
	t.Cleanup(func() { _ = ln.Close() })
	srv := NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	dial := func() net.Conn {
		c, err := net.Dial("tcp", base.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	ask := func(c net.Conn) (int, error) {
		if _, err := fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return 0, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	held := []net.Conn{dial(), dial()}
	for _, c := range held {
		code, err := ask(c) // both are being served, and stay open (keep-alive)
		require.NoError(t, err)
		assert.Equal(t, http.StatusNoContent, code)
	}
	_, err = ask(dial())
	assert.Error(t, err, "a third connection is closed unread")

	require.NoError(t, held[0].Close())
	require.Eventually(t, func() bool {
		code, err := ask(dial())
		return err == nil && code == http.StatusNoContent
	}, 10*time.Second, 10*time.Millisecond, "a slot came back")
}

// The server's limits are short: an anonymous client cannot hold a
// connection, its headers or its body for long, nor send large headers.
func TestNewServerHasShortLimits(t *testing.T) {
	srv := NewServer(http.NotFoundHandler())
	assert.Positive(t, srv.ReadHeaderTimeout)
	assert.LessOrEqual(t, srv.ReadHeaderTimeout.Seconds(), 5.0)
	assert.Positive(t, srv.ReadTimeout)
	assert.LessOrEqual(t, srv.ReadTimeout.Seconds(), 10.0)
	assert.Positive(t, srv.WriteTimeout)
	assert.Positive(t, srv.IdleTimeout)
	assert.LessOrEqual(t, srv.IdleTimeout.Seconds(), 30.0)
	assert.Positive(t, srv.MaxHeaderBytes)
	assert.LessOrEqual(t, srv.MaxHeaderBytes, 16<<10)
}
