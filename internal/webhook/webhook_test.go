package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixtureSecret is the secret the recorded deliveries were signed with.
const fixtureSecret = "fixture-secret"

// recording is one delivery Gitea 1.26 made (testdata, from
// /work/shared/fixtures/gitea-1.26): its headers and raw body.
type recording struct {
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

func loadDelivery(t *testing.T, name string) recording {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "webhook-workflow-job-"+name+".json"))
	require.NoError(t, err)
	var r recording
	require.NoError(t, json.Unmarshal(raw, &r))
	return r
}

type got struct {
	jobs     []Job
	ran      []RanJob
	outcomes []string
}

func serve(h *Handler, method string, headers map[string]string, body string) (*httptest.ResponseRecorder, *got) {
	g := &got{}
	h.Trigger = func(j Job) { g.jobs = append(g.jobs, j) }
	h.Ran = func(j RanJob) { g.ran = append(g.ran, j) }
	h.Outcome = func(o string) { g.outcomes = append(g.outcomes, o) }
	req := httptest.NewRequest(method, "/webhook", strings.NewReader(body))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec, g
}

// TestRecordedDeliveries replays Gitea's own deliveries of one workflow
// run: only the two queued ones (build, then deploy once its need
// finished) trigger, with the job's repository and labels; the runner's
// taking and finishing build hand on its times as Gitea sent them (the
// epoch for one not reached; this completed_at is behind started_at: the
// runner's clock, not Gitea's).
func TestRecordedDeliveries(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	epoch := time.Unix(0, 0).UTC()
	tests := []struct {
		name     string
		wantCode int
		wantJobs []Job
		wantRan  []RanJob
		outcome  string
	}{
		{"queued", http.StatusAccepted, []Job{{Repo: "acme/app", Labels: []string{"ubuntu-latest"}}}, nil, OutcomeTriggered},
		{"waiting", http.StatusNoContent, nil, nil, OutcomeIgnored},
		{"in-progress", http.StatusNoContent, nil, []RanJob{{ID: 12, RunnerName: "app-runner-x1y2z",
			Created: at("2026-11-23T07:03:26Z"), Started: at("2026-11-23T07:03:39Z"), Completed: epoch}}, OutcomeRan},
		{"completed", http.StatusNoContent, nil, []RanJob{{ID: 12, RunnerName: "app-runner-x1y2z",
			Created: at("2026-11-23T07:03:26Z"), Started: at("2026-11-23T07:03:39Z"), Completed: at("2026-11-23T07:00:05Z")}}, OutcomeRan},
		{"queued-after-needs", http.StatusAccepted, []Job{{Repo: "acme/app", Labels: []string{"ubuntu-latest"}}}, nil, OutcomeTriggered},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := loadDelivery(t, tt.name)
			rec, g := serve(&Handler{Secret: []byte(fixtureSecret)}, http.MethodPost, d.Headers, d.Body)
			assert.Equal(t, tt.wantCode, rec.Code)
			assert.Equal(t, tt.wantJobs, g.jobs)
			assert.Equal(t, tt.wantRan, g.ran)
			assert.Equal(t, []string{tt.outcome}, g.outcomes)
		})
	}
}

// TestUntrustedDeliveriesTriggerNothing: a missing, wrong or malformed
// signature, a body changed after signing, another secret, or no secret
// configured all get 401 and trigger nothing.
func TestUntrustedDeliveriesTriggerNothing(t *testing.T) {
	d := loadDelivery(t, "queued")
	sig := d.Headers["X-Gitea-Signature"]
	withSig := func(s string) map[string]string {
		h := map[string]string{"X-Gitea-Event": "workflow_job", "Content-Type": "application/json"}
		if s != "" {
			h["X-Gitea-Signature"] = s
		}
		return h
	}
	tests := []struct {
		name    string
		secret  string
		headers map[string]string
		body    string
	}{
		{"no signature", fixtureSecret, withSig(""), d.Body},
		{"wrong signature", fixtureSecret, withSig(strings.Repeat("ab", 32)), d.Body},
		{"not hex", fixtureSecret, withSig("sha256=" + sig), d.Body},
		{"body changed after signing", fixtureSecret, withSig(sig), strings.Replace(d.Body, `"ubuntu-latest"`, `"gpu"`, 1)},
		{"another secret", "other-secret", withSig(sig), d.Body},
		{"no secret configured", "", withSig(sig), d.Body},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, g := serve(&Handler{Secret: []byte(tt.secret)}, http.MethodPost, tt.headers, tt.body)
			assert.Equal(t, http.StatusUnauthorized, rec.Code)
			assert.Empty(t, g.jobs)
			assert.Equal(t, []string{OutcomeUnauthorized}, g.outcomes)
		})
	}
}

func TestOtherRequests(t *testing.T) {
	d := loadDelivery(t, "queued")
	t.Run("GET is refused", func(t *testing.T) {
		rec, g := serve(&Handler{Secret: []byte(fixtureSecret)}, http.MethodGet, d.Headers, "")
		assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
		assert.Empty(t, g.jobs)
	})
	t.Run("another event is ignored", func(t *testing.T) {
		h := map[string]string{"X-Gitea-Event": "push", "X-Gitea-Signature": d.Headers["X-Gitea-Signature"]}
		rec, g := serve(&Handler{Secret: []byte(fixtureSecret)}, http.MethodPost, h, d.Body)
		assert.Equal(t, http.StatusNoContent, rec.Code)
		assert.Empty(t, g.jobs)
		assert.Equal(t, []string{OutcomeIgnored}, g.outcomes)
	})
	t.Run("a signed body that is not JSON", func(t *testing.T) {
		body := "not json"
		rec, g := serve(&Handler{Secret: []byte("s")}, http.MethodPost,
			map[string]string{"X-Gitea-Event": "workflow_job", "X-Gitea-Signature": sign("s", body)}, body)
		assert.Equal(t, http.StatusBadRequest, rec.Code)
		assert.Empty(t, g.jobs)
		assert.Equal(t, []string{OutcomeBadRequest}, g.outcomes)
	})
	t.Run("a body past the bound", func(t *testing.T) {
		body := string(bytes.Repeat([]byte("x"), MaxBody+1))
		rec, g := serve(&Handler{Secret: []byte("s")}, http.MethodPost,
			map[string]string{"X-Gitea-Event": "workflow_job", "X-Gitea-Signature": sign("s", body)}, body)
		assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
		assert.Empty(t, g.jobs)
	})
}

func sign(secret, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	return hex.EncodeToString(mac.Sum(nil))
}
