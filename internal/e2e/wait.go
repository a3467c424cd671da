//go:build e2e

// Waiting: polling until a condition holds, failing with the last state
// seen and a dump.

package e2e

import (
	"context"
	"testing"
	"time"
)

const (
	// pollEvery is how often a wait looks again.
	pollEvery = time.Second
	// StepWait bounds each wait for one step of a scenario.
	StepWait = 2 * time.Minute
	// apiPoll and apiWait pace the waits for the API server itself to catch
	// up with a write (a CRD's schema served, a policy type-checked or
	// enforced): that takes a moment, not a pass.
	apiPoll = 250 * time.Millisecond
	apiWait = 30 * time.Second
)

// WaitUntil polls cond every pollEvery until it reports done, for at most
// timeout. cond returns what it saw (for the failure message) and an error
// only for a broken invariant, which fails the test at once. On a timeout the
// test fails with the last state and the dump.
func WaitUntil(ctx context.Context, t *testing.T, timeout time.Duration, what string, dump func() string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	WaitEvery(ctx, t, pollEvery, timeout, what, dump, cond)
}

// WaitEvery is waitUntil looking again every `every`.
func WaitEvery(ctx context.Context, t *testing.T, every, timeout time.Duration, what string, dump func() string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		done, state, err := cond(ctx)
		if state != "" {
			last = state
		}
		if err != nil {
			t.Fatalf("%s: %v\nlast state: %s\n%s", what, Redact(err.Error()), Redact(last), dumpOf(dump))
		}
		if done {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not within %s\nlast state: %s\n%s", what, timeout, Redact(last), dumpOf(dump))
		}
		SleepCtx(ctx, every)
	}
}

// Eventually waits for the API server to catch up with a write: it polls
// cond every apiPoll for at most apiWait. The error cond returns says what
// is still wrong; it only goes into the failure message.
func Eventually(ctx context.Context, t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	WaitEvery(ctx, t, apiPoll, apiWait, what, nil, func(ctx context.Context) (bool, string, error) {
		ok, err := cond(ctx)
		if err != nil {
			return ok, err.Error(), nil
		}
		return ok, "", nil
	})
}

func dumpOf(dump func() string) string {
	if dump == nil {
		return ""
	}
	return Redact(dump())
}

// SleepCtx pauses for d, or until ctx ends.
func SleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func KeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
