package scaler

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
)

// RunOptions say whether Run passes once or keeps passing.
type RunOptions struct {
	// Loop starts a pass every Interval until a signal stops it.
	Loop     bool
	Interval time.Duration
	// FollowUp is the delay of the first follow-up pass in a loop (see
	// followUps); DefaultFollowUp when 0.
	FollowUp time.Duration
}

// Run makes one pass, or with o.Loop one pass every o.Interval, and handles
// SIGTERM and SIGINT. In a loop the first signal lets the pass in flight
// finish and starts no other; a second one cancels that pass too. A single
// pass is cancelled by the first signal.
//
// For a single pass Run returns an error when the pass could not run or a
// group failed, so the CronJob's Job shows as failed. A loop returns nil
// once a signal stopped it.
func (s *Scaler) Run(ctx context.Context, o RunOptions) error {
	if s.groups == nil {
		return errNotMadeByNew
	}
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(signals)
	return s.run(ctx, o, signals)
}

// run is Run with the signals given, so tests can send them.
func (s *Scaler) run(ctx context.Context, o RunOptions, signals <-chan os.Signal) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopping := s.stopOnSignals(ctx, cancel, signals, o.Loop)
	follow := newFollowUps(o.FollowUp, o.Interval)
	for {
		start := time.Now()
		sum, err := s.loggedPass(ctx)
		if !o.Loop {
			return err
		}
		// A stop that came during the pass wins over a timer that is also
		// due already (a pass longer than the interval): select would pick
		// between two ready cases at random and might start one more pass.
		select {
		case <-stopping:
			return nil
		default:
		}
		if stopped := s.waitForNextPass(ctx, start.Add(o.Interval), stopping, &follow, sum); stopped {
			return nil
		}
	}
}

// waitForNextPass waits until next, making a triggered pass whenever a
// webhook asks for one (Trigger) meanwhile and a follow-up pass (see
// followUps) after a pass, last or one made here, that left queued jobs
// to idle runners. A pass that did not keeps a follow-up already due: a
// webhook's pass may not have looked at the groups that asked for it. It
// reports whether a stop came first.
func (s *Scaler) waitForNextPass(ctx context.Context, next time.Time, stopping <-chan struct{}, follow *followUps, last passreport.Summary) bool {
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	soon := time.NewTimer(0)
	soon.Stop()
	defer soon.Stop()
	var soonAt time.Time // zero: no follow-up pass is due
	followUp := func(sum passreport.Summary) {
		d, ok := follow.after(leftToIdleRunners(sum))
		at := time.Now().Add(d)
		// The regular pass comes first, or a follow-up is due sooner.
		if !ok || !at.Before(next) || (!soonAt.IsZero() && !at.Before(soonAt)) {
			return
		}
		s.log.Debug("follow-up pass", "delay", d)
		soonAt = at
		soon.Reset(d)
	}
	followUp(last)
	for {
		select {
		case <-stopping:
			return true
		case <-timer.C:
			return false
		case <-soon.C:
			soonAt = time.Time{}
			sum, _ := s.loggedPass(ctx)
			followUp(sum)
			select {
			case <-stopping:
				return true
			default:
			}
		case <-s.trig.wake:
			// Let the rest of a burst of deliveries arrive first, and
			// keep triggered passes triggerMinGap apart.
			select {
			case <-stopping:
				return true
			case <-time.After(s.trig.delay(time.Now())):
			}
			if sum, passed := s.triggeredPass(ctx); passed {
				followUp(sum)
			}
			select {
			case <-stopping:
				return true
			default:
			}
		}
	}
}

// stopOnSignals watches for signals until ctx ends. Outside a loop the
// first one cancels the pass. In a loop the first closes the returned
// channel, which stops the loop after the pass in flight, and the second
// cancels that pass.
func (s *Scaler) stopOnSignals(ctx context.Context, cancel context.CancelFunc, signals <-chan os.Signal, loop bool) <-chan struct{} {
	stopping := make(chan struct{})
	go func() {
		select {
		case <-signals:
		case <-ctx.Done():
			return
		}
		if !loop {
			cancel()
			return
		}
		close(stopping)
		s.log.Info("stopping after the pass in flight")
		select {
		case <-signals:
			cancel()
		case <-ctx.Done():
		}
	}()
	return stopping
}

// loggedPass makes one pass and logs how it went. Its error says the pass
// could not run or a group failed.
//
// Its "pass finished" line carries the pass's numbers (the metrics
// endpoint's, summed over groups), so a CronJob pass, which nothing
// scrapes, still reports them: runners created and reaped, the groups'
// queued, blocked, running, active and idle counts, the requests sent to
// Gitea and Kubernetes, and the time from queued to runner Job.
func (s *Scaler) loggedPass(ctx context.Context) (passreport.Summary, error) {
	return s.loggedPassOf(ctx, nil)
}

// loggedPassOf is loggedPass over the groups keep accepts (see passOf).
func (s *Scaler) loggedPassOf(ctx context.Context, keep func(*v1alpha1.RunnerGroup) bool) (passreport.Summary, error) {
	start := time.Now()
	g0, k0 := s.requests.Requests()
	sum, err := s.passOf(ctx, keep)
	took := time.Since(start)
	s.observer.ObservePass(sum, took, err)
	g1, k1 := s.requests.Requests()
	attrs := summaryAttrs(sum, took, g1-g0, k1-k0)
	switch {
	case err != nil:
		s.log.Error("pass could not run", "error", err)
		return sum, err
	case sum.Err() != nil:
		s.log.Error("pass finished with failed RunnerGroups", append(attrs, "failedGroups", sum.Failed, "failedNamespaceNames", sum.FailedNamespaces)...)
		return sum, sum.Err()
	}
	s.log.Info("pass finished", attrs...)
	return sum, nil
}

// unobserved is the Observer of a scaler given none: a pass's numbers
// are in its "pass finished" line all the same.
type unobserved struct{}

func (unobserved) ObservePass(passreport.Summary, time.Duration, error) {}

// uncounted is the RequestCounter of a scaler given none: its passes
// report zero requests.
type uncounted struct{}

func (uncounted) Requests() (gitea, kube int64) { return 0, 0 }

// DefaultFollowUp is the delay of the first follow-up pass: a genuinely
// idle act_runner asks Gitea for a task every fetch_interval (2s by
// default), so a pass this much later finds a job left to it taken, or
// finds that the runner it was left to is gone.
const DefaultFollowUp = 2 * time.Second

// leftToIdleRunners reports whether a group served in the pass had more
// queued jobs than it started runners for while it counted idle runners
// (started, running no Gitea job): the plan left jobs to those runners.
//
// One of them may be an ephemeral runner that has just finished its one
// job: it counts as idle until its pod ends and the Job controller marks
// its Job complete (seconds), and it will take no job. Within one pass it
// cannot be told from a runner that is idle indeed (Gitea deletes a spent
// runner's registration, but a runner still registering has none yet
// either), so the loop passes again soon instead (see followUps). Jobs
// waiting for a slot with no idle runner do not count: only a runner Job
// that ends frees that slot, and the regular pass sees it. A failed
// group's counts may not be this pass's, so it does not count either.
func leftToIdleRunners(s passreport.Summary) bool {
	for _, g := range s.GroupStats {
		if !g.Failed && g.Queued > g.Created && g.Idle > 0 {
			return true
		}
	}
	return false
}

// followUps is a loop's back-off for follow-up passes: after a pass that
// left queued jobs to idle runners (leftToIdleRunners), the loop
// passes again after base, then twice as long after each further such
// pass in a row, never later than the regular pass (the interval, which
// also caps the delay); any other pass starts over at base. The regular
// schedule does not move. A CronJob's single pass has no follow-up.
type followUps struct {
	base, limit, next time.Duration
}

func newFollowUps(base, interval time.Duration) followUps {
	if base <= 0 {
		base = DefaultFollowUp
	}
	base = min(base, interval)
	return followUps{base: base, limit: interval, next: base}
}

// after takes whether a pass left queued jobs to idle runners and says
// how long after it the loop passes again; ok is false when the regular
// pass is the next one.
func (f *followUps) after(leftToIdle bool) (delay time.Duration, ok bool) {
	if !leftToIdle {
		f.next = f.base
		return 0, false
	}
	delay = f.next
	f.next = min(2*f.next, f.limit)
	return delay, true
}
