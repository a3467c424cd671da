//go:build e2e

// How the areas' test binaries share one bed. go test runs several areas
// at once (-p), each its own process, so t.Parallel alone cannot keep a
// test that needs the bed to itself (an API-server restart, the CRD's
// reinstall, a benchmark) apart from another area's tests, nor bound how
// many tests load the bed's Gitea at once. Every top-level test therefore
// starts with Parallel or Exclusive, and they hold file locks in the bed's
// folder that every binary sees.

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BedSlots is how many tests and parallel subtests may use the bed at once
// across all areas, as -parallel 8 bounded them when the suite was one
// binary.
// The tests spend their time waiting on the cluster and Gitea, so more than
// the cores, but one Gitea on two cores times out when many more push,
// cancel and list at once.
const BedSlots = 8

// Parallel runs t in parallel with the other tests of its binary and of
// the other areas, in one of BedSlots slots, and never while an Exclusive
// test runs.
//
// The slot comes before the turnstile: a test queued for a slot holds no
// share of the bed, so an Exclusive test waits only for the tests that
// run, never for the queue behind them.
func Parallel(t *testing.T) {
	t.Helper()
	mustBeTopLevel(t, "Parallel")
	skipOutsidePhase(t, PhaseShared)
	t.Parallel()
	dir := lockDir(t)
	asked := time.Now()
	slotOf.Store(t.Name(), holdSlot(t, dir))
	passTurnstile(t, dir)
	hold(t, filepath.Join(dir, "bed.lock"), syscall.LOCK_SH)
	logHold(t, "shared", asked)
}

// ParallelSub runs a subtest in parallel with its siblings, in a slot of
// its own: a test's subtests count against BedSlots as the test does.
// Parallel subtests start once their parent's body has returned, so the
// parent's slot goes to them; its hold on the bed stays until they and
// its cleanup are done.
func ParallelSub(t *testing.T) {
	t.Helper()
	top, _, sub := strings.Cut(t.Name(), "/")
	if !sub {
		t.Fatalf("e2e.ParallelSub is for subtests; %s is a top-level test (e2e.Parallel)", t.Name())
	}
	t.Parallel()
	if slot, ok := slotOf.LoadAndDelete(top); ok {
		slot.(*fileLock).release()
	}
	holdSlot(t, lockDir(t))
}

// slotOf holds the slot of each running top-level Parallel test of this
// binary, by name, until its first parallel subtest takes it over.
var slotOf sync.Map

// Exclusive gives t the bed to itself: it waits until every running test
// of every area is done and keeps new ones from starting until t and its
// cleanup are done. A waiting Exclusive test goes before tests that come
// later, so it cannot be starved by a stream of parallel ones.
func Exclusive(t *testing.T) {
	t.Helper()
	mustBeTopLevel(t, "Exclusive")
	skipOutsidePhase(t, PhaseAlone)
	dir := lockDir(t)
	asked := time.Now()
	turnstile := hold(t, filepath.Join(dir, "turnstile.lock"), syscall.LOCK_EX)
	hold(t, filepath.Join(dir, "bed.lock"), syscall.LOCK_EX)
	turnstile.release()
	logHold(t, "alone", asked)
}

// logHold says when t got the bed and when it let go, with wall-clock
// times, so a suite's log shows which tests kept the others waiting
// (the critical path of a full run).
func logHold(t *testing.T, how string, asked time.Time) {
	t.Helper()
	got := time.Now()
	t.Logf("bed: %s from %s after waiting %s", how, got.Format(time.TimeOnly), got.Sub(asked).Round(time.Second))
	t.Cleanup(func() {
		t.Logf("bed: %s until %s, held %s", how, time.Now().Format(time.TimeOnly), time.Since(got).Round(time.Second))
	})
}

// ExclusiveWhen is Exclusive when alone is true and Parallel otherwise:
// for a test that measures in one mode and only smoke-tests in the other.
func ExclusiveWhen(t *testing.T, alone bool) {
	t.Helper()
	if alone {
		Exclusive(t)
		return
	}
	Parallel(t)
}

// The phases of a full run (E2E_PHASE): make test-e2e runs every area's
// Exclusive tests first, one after the other on an idle bed, and then
// every Parallel test, so no Exclusive test waits for running ones to
// drain and the slots stay full. Without E2E_PHASE a run has both kinds,
// as a developer running one test wants.
const (
	PhaseAlone  = "alone"
	PhaseShared = "shared"
)

// phaseEnv names the variable that picks the phase.
const phaseEnv = "E2E_PHASE"

// skipOutsidePhase skips t when the run's phase is not the one t's hold
// on the bed belongs to.
func skipOutsidePhase(t *testing.T, phase string) {
	t.Helper()
	switch run := os.Getenv(phaseEnv); run {
	case "", phase:
	case PhaseAlone, PhaseShared:
		t.Skipf("runs in the %s phase (%s=%s)", phase, phaseEnv, run)
	default:
		t.Fatalf("%s=%q: want %s, %s or nothing", phaseEnv, run, PhaseAlone, PhaseShared)
	}
}

// A subtest shares its parent's hold; taking a second one could wait on an
// Exclusive test that itself waits on the parent.
func mustBeTopLevel(t *testing.T, call string) {
	t.Helper()
	if strings.Contains(t.Name(), "/") {
		t.Fatalf("e2e.%s is for top-level tests; %s shares its parent's hold on the bed", call, t.Name())
	}
}

func lockDir(t *testing.T) string {
	t.Helper()
	bed, err := bedDir()
	if err != nil {
		t.Fatalf("test bed: %v", err)
	}
	dir := filepath.Join(bed, "share")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("the bed's lock folder: %v", err)
	}
	return dir
}

// passTurnstile waits while an Exclusive test is waiting for the bed.
func passTurnstile(t *testing.T, dir string) {
	t.Helper()
	hold(t, filepath.Join(dir, "turnstile.lock"), syscall.LOCK_SH).release()
}

// holdSlot takes the first free one of BedSlots slot files.
func holdSlot(t *testing.T, dir string) *fileLock {
	t.Helper()
	for {
		for i := range BedSlots {
			if l, ok := tryHold(t, filepath.Join(dir, fmt.Sprintf("slot-%d.lock", i))); ok {
				t.Cleanup(l.release)
				return l
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A fileLock is one open file description's flock: two opens of the same
// file, even in one process, exclude each other.
// Closing the file releases the lock; release may run twice (by hand and
// at cleanup), and closing once keeps a reused descriptor safe.
type fileLock struct {
	f    *os.File
	once sync.Once
}

func (l *fileLock) release() { l.once.Do(func() { _ = l.f.Close() }) }

// hold blocks until it has the lock and releases it when t and the
// cleanups registered after it are done.
func hold(t *testing.T, path string, how int) *fileLock {
	t.Helper()
	l := openLock(t, path)
	if err := syscall.Flock(int(l.f.Fd()), how); err != nil {
		_ = l.f.Close()
		t.Fatalf("lock %s: %v", path, err)
	}
	t.Cleanup(l.release)
	return l
}

func tryHold(t *testing.T, path string) (*fileLock, bool) {
	t.Helper()
	l := openLock(t, path)
	if err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = l.f.Close()
		return nil, false
	}
	return l, true
}

func openLock(t *testing.T, path string) *fileLock {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("lock %s: %v", path, err)
	}
	return &fileLock{f: f}
}
