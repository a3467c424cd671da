package plan

import (
	"sort"
	"time"
)

// IdleRunner is an active runner Job whose runner is registered in Gitea
// and runs no job.
type IdleRunner struct {
	Job string
	// Since is when the runner Job was made: an ephemeral runner takes one
	// job and exits, so a runner that runs none has been idle since it
	// started.
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
