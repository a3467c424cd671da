package scaler

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerlabels"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// QueuedJob is a job a webhook delivery says was queued: its repository
// ("owner/name") and runs-on labels.
type QueuedJob struct {
	Repo   string
	Labels []string
}

// triggerDelay is how long a looping scaler waits after the first
// delivery before it passes, so a push that queues a workflow's jobs at
// once (one delivery each) makes one pass, not one per job.
const triggerDelay = 100 * time.Millisecond

// triggerMinGap is the least time between the starts of two triggered
// passes: deliveries meanwhile coalesce into the next one, so however
// many signed deliveries arrive, they cost at most one pass (and its
// Gitea requests) every triggerMinGap on top of the polling.
const triggerMinGap = 2 * time.Second

// maxPendingTriggers bounds the distinct jobs held between triggered
// passes; past it the next triggered pass serves every group, as a poll
// does, instead of holding more.
const maxPendingTriggers = 1024

// triggers holds the queued jobs delivered since the last triggered pass.
// A delivery during a pass waits for it and is served by the next one:
// bursts coalesce into one pass, and none is lost.
type triggers struct {
	mu      sync.Mutex
	pending []QueuedJob
	held    map[string]bool // keys of pending
	// all: more jobs were delivered than maxPendingTriggers.
	all  bool
	wake chan struct{}
	// last is when the last triggered pass started.
	last time.Time
}

// delay is how long to wait, at now, before a triggered pass.
func (t *triggers) delay(now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last.IsZero() {
		return triggerDelay
	}
	return max(triggerDelay, t.last.Add(triggerMinGap).Sub(now))
}

// Trigger asks a looping scaler for a pass, at once, over the groups that
// could serve job. It never blocks; without a loop nothing happens.
func (s *Scaler) Trigger(job QueuedJob) {
	key := job.Repo + "\x00" + strings.Join(job.Labels, "\x00")
	s.trig.mu.Lock()
	switch {
	case s.trig.all || s.trig.held[key]:
	case len(s.trig.pending) >= maxPendingTriggers:
		s.trig.all, s.trig.pending, s.trig.held = true, nil, nil
	default:
		if s.trig.held == nil {
			s.trig.held = map[string]bool{}
		}
		s.trig.held[key] = true
		s.trig.pending = append(s.trig.pending, job)
	}
	s.trig.mu.Unlock()
	select {
	case s.trig.wake <- struct{}{}:
	default: // a pass is asked for already
	}
}

// takeTriggered returns the jobs delivered so far, or all when there were
// too many to hold, and forgets them.
func (s *Scaler) takeTriggered() (jobs []QueuedJob, all bool) {
	s.trig.mu.Lock()
	defer s.trig.mu.Unlock()
	jobs, all = s.trig.pending, s.trig.all
	s.trig.pending, s.trig.held, s.trig.all = nil, nil, false
	return jobs, all
}

// triggeredPass serves the groups that could serve one of the delivered
// jobs. The interval's polling goes on as before: Gitea delivers a
// webhook at most once. It returns the pass's Summary, and whether there
// was a pass.
func (s *Scaler) triggeredPass(ctx context.Context) (passreport.Summary, bool) {
	jobs, all := s.takeTriggered()
	if len(jobs) == 0 && !all {
		return passreport.Summary{}, false
	}
	s.trig.mu.Lock()
	s.trig.last = time.Now()
	s.trig.mu.Unlock()
	s.log.Debug("pass triggered by webhook", "jobs", len(jobs), "allGroups", all)
	sum, _ := s.loggedPassOf(ctx, func(rg *v1alpha1.RunnerGroup) bool { return all || s.couldServeAny(rg, jobs) })
	return sum, true
}

// couldServeAny reports whether the group's scope holds the repository of
// one of the jobs and its runners' label names cover that job's labels.
// Which of several such groups gets the job is still the assignment rule's
// choice, made in the pass.
func (s *Scaler) couldServeAny(rg *v1alpha1.RunnerGroup, jobs []QueuedJob) bool {
	labels := runnerlabels.NewSet(runnerlabels.ForGroup(&rg.Spec, s.cfg.Runner.DefaultLabels))
	for _, j := range jobs {
		if scope.Of(&rg.Spec).HoldsRepo(j.Repo) && labels.CanRun(j.Labels) {
			return true
		}
	}
	return false
}
