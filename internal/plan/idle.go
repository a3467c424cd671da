package plan

import (
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// IdleRunner is an active runner Job whose runner is registered in Gitea
// and runs no job.
type IdleRunner struct {
	Job string
	// Since is when the runner became idle (IdleSince).
	Since time.Time
}

// IdleInput is what the idle decision is made from.
type IdleInput struct {
	Now time.Time
	// Timeout is how long a runner stays idle before it may be reaped;
	// 0 reaps none.
	Timeout time.Duration
	// Surplus is the pool plan's Result.Surplus: the group's idle or
	// starting runners (and claims in flight) beyond its queued demand.
	Surplus int
	// MinIdle runners of the surplus are kept as a warm pool.
	MinIdle int
	// Demand is the number of queued jobs the group serves.
	Demand int
	// Runners are the registered idle runners: the ready ones.
	Runners []IdleRunner
}

// ReapIdle names the runner Jobs to reap, longest idle first: at most the
// surplus beyond MinIdle, and only runners idle for at least the timeout.
// A surplus runner idle for less than the timeout is kept (a job may be
// about to come), and so is every runner the demand still needs. The
// runners kept for the demand and the warm pool are the ready ones first:
// a ready runner takes a job at once, a starting one may never start, so
// a ready runner is never reaped while a starting one stands in for it.
func ReapIdle(in IdleInput) []string {
	minIdle := max(in.MinIdle, 0)
	ready := len(in.Runners)
	n := min(in.Surplus-minIdle, ready-min(ready, max(in.Demand, 0)+minIdle))
	if in.Timeout <= 0 || n <= 0 {
		return nil
	}
	var due []IdleRunner
	for _, r := range in.Runners {
		if in.Now.Sub(r.Since) >= in.Timeout {
			due = append(due, r)
		}
	}
	sort.Slice(due, func(i, j int) bool {
		if !due[i].Since.Equal(due[j].Since) {
			return due[i].Since.Before(due[j].Since)
		}
		return due[i].Job < due[j].Job
	})
	out := make([]string, 0, min(n, len(due)))
	for _, r := range due[:min(n, len(due))] {
		out = append(out, r.Job)
	}
	return out
}

// IdleSince is when a runner became idle, as far as is known: when a pass
// last saw it at work, else when its Job was made (an ephemeral runner takes
// one job and exits, so a runner never seen at work has been idle since it
// started). A sighting more than ClockSkew ahead of now is no sighting: an
// edited state or a clock that jumped back never keeps a runner for good.
func IdleSince(created, lastAtWork, now time.Time) time.Time {
	if lastAtWork.After(created) && !lastAtWork.After(now.Add(ClockSkew)) {
		return lastAtWork
	}
	return created
}

// StillAtWork says whether a runner that can take no more work may still
// be finishing a job: a pass saw it at work less than timeout ago (a kept
// sighting lags the last one by at most half of it, KeepAtWork). Gitea's
// busy flag drops 5 to 10 s after a runner's last report, and a cancelled
// job's cleanup may run longer. A runner never seen at work is not, nor
// any with the runners API off (timeout 0).
func StillAtWork(created, lastAtWork, now time.Time, timeout time.Duration) bool {
	return timeout > 0 && !lastAtWork.IsZero() && IdleSince(created, lastAtWork, now).Equal(lastAtWork) &&
		now.Sub(lastAtWork) < timeout
}

// ClockSkew is how far apart the clocks of two listeners' nodes may be:
// one may read the sighting another wrote a little ahead of its own now.
const ClockSkew = time.Minute

// AtWorkInput is what the sightings a group's state keeps are decided
// from.
type AtWorkInput struct {
	Now time.Time
	// Timeout is the idle timeout (IdleInput.Timeout); 0 reaps none, and
	// then no sighting is needed.
	Timeout time.Duration
	// Kept are the sightings the state holds.
	Kept state.AtWork
	// Seen are the runner Jobs this pass saw at work.
	Seen []types.UID
	// Active are the group's active runner Jobs: only theirs are kept.
	Active []types.UID
}

// KeepAtWork says whether the state's sightings are due a write, and what
// to write: this pass's sightings, and the kept ones of Jobs still active.
// A write is due when a runner seen at work has no sighting kept, or one at
// least half the timeout old. Each runner at work thus costs one write per
// half timeout rather than one per pass, and the kept sighting is never
// more than half the timeout behind the last one, so a runner's cleanup
// after a cancelled job has at least half the timeout before a reap.
func KeepAtWork(in AtWorkInput) (state.AtWork, bool) {
	if in.Timeout <= 0 {
		return nil, false
	}
	due := false
	for _, uid := range in.Seen {
		if last, ok := in.Kept[uid]; !ok || in.Now.Sub(last) >= in.Timeout/2 {
			due = true
			break
		}
	}
	if !due {
		return nil, false
	}
	out := state.AtWork{}
	for _, uid := range in.Active {
		if last, ok := in.Kept[uid]; ok {
			out[uid] = last
		}
	}
	for _, uid := range in.Seen {
		out[uid] = in.Now
	}
	return out, true
}
