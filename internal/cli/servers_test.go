package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/metrics"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scaler"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// In loop mode the metrics are served at /metrics on --metrics-addr, and
// stop with the scaler.
func TestServeMetrics(t *testing.T) {
	r, err := parse(t, "--loop", "--metrics-addr", "127.0.0.1:0")
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:0", r.MetricsAddr)

	m := metrics.New()
	m.ObservePass(passreport.Summary{}, time.Second, nil)
	logs := &bytes.Buffer{}
	stop, err := serveMetrics("127.0.0.1:0", m, newLogger(logs, "json", "info"))
	require.NoError(t, err)
	var line struct{ Addr string }
	require.NoError(t, json.Unmarshal([]byte(strings.Split(logs.String(), "\n")[0]), &line))
	resp, err := http.Get("http://" + line.Addr + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), `giteascaler_passes_total{result="ok"} 1`)

	stop()
	_, err = http.Get("http://" + line.Addr + "/metrics")
	assert.Error(t, err, "stopped")
}

// In loop mode /healthz is served on --health-addr: 200 while passes end,
// 503 once none has for --healthz-stale-intervals intervals and a group's
// timeout.
func TestServeHealth(t *testing.T) {
	r, err := parse(t, "--loop", "--interval", "2s", "--health-addr", "127.0.0.1:0", "--healthz-stale-intervals", "4")
	require.NoError(t, err, "an interval far below --group-timeout is fine")
	assert.Equal(t, 8*time.Second+30*time.Second, r.healthzStale(), "4 intervals and one group's timeout")

	m := metrics.New()
	logs := &bytes.Buffer{}
	get := func(stale time.Duration) int {
		logs.Reset()
		stop, err := serveHealth("127.0.0.1:0", m, stale, newLogger(logs, "json", "info"))
		require.NoError(t, err)
		defer stop()
		var line struct{ Addr, Path string }
		require.NoError(t, json.Unmarshal([]byte(strings.Split(logs.String(), "\n")[0]), &line))
		assert.Equal(t, "/healthz", line.Path)
		resp, err := http.Get("http://" + line.Addr + "/healthz")
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, get(time.Hour), "within the limit since the start")
	assert.Equal(t, http.StatusServiceUnavailable, get(-time.Second), "past the limit, no pass ended")
}

// pacedGitea counts passes and answers with nothing queued.
type pacedGitea struct{ calls atomic.Int32 }

func (p *pacedGitea) Snapshot(context.Context, scope.Place) (gitea.Snapshot, error) {
	p.calls.Add(1)
	return gitea.Snapshot{}, nil
}

// A recorded queued delivery, signed with the hook's secret, starts a pass
// of a looping scaler at once; one with a wrong signature gets 401 and
// starts none; a completed one reaches the scaler's job times. The
// deliveries are counted by outcome.
func TestWebhookTriggersAPass(t *testing.T) {
	type recording struct {
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	}
	load := func(name string) recording {
		raw, err := os.ReadFile("../webhook/testdata/webhook-workflow-job-" + name + ".json")
		require.NoError(t, err)
		var rec recording
		require.NoError(t, json.Unmarshal(raw, &rec))
		return rec
	}
	rec, completed := load("queued"), load("completed")
	t.Setenv("SCALER_WEBHOOK_SECRET", "fixture-secret")
	r, err := parse(t, "--loop", "--interval", "1h", "--webhook-addr", "127.0.0.1:0")
	require.NoError(t, err)

	kube, groups := oneGlobalGroup()
	g := &pacedGitea{}
	m := metrics.New()
	logs := &lockedLog{}
	done := make(chan int, 1)
	go func() {
		done <- r.runWith(scaler.Deps{Kube: kube, Groups: groups, Gitea: func(string, string) (gitea.Client, error) { return g, nil },
			Log: slog.New(slog.NewJSONHandler(logs, nil)), Observer: m})
	}()
	addr := ""
	for deadline := time.Now().Add(5 * time.Second); addr == "" || g.calls.Load() < 1; time.Sleep(5 * time.Millisecond) {
		require.False(t, time.Now().After(deadline), "the webhook endpoint and the first pass")
		for _, l := range strings.Split(logs.String(), "\n") {
			var line struct{ Msg, Addr string }
			if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "accepting Gitea webhooks" {
				addr = line.Addr
			}
		}
	}
	post := func(rec recording, sig string) int {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/webhook", strings.NewReader(rec.Body))
		require.NoError(t, err)
		for k, v := range rec.Headers {
			req.Header.Set(k, v)
		}
		req.Header.Set("X-Gitea-Signature", sig)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}

	assert.Equal(t, http.StatusUnauthorized, post(rec, strings.Repeat("0", 64)))
	time.Sleep(300 * time.Millisecond)
	assert.EqualValues(t, 1, g.calls.Load(), "no pass for a delivery that is not signed by the secret")
	assert.Equal(t, http.StatusAccepted, post(rec, rec.Headers["X-Gitea-Signature"]))
	for deadline := time.Now().Add(5 * time.Second); g.calls.Load() < 2; time.Sleep(5 * time.Millisecond) {
		require.False(t, time.Now().After(deadline), "a pass triggered by the delivery")
	}
	assert.Equal(t, http.StatusNoContent, post(completed, completed.Headers["X-Gitea-Signature"]))

	_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	select {
	case code := <-done:
		assert.Equal(t, ExitOK, code)
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not stop")
	}
	assert.NotContains(t, logs.String(), "fixture-secret", "the secret is never logged")
	var body strings.Builder
	resp := httptest.NewRecorder()
	m.Handler().ServeHTTP(resp, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body.WriteString(resp.Body.String())
	assert.Contains(t, body.String(), `giteascaler_webhook_deliveries_total{outcome="triggered"} 1`)
	assert.Contains(t, body.String(), `giteascaler_webhook_deliveries_total{outcome="unauthorized"} 1`)
	assert.Contains(t, body.String(), `giteascaler_webhook_deliveries_total{outcome="ran"} 1`)
}

type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
