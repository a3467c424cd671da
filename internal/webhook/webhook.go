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
// delivery that passed the signature could at most cause an extra pass.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// Job is what a queued delivery says about its job: enough to pick the
// groups that could serve it.
type Job struct {
	// Repo is "owner/name".
	Repo string
	// Labels are the job's runs-on labels.
	Labels []string
}

// Outcomes of a delivery, as the metrics count them.
const (
	OutcomeTriggered    = "triggered"    // a queued job: a pass was asked for
	OutcomeIgnored      = "ignored"      // signed, but not a queued workflow_job
	OutcomeUnauthorized = "unauthorized" // no or a wrong signature: 401
	OutcomeBadRequest   = "bad_request"  // signed, but not a delivery we can read: 400
)

// MaxBody bounds a delivery's body. A workflow_job delivery is a few KiB
// (the repository and sender objects are most of it).
const MaxBody = 1 << 20

// Handler answers POST deliveries: 401 for a missing or wrong signature,
// 400 for a signed body that is not JSON, 413 past MaxBody, 202 for a
// queued job (trigger is called with it) and 204 for any other signed
// delivery. outcome, when not nil, hears each delivery's outcome.
type Handler struct {
	Secret  []byte
	Trigger func(Job)
	Outcome func(outcome string)
}

// ServeHTTP handles one delivery.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		h.outcome(OutcomeBadRequest)
		http.Error(w, "delivery too large", http.StatusRequestEntityTooLarge)
		return
	case err != nil:
		h.outcome(OutcomeBadRequest)
		http.Error(w, "cannot read the delivery", http.StatusBadRequest)
		return
	}
	if !h.signed(body, r.Header.Get("X-Gitea-Signature")) {
		h.outcome(OutcomeUnauthorized)
		http.Error(w, "missing or wrong X-Gitea-Signature", http.StatusUnauthorized)
		return
	}
	if r.Header.Get("X-Gitea-Event") != "workflow_job" {
		h.outcome(OutcomeIgnored)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var d delivery
	if err := json.Unmarshal(body, &d); err != nil {
		h.outcome(OutcomeBadRequest)
		http.Error(w, "the delivery is not JSON", http.StatusBadRequest)
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

// signed reports whether sig is the hex HMAC-SHA256 of body with the
// secret, compared in constant time. An empty secret signs nothing.
func (h *Handler) signed(body []byte, sig string) bool {
	if len(h.Secret) == 0 || sig == "" {
		return false
	}
	got, err := hex.DecodeString(strings.TrimSpace(sig))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, h.Secret)
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
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
		Labels []string `json:"labels"`
	} `json:"workflow_job"`
	Repository struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
}
