// Package state is the scaler's memory between passes: which Gitea jobs a
// runner Job was already started for, and when. Each RunnerGroup keeps it in
// a ConfigMap of its own (see Store), so that a CronJob pass, a manual pass
// and the next pass all see the claims of the others.
package state

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

const (
	// DataKey is the ConfigMap key that holds the encoded state.
	DataKey = "spawned.json"
	// MaxEntries bounds the state so the ConfigMap stays far below the 1 MiB
	// object limit (an entry is under 100 bytes). Entries leave as soon as
	// their Gitea job is no longer queued, so the bound is only reached by a
	// queue of more than MaxEntries jobs, and then the oldest claims go first.
	MaxEntries = 2000
	// formatVersion lets a later release change the encoding and still read
	// (or knowingly rebuild) what an older release wrote.
	formatVersion = 1
)

// Entry records one claim: a runner Job was (or is about to be) created for a
// Gitea job.
type Entry struct {
	// SpawnedAt is when the claim was made.
	SpawnedAt time.Time `json:"spawnedAt"`
	// JobName is the runner Job created for the claim.
	JobName string `json:"jobName"`
}

// Spawned maps Gitea job IDs to their claims.
type Spawned map[int64]Entry

// Clone returns a copy that can be changed without touching s.
func (s Spawned) Clone() Spawned {
	out := make(Spawned, len(s))
	for k, v := range s {
		out[k] = v
	}
	return out
}

type document struct {
	Version int              `json:"version"`
	Spawned map[string]Entry `json:"spawned"`
}

// Decode reads the state from a ConfigMap's data. Missing data is an empty
// state; anything unreadable is an error, so the caller can rebuild the
// state from the Jobs instead of trusting it.
func Decode(data map[string]string) (Spawned, error) {
	raw, ok := data[DataKey]
	if !ok || raw == "" {
		return Spawned{}, nil
	}
	var doc document
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		return nil, fmt.Errorf("cannot decode %s: %w", DataKey, err)
	}
	if doc.Version != formatVersion {
		return nil, fmt.Errorf("cannot decode %s: unknown format version %d", DataKey, doc.Version)
	}
	out := make(Spawned, len(doc.Spawned))
	for k, e := range doc.Spawned {
		id, err := strconv.ParseInt(k, 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("cannot decode %s: bad Gitea job id %q", DataKey, k)
		}
		if e.JobName == "" || e.SpawnedAt.IsZero() {
			return nil, fmt.Errorf("cannot decode %s: incomplete entry for Gitea job %d", DataKey, id)
		}
		out[id] = e
	}
	return out, nil
}

// Encode writes the state as ConfigMap data, keeping the MaxEntries newest
// claims. JSON object keys are sorted, so equal states encode equally and a
// pass that changed nothing can skip its write.
func Encode(s Spawned) map[string]string {
	kept := Bound(s, MaxEntries)
	doc := document{Version: formatVersion, Spawned: make(map[string]Entry, len(kept))}
	for id, e := range kept {
		doc.Spawned[strconv.FormatInt(id, 10)] = Entry{SpawnedAt: e.SpawnedAt.UTC().Truncate(time.Second), JobName: e.JobName}
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		// A map of strings to plain structs always marshals.
		panic(fmt.Sprintf("encode state: %v", err))
	}
	return map[string]string{DataKey: string(raw)}
}

// Bound returns s with at most max entries, dropping the oldest claims.
func Bound(s Spawned, max int) Spawned {
	if len(s) <= max {
		return s
	}
	ids := make([]int64, 0, len(s))
	for id := range s {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := s[ids[i]], s[ids[j]]
		if !a.SpawnedAt.Equal(b.SpawnedAt) {
			return a.SpawnedAt.After(b.SpawnedAt)
		}
		return ids[i] > ids[j]
	})
	out := make(Spawned, max)
	for _, id := range ids[:max] {
		out[id] = s[id]
	}
	return out
}

// FromJobs rebuilds the state from the group's runner Jobs: every Job
// carries the Gitea job ID it was started for, and its creation time stands
// in for the claim time. Jobs without a readable ID are left out. Where two
// Jobs served one Gitea job (a retry), the newer one wins.
func FromJobs(jobs []batchv1.Job) Spawned {
	out := Spawned{}
	for _, j := range jobs {
		id, err := strconv.ParseInt(j.Labels[v1alpha1.LabelGiteaJobID], 10, 64)
		if err != nil || id <= 0 {
			continue
		}
		at := j.CreationTimestamp.Time
		if prev, ok := out[id]; ok && !at.After(prev.SpawnedAt) {
			continue
		}
		out[id] = Entry{SpawnedAt: at, JobName: j.Name}
	}
	return out
}
