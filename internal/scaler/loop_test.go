package scaler

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// scriptedGitea runs during for each Snapshot, with the pass's context and
// the call's number, and then answers with nothing queued or, when the pass
// was cancelled, with the cancellation.
type scriptedGitea struct {
	calls  atomic.Int32
	during func(ctx context.Context, call int32)
}

func (g *scriptedGitea) Snapshot(ctx context.Context, _ scope.Place) (gitea.Snapshot, error) {
	g.during(ctx, g.calls.Add(1))
	return gitea.Snapshot{}, ctx.Err()
}

// loopEnv is a one-group cluster whose Gitea runs during, and a signal
// channel for the scaler's run.
func loopEnv(t *testing.T, during func(ctx context.Context, call int32)) (*env, *Scaler, *scriptedGitea, chan os.Signal) {
	e := newEnv(t, newGroup("ci", 1))
	g := &scriptedGitea{during: during}
	sc := e.scaler(func(d *Deps, _ *Config) {
		d.Gitea = func(string, string) (gitea.Client, error) { return g, nil }
	})
	return e, sc, g, make(chan os.Signal, 2)
}

// startLoop runs the scaler's loop with a 1h interval (and the short
// follow-up base of followup_test.go) until the test ends.
func startLoop(t *testing.T, sc *Scaler) {
	signals := make(chan os.Signal, 2)
	done := make(chan error, 1)
	go func() {
		done <- sc.run(context.Background(), RunOptions{Loop: true, Interval: time.Hour, FollowUp: followUpBase}, signals)
	}()
	t.Cleanup(func() {
		sendSignal(signals, os.Interrupt)
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Error("the loop did not stop")
		}
	})
}

// waitFor fails the test unless cond holds within a few seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// sendSignal sends sig without blocking, as the runtime does: a scaler that
// stopped listening must not hang the test.
func sendSignal(signals chan os.Signal, sig os.Signal) {
	select {
	case signals <- sig:
	default:
	}
}

// stopSeen holds once the scaler has taken a signal as a stop.
func stopSeen(e *env) func() bool {
	return func() bool { return strings.Contains(e.logs.String(), "stopping after the pass in flight") }
}

func cancelled(ctx context.Context) func() bool {
	return func() bool { return ctx.Err() != nil }
}

func TestLoopPassesEveryIntervalUntilASignal(t *testing.T) {
	var (
		e       *env
		signals chan os.Signal
	)
	e, sc, g, signals := loopEnv(t, func(_ context.Context, call int32) {
		if call == 3 {
			sendSignal(signals, syscall.SIGTERM)
			waitFor(t, "the stop to be seen", stopSeen(e))
		}
	})

	err := sc.run(context.Background(), RunOptions{Loop: true, Interval: time.Millisecond}, signals)

	assert.NoError(t, err, "a loop stopped by a signal ends well")
	assert.EqualValues(t, 3, g.calls.Load())
}

// Regression (found end to end): a stop that came during a pass longer
// than the interval could start one more pass, because the stop and the
// next tick were both due when the pass ended.
func TestLoopStopsAfterThePassInFlight(t *testing.T) {
	var (
		e         *env
		signals   chan os.Signal
		cancelled error
	)
	e, sc, g, signals := loopEnv(t, func(ctx context.Context, _ int32) {
		sendSignal(signals, syscall.SIGTERM)
		waitFor(t, "the stop to be seen", stopSeen(e))
		time.Sleep(20 * time.Millisecond) // past the interval: the next tick is due too
		cancelled = ctx.Err()
	})

	err := sc.run(context.Background(), RunOptions{Loop: true, Interval: 10 * time.Millisecond}, signals)

	assert.NoError(t, err)
	assert.EqualValues(t, 1, g.calls.Load(), "no pass starts after the signal")
	assert.NoError(t, cancelled, "one signal lets the pass in flight finish")
}

func TestSecondSignalCancelsThePassInFlight(t *testing.T) {
	var signals chan os.Signal
	_, sc, g, signals := loopEnv(t, func(ctx context.Context, _ int32) {
		sendSignal(signals, syscall.SIGTERM)
		sendSignal(signals, syscall.SIGINT)
		waitFor(t, "the pass to be cancelled", cancelled(ctx))
	})

	err := sc.run(context.Background(), RunOptions{Loop: true, Interval: time.Hour}, signals)

	assert.NoError(t, err)
	assert.EqualValues(t, 1, g.calls.Load())
}

func TestSinglePassIsCancelledByTheFirstSignal(t *testing.T) {
	var signals chan os.Signal
	e, sc, _, signals := loopEnv(t, func(ctx context.Context, _ int32) {
		sendSignal(signals, syscall.SIGTERM)
		waitFor(t, "the pass to be cancelled", cancelled(ctx))
	})

	err := sc.run(context.Background(), RunOptions{}, signals)

	require.ErrorContains(t, err, "1 of 1 RunnerGroups failed", "the cancelled group failed")
	assert.Contains(t, e.logs.String(), "context canceled")
}

func TestSinglePassSaysWhetherEveryGroupWasServed(t *testing.T) {
	e := newEnv(t, newGroup("ci", 1))
	signals := make(chan os.Signal)
	assert.NoError(t, e.scaler().run(context.Background(), RunOptions{}, signals))

	e.gitea.err = &gitea.APIError{Kind: gitea.ErrServer, URL: "/x", Status: 502}
	assert.ErrorContains(t, e.scaler().run(context.Background(), RunOptions{}, signals), "1 of 1 RunnerGroups failed: runners/ci")
}
