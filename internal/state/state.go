// Package state is the scaler's memory between passes: the claims, which
// say for which Gitea jobs a runner Job was already started, and when, and
// when a pass last saw each runner at work (AtWork). Each
// RunnerGroup keeps its claims in a ConfigMap of its own (see Store), so
// that a CronJob pass, a manual pass and the next pass all see the claims of
// the others.
//
// The encoding predates the word "claim": the ConfigMap key and the JSON
// field names still say "spawned". They stay as they are, so that a scaler
// of this version and one of the version before can read each other's
// ConfigMaps during an upgrade.
package state

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

const (
	// DataKey is the ConfigMap key that holds the encoded claims (the name
	// is part of the stored format; see the package comment).
	DataKey = "spawned.json"
	// MaxClaims bounds the state so the ConfigMap stays far below the 1 MiB
	// object limit (a claim is under 100 bytes). Claims leave as soon as
	// their Gitea job is no longer queued, so the bound is only reached by a
	// queue of more than MaxClaims jobs, and then the oldest claims go first.
	MaxClaims = 2000
	// formatVersion lets a later release change the encoding and still read
	// (or knowingly rebuild) what an older release wrote.
	formatVersion = 1
)

// Entry records one claim: a runner Job was (or is about to be) created for a
// Gitea job. The JSON names are the stored format (see the package comment):
// do not rename them.
type Entry struct {
	// ClaimedAt is when the claim was made.
	ClaimedAt time.Time `json:"spawnedAt"`
	// JobName is the runner Job created for the claim.
	JobName string `json:"jobName"`
}

// Claims maps Gitea job IDs to their claims; a warm runner's claim has a
// negative key. (A scaler older than the warm pool reads a negative key as
// garbage and rebuilds the state from the Jobs, creating nothing in that
// pass: safe, and only for groups with spec.minIdleRunners.)
type Claims map[int64]Entry

// Clone returns a copy that can be changed without touching s.
func (s Claims) Clone() Claims {
	out := make(Claims, len(s))
	for k, v := range s {
		out[k] = v
	}
	return out
}

// AtWork is when a pass last saw each runner Job's runner at work (named
// by a running job, or called busy by Gitea), by the Job's UID. A runner
// cleaning up after a cancelled job on Gitea 1.27 is neither once Gitea
// stops calling it busy, yet it exits by itself when done: its idle time
// counts from its last sighting, which only the state can carry from one
// CronJob pass to the next. A scaler older than AtWork ignores the field
// and drops it on its next write, which only shortens a cleanup's grace.
type AtWork map[types.UID]time.Time

// document is the stored format; its JSON names must not change (see the
// package comment).
type document struct {
	Version int              `json:"version"`
	Claims  map[string]Entry `json:"spawned"`
	AtWork  AtWork           `json:"atWork,omitempty"`
}

// Decode reads the claims from a ConfigMap's data. Anything unreadable,
// missing data included, is an error, so the caller can rebuild the state
// from the Jobs instead of trusting it.
func Decode(data map[string]string) (Claims, error) {
	claims, _, err := decode(data)
	return claims, err
}

// decode reads the claims and the sightings.
func decode(data map[string]string) (Claims, AtWork, error) {
	raw, ok := data[DataKey]
	if !ok || raw == "" {
		// The scaler always writes the key, even for no claims: a
		// ConfigMap without it was emptied by someone else.
		return nil, nil, fmt.Errorf("cannot decode: the ConfigMap has no %s", DataKey)
	}
	var doc struct {
		document
		// Read apart: see below.
		AtWork json.RawMessage `json:"atWork"`
	}
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		return nil, nil, fmt.Errorf("cannot decode %s: %w", DataKey, err)
	}
	if doc.Version != formatVersion {
		return nil, nil, fmt.Errorf("cannot decode %s: unknown format version %d", DataKey, doc.Version)
	}
	out := make(Claims, len(doc.Claims))
	for k, e := range doc.Claims {
		// A negative key is a warm runner's claim (package plan): it was
		// started for no Gitea job.
		id, err := strconv.ParseInt(k, 10, 64)
		if err != nil || id == 0 {
			return nil, nil, fmt.Errorf("cannot decode %s: bad Gitea job id %q", DataKey, k)
		}
		if e.JobName == "" || e.ClaimedAt.IsZero() {
			return nil, nil, fmt.Errorf("cannot decode %s: incomplete entry for Gitea job %d", DataKey, id)
		}
		out[id] = e
	}
	// A sighting only lengthens a runner's grace, so sightings that make
	// no sense are dropped rather than distrusting the claims.
	var stored AtWork
	if len(doc.AtWork) > 0 && json.Unmarshal(doc.AtWork, &stored) != nil {
		stored = nil
	}
	atWork := AtWork{}
	for uid, at := range stored {
		if uid != "" && !at.IsZero() {
			atWork[uid] = at
		}
	}
	return out, atWork, nil
}

// Encode writes the claims as ConfigMap data, keeping the MaxClaims newest.
// JSON object keys are sorted, so equal states encode equally and a pass
// that changed nothing can skip its write.
func Encode(s Claims) map[string]string {
	return encode(s, nil)
}

// encode writes the claims and the sightings, each bounded by MaxClaims.
func encode(s Claims, w AtWork) map[string]string {
	kept := Bound(s, MaxClaims)
	doc := document{Version: formatVersion, Claims: make(map[string]Entry, len(kept))}
	for id, e := range kept {
		doc.Claims[strconv.FormatInt(id, 10)] = Entry{ClaimedAt: e.ClaimedAt.UTC().Truncate(time.Second), JobName: e.JobName}
	}
	if len(w) > 0 {
		doc.AtWork = make(AtWork, min(len(w), MaxClaims))
		for uid, at := range newestSightings(w, MaxClaims) {
			doc.AtWork[uid] = at.UTC().Truncate(time.Second)
		}
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		// A map of strings to plain structs always marshals.
		panic(fmt.Sprintf("encode state: %v", err))
	}
	return map[string]string{DataKey: string(raw)}
}

// Bound returns s with at most max claims, dropping the oldest.
func Bound(s Claims, max int) Claims {
	return newest(s, max, func(e Entry) time.Time { return e.ClaimedAt }, func(a, b int64) bool { return a > b })
}

// newestSightings is w with at most max sightings, dropping the oldest.
func newestSightings(w AtWork, max int) AtWork {
	return newest(w, max, func(at time.Time) time.Time { return at }, func(a, b types.UID) bool { return a < b })
}

// newest is m with at most max entries, the newest by at; ties go by key
// (first before), so equal states bound equally.
func newest[K comparable, V any, M ~map[K]V](m M, max int, at func(V) time.Time, first func(a, b K) bool) M {
	if len(m) <= max {
		return m
	}
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if a, b := at(m[keys[i]]), at(m[keys[j]]); !a.Equal(b) {
			return a.After(b)
		}
		return first(keys[i], keys[j])
	})
	out := make(M, max)
	for _, k := range keys[:max] {
		out[k] = m[k]
	}
	return out
}

// FromJobs rebuilds the state from the group's runner Jobs: every Job
// carries the Gitea job ID it was started for, and its creation time stands
// in for the claim time. Jobs without a readable ID are left out. Where two
// Jobs served one Gitea job (a retry), the newer one wins.
func FromJobs(jobs []batchv1.Job) Claims {
	out := Claims{}
	for _, j := range jobs {
		id := runnerjob.GiteaJobID(&j)
		if id == 0 {
			continue
		}
		at := j.CreationTimestamp.Time
		if prev, ok := out[id]; ok && !at.After(prev.ClaimedAt) {
			continue
		}
		out[id] = Entry{ClaimedAt: at, JobName: j.Name}
	}
	return out
}
