// Package webhook receives Gitea's workflow_job deliveries, so a looping
// scaler starts a pass for a queued job at once instead of at its next
// interval. Polling stays the backstop: Gitea delivers a webhook at most
// once and gives up on a receiver that is down.
//
// A delivery is trusted only when its X-Gitea-Signature is the hex
// HMAC-SHA256 of the raw body with the shared secret (what Gitea 1.26
// sends; the recordings in testdata are real deliveries; 1.27.3's source
// signs and shapes them the same way). Anything else
// gets 401 and triggers nothing. The body is only a hint: which jobs wait
// is still read from Gitea's API by the pass, so a forged or replayed
// delivery that passed the signature could at most cause an extra pass,
// and a repeated one causes none (recent.go).
//
// The port is open to anyone who can reach it, so what an anonymous
// client can make the listener hold is bounded: a request without a
// signature, for another event or announcing a body past MaxBody is
// answered before its body is read; a body is read at most to MaxBody,
// into the HMAC as it arrives; connections are limited (LimitListener)
// and their timeouts short (NewServer).
package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Job is what a queued delivery says about its job: enough to pick the
// groups that could serve it.
type Job struct {
	// Repo is "owner/name".
	Repo string
	// Labels are the job's runs-on labels.
	Labels []string
}

// RanJob is what an in_progress or completed delivery says of its job:
// the times the job metrics read, and the runner that took it. A time the
// job has not reached is the Unix epoch, as Gitea sends it.
type RanJob struct {
	ID         int64
	RunnerName string
	// Created, Started and Completed are the job's created_at, started_at
	// and completed_at: Gitea's times, but for completed_at, which is when
	// the runner reported the job's end, by the runner's clock.
	Created, Started, Completed time.Time
}

// Outcomes of a delivery, as the metrics count them.
const (
	OutcomeTriggered    = "triggered"    // a queued job: a pass was asked for
	OutcomeRan          = "ran"          // a job a runner took or finished: its times were kept
	OutcomeIgnored      = "ignored"      // another workflow_job delivery, or another event
	OutcomeDuplicate    = "duplicate"    // signed, but seen before: nothing more is done
	OutcomeUnauthorized = "unauthorized" // no or a wrong signature: 401
	OutcomeBadRequest   = "bad_request"  // not a delivery we can read: 400 or 413
)

// MaxBody bounds a delivery's body. Gitea 1.26's workflow_job deliveries
// are 3.7 to 4.8 KiB (testdata); most of that is the repository, its
// owner and the sender, whose free-text fields are bounded by Gitea (a
// repository description at 2,048 characters, a user's at 255), and a
// finished job's steps, about 170 bytes each. 64 KiB is 13 times the
// largest recording: room for every such field at its limit, JSON-escaped
// to six bytes a character, a fork's parent repository and some 200
// steps. Only queued deliveries trigger, and those carry no steps; of a
// completed one only the job's times and runner are kept.
const MaxBody = 64 << 10

// recentDeliveries is how many deliveries are remembered to ignore a
// repeat: far more than a burst of a push's jobs, at about 150 bytes each.
const recentDeliveries = 4096

// Handler answers POST deliveries: 401 for a missing or wrong signature,
// 204 for another event, a delivery seen before or a signed delivery
// that is not a queued job, 413 past MaxBody, 400 for a signed body that
// is not JSON, and 202 for a queued job (Trigger is called with it).
// Ran, when not nil, hears of each job a runner took or finished (an
// in_progress or completed delivery, answered 204). Outcome, when not
// nil, hears each delivery's outcome. The zero Handler with a Secret is
// ready; it is safe for concurrent use.
type Handler struct {
	Secret  []byte
	Trigger func(Job)
	Ran     func(RanJob)
	Outcome func(outcome string)

	once   sync.Once
	recent *recent
}

// ServeHTTP handles one delivery.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	// Everything the headers decide is decided before the body is read.
	sig, ok := h.signature(r.Header.Get("X-Gitea-Signature"))
	if !ok {
		h.refuse(w, OutcomeUnauthorized, "missing or wrong X-Gitea-Signature", http.StatusUnauthorized)
		return
	}
	if r.Header.Get("X-Gitea-Event") != "workflow_job" {
		h.outcome(OutcomeIgnored)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.ContentLength > MaxBody {
		h.refuse(w, OutcomeBadRequest, "delivery too large", http.StatusRequestEntityTooLarge)
		return
	}
	// The HMAC is computed as the body arrives; the body is kept (at most
	// MaxBody) only to be decoded once the signature holds.
	mac := hmac.New(sha256.New, h.Secret)
	var body bytes.Buffer
	_, err := io.Copy(io.MultiWriter(mac, &body), http.MaxBytesReader(w, r.Body, MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		h.refuse(w, OutcomeBadRequest, "delivery too large", http.StatusRequestEntityTooLarge)
		return
	case err != nil:
		h.refuse(w, OutcomeBadRequest, "cannot read the delivery", http.StatusBadRequest)
		return
	}
	sum := mac.Sum(nil)
	if !hmac.Equal(sig, sum) {
		h.refuse(w, OutcomeUnauthorized, "missing or wrong X-Gitea-Signature", http.StatusUnauthorized)
		return
	}
	if h.repeated(r.Header.Get("X-Gitea-Delivery"), sum) {
		h.outcome(OutcomeDuplicate)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var d delivery
	if err := json.Unmarshal(body.Bytes(), &d); err != nil {
		h.refuse(w, OutcomeBadRequest, "the delivery is not JSON", http.StatusBadRequest)
		return
	}
	if (d.Action == "in_progress" || d.Action == "completed") && d.WorkflowJob.RunnerName != "" && h.Ran != nil {
		wj := d.WorkflowJob
		h.Ran(RanJob{ID: wj.ID, RunnerName: wj.RunnerName, Created: wj.CreatedAt, Started: wj.StartedAt, Completed: wj.CompletedAt})
		h.outcome(OutcomeRan)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	// "queued" is demand, as in the jobs API; "waiting" is a job whose
	// needs: have not finished, which gets its own "queued" delivery
	// once they have.
	if d.Action != "queued" || d.Repository.FullName == "" {
		h.outcome(OutcomeIgnored)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if h.Trigger != nil {
		h.Trigger(Job{Repo: d.Repository.FullName, Labels: d.WorkflowJob.Labels})
	}
	h.outcome(OutcomeTriggered)
	w.WriteHeader(http.StatusAccepted)
}

// signature decodes X-Gitea-Signature: the hex HMAC-SHA256 Gitea sends.
// No secret, no header or anything else fails, before a byte of the body
// is read.
func (h *Handler) signature(header string) ([]byte, bool) {
	if len(h.Secret) == 0 {
		return nil, false
	}
	sig, err := hex.DecodeString(strings.TrimSpace(header))
	if err != nil || len(sig) != sha256.Size {
		return nil, false
	}
	return sig, true
}

// repeated reports whether the delivery was seen before, by its
// X-Gitea-Delivery or by its signature: the header is not signed, so a
// replayer could change it, while the same signed body is the same event
// (Gitea's own redelivery of an event sends it again too).
func (h *Handler) repeated(id string, sum []byte) bool {
	// Two keys a delivery.
	h.once.Do(func() { h.recent = newRecent(2 * recentDeliveries) })
	bySum := h.recent.seen("sum:" + string(sum))
	byID := id != "" && h.recent.seen("id:"+id)
	return bySum || byID
}

func (h *Handler) refuse(w http.ResponseWriter, outcome, msg string, code int) {
	h.outcome(outcome)
	http.Error(w, msg, code)
}

func (h *Handler) outcome(o string) {
	if h.Outcome != nil {
		h.Outcome(o)
	}
}

// delivery is the part of a workflow_job delivery we read.
type delivery struct {
	Action      string `json:"action"`
	WorkflowJob struct {
		ID          int64     `json:"id"`
		Labels      []string  `json:"labels"`
		RunnerName  string    `json:"runner_name"`
		CreatedAt   time.Time `json:"created_at"`
		StartedAt   time.Time `json:"started_at"`
		CompletedAt time.Time `json:"completed_at"`
	} `json:"workflow_job"`
	Repository struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
}
