package scaler

import (
	"sync"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// The job histograms (passreport.GroupStats.Startups and Executions) read
// Gitea's own times of a job, never the scaler's clock:
//
//   - startup: started_at minus created_at, both written by Gitea. A pass
//     sees them for each running job of its listing that runs on one of
//     the group's runners; a webhook delivery for a job a runner took or
//     finished carries them too. For a job with needs:, created_at is
//     when its run was made, so its startup includes the wait for its
//     needs.
//   - execution: completed_at minus started_at, from the job's completed
//     delivery only: the jobs listing a pass reads holds no finished
//     jobs. completed_at is the end the runner reported, by its clock; a
//     completed_at not after started_at (a runner's clock behind Gitea's)
//     gives no sample.
//
// Only a loop reports them (a single pass has no /metrics and no memory),
// and each job once, whichever of a pass and a delivery sees it first: the
// loop keeps the jobs it counted for jobMemoryAge after it last saw them.

// RanJob is what a webhook delivery says of a job a runner took or
// finished: its ID, the runner's name, and its times as Gitea sent them.
type RanJob struct {
	ID                          int64
	RunnerName                  string
	Created, Started, Completed time.Time
}

// jobMemoryAge is how long a loop remembers a job it counted, from the
// last pass or delivery that saw it: far longer than the time between a
// job's running in a listing and its completed delivery.
const jobMemoryAge = time.Hour

// maxHeldRuns bounds the deliveries held for the next pass; past it more
// are dropped (their jobs may still be counted by a pass).
const maxHeldRuns = 4096

// jobTimes is a loop's memory of the jobs the histograms counted, and the
// deliveries waiting for the pass that serves their runner's group.
type jobTimes struct {
	mu sync.Mutex
	// held are the deliveries by the owner tag of their runner's name,
	// with when each arrived.
	held  map[string][]heldRun
	nHeld int
	// counted are the jobs counted, with what was counted.
	counted   map[countedKey]*countedJob
	lastPrune time.Time
}

type heldRun struct {
	run RanJob
	at  time.Time
}

// countedKey is one run of a job on one group's runner: a rerun of the
// job (same ID) starts again, with a new started_at.
type countedKey struct {
	tag     string
	id      int64
	started int64
}

type countedJob struct {
	startup, execution bool
	seen               time.Time
}

// JobRan hands a loop a delivery's job: the next pass that serves the
// group of its runner counts it. A single pass keeps nothing.
func (s *Scaler) JobRan(j RanJob) {
	if s.mem == nil {
		return
	}
	_, _, tag, ok := runnerjob.SplitRunnerName(j.RunnerName)
	if !ok {
		return
	}
	t := &s.mem.jobs
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.nHeld >= maxHeldRuns {
		return
	}
	if t.held == nil {
		t.held = map[string][]heldRun{}
	}
	t.held[tag] = append(t.held[tag], heldRun{run: j, at: s.now()})
	t.nHeld++
}

// jobDurations are the group's jobs' startup and execution times that no
// earlier pass or delivery of the loop counted: those of its running jobs
// (obs.ran; obs is nil when the pass failed before it looked) and of the
// deliveries held for its runners.
func (s *Scaler) jobDurations(g *groupRun, obs *observation) (startups, executions []time.Duration) {
	if s.mem == nil {
		return nil, nil
	}
	now := s.now()
	rg := g.rg
	tag := runnerjob.OwnerTag(rg.UID)
	t := &s.mem.jobs
	t.mu.Lock()
	defer t.mu.Unlock()
	t.prune(now)
	runs := make([]RanJob, 0, len(t.held[tag]))
	for _, h := range t.held[tag] {
		if _, own := runnerjob.JobOfRunner(rg, h.run.RunnerName); own {
			runs = append(runs, h.run)
		}
	}
	t.nHeld -= len(t.held[tag])
	delete(t.held, tag)
	if obs != nil {
		for _, j := range obs.ran {
			runs = append(runs, RanJob{ID: j.ID, Created: j.Created, Started: j.Started})
		}
	}
	for _, r := range runs {
		created, started, completed := gitea.Stamp(r.Created), gitea.Stamp(r.Started), gitea.Stamp(r.Completed)
		if started.IsZero() {
			continue
		}
		c := t.job(countedKey{tag: tag, id: r.ID, started: started.Unix()}, now)
		if !c.startup && !created.IsZero() && !started.Before(created) {
			c.startup = true
			startups = append(startups, started.Sub(created))
		}
		if !c.execution && completed.After(started) {
			c.execution = true
			executions = append(executions, completed.Sub(started))
		}
	}
	return startups, executions
}

// job is the counted job of key, seen now.
func (t *jobTimes) job(key countedKey, now time.Time) *countedJob {
	if t.counted == nil {
		t.counted = map[countedKey]*countedJob{}
	}
	c := t.counted[key]
	if c == nil {
		c = &countedJob{}
		t.counted[key] = c
	}
	c.seen = now
	return c
}

// prune forgets, at most once a minute, the jobs not seen for
// jobMemoryAge and the deliveries held as long: no pass served their
// runner's group (another listener's, or a group gone).
func (t *jobTimes) prune(now time.Time) {
	if now.Sub(t.lastPrune) < time.Minute {
		return
	}
	t.lastPrune = now
	for k, c := range t.counted {
		if now.Sub(c.seen) > jobMemoryAge {
			delete(t.counted, k)
		}
	}
	for tag, hs := range t.held {
		kept := hs[:0]
		for _, h := range hs {
			if now.Sub(h.at) <= jobMemoryAge {
				kept = append(kept, h)
			}
		}
		t.nHeld -= len(hs) - len(kept)
		if len(kept) == 0 {
			delete(t.held, tag)
		} else {
			t.held[tag] = kept
		}
	}
}
