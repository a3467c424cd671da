package scaler

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// RunOptions say whether Run passes once or keeps passing.
type RunOptions struct {
	// Loop starts a pass every Interval until a signal stops it.
	Loop     bool
	Interval time.Duration
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
	for {
		start := time.Now()
		err := s.loggedPass(ctx)
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
		if stopped := s.waitForNextPass(ctx, start.Add(o.Interval), stopping); stopped {
			return nil
		}
	}
}

// waitForNextPass waits until next, making a triggered pass whenever a
// webhook asks for one (Trigger) meanwhile, and reports whether a stop
// came first.
func (s *Scaler) waitForNextPass(ctx context.Context, next time.Time, stopping <-chan struct{}) bool {
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-stopping:
			return true
		case <-timer.C:
			return false
		case <-s.trig.wake:
			// Let the rest of a burst of deliveries arrive first.
			select {
			case <-stopping:
				return true
			case <-time.After(triggerDelay):
			}
			s.triggeredPass(ctx)
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
func (s *Scaler) loggedPass(ctx context.Context) error {
	return s.loggedPassOf(ctx, nil)
}

// loggedPassOf is loggedPass over the groups keep accepts (see passOf).
func (s *Scaler) loggedPassOf(ctx context.Context, keep func(*v1alpha1.RunnerGroup) bool) error {
	start := time.Now()
	g0, k0 := s.requestCounts()
	sum, err := s.passOf(ctx, keep)
	took := time.Since(start)
	if s.observer != nil {
		s.observer.ObservePass(sum, took, err)
	}
	g1, k1 := s.requestCounts()
	attrs := summaryAttrs(sum, took, g1-g0, k1-k0)
	switch {
	case err != nil:
		s.log.Error("pass could not run", "error", err)
		return err
	case sum.Err() != nil:
		s.log.Error("pass finished with failed RunnerGroups", append(attrs, "failedGroups", sum.Failed, "failedNamespaceNames", sum.FailedNamespaces)...)
		return sum.Err()
	}
	s.log.Info("pass finished", attrs...)
	return nil
}

// requestCounts are the requests sent so far, zero without a counter.
func (s *Scaler) requestCounts() (gitea, kube int64) {
	if s.requests == nil {
		return 0, 0
	}
	return s.requests.Requests()
}
