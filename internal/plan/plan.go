// Package plan decides, without any I/O, which queued Gitea jobs get a new
// runner Job in this pass and what the claims become.
//
// A claim says that a runner Job was started for a Gitea job, and when; it
// keeps the next pass from starting a second one. The original operator kept
// such a record in memory for a fixed time (a "spawned jobs cache"); here it
// is stored (internal/state) and the rules are made safe for several passes
// at once and for passes that die half-way:
//
//   - A queued job claimed within the spawn TTL is skipped: its runner is
//     starting.
//   - A claim is spent, and its job claimed again at once, when its runner
//     can no longer take it: the runner Job finished while the job is still
//     queued, or the runner is running another job. Gitea gives a runner the
//     queued job updated longest ago, not the one the runner was started for,
//     so a job that just left "waiting" (its needs: finished) often sees its
//     runner take an older job. Waiting out the TTL then would leave it queued
//     with a slot free.
//   - A queued job whose claim is older than the TTL is retried, but only
//     when its runner Job has finished or is gone. A runner Job that is still
//     active is slow (image pull, a full cluster), not lost; a second runner
//     for the same Gitea job would sit idle for ever once the first takes it.
//   - Slots are maxActiveRunners minus the active runner Jobs minus the
//     claims whose Job does not exist yet (claimed by a pass that is creating
//     it right now). Counting those claims is what keeps two racing passes
//     under the cap.
//   - Claims of jobs that are no longer queued are dropped, unless the claim
//     is newer than the Gitea snapshot this pass planned from: another pass
//     may have seen a job this snapshot had not yet seen.
package plan

import (
	"sort"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// RunnerJob is what the planner needs to know of an existing runner Job.
type RunnerJob struct {
	Name string
	// Active is true until the Job has a Complete or Failed condition.
	Active bool
}

// Input is everything one plan is made from.
type Input struct {
	Now      time.Time
	SpawnTTL time.Duration
	// MaxActive is the group's maxActiveRunners.
	MaxActive int
	// Jobs are the group's runner Jobs as listed in this pass.
	Jobs []RunnerJob
	// Claims are the claims as loaded in this pass.
	Claims state.Claims
	// Queued are the IDs of the queued Gitea jobs the group can serve.
	Queued []int64
	// Busy maps the group's runners (by name) to the Gitea job each is
	// running now.
	Busy map[string]int64
	// SnapshotAt is when the pass began to ask Gitea for Queued.
	SnapshotAt time.Time
	// NewJobName returns a fresh runner Job name.
	NewJobName func() string
}

// Claim is a new claim: a runner Job to create for a Gitea job.
type Claim struct {
	GiteaJobID int64
	JobName    string
	// Retry is true when an earlier claim for this Gitea job expired or
	// was spent on another job.
	Retry bool
}

// Result is the plan.
type Result struct {
	// New are the claims this plan makes, oldest Gitea job first: one
	// runner Job to create for each.
	New []Claim
	// Claims are all the claims to store (those kept and the new ones)
	// before any Job is created.
	Claims state.Claims
	// Active counts active runner Jobs plus claims whose Job is not there yet.
	Active int
	// Slots is how many runners the group could start before this plan.
	Slots int
	// Waiting counts queued jobs left for a later pass: claimed and still
	// within the TTL or with a runner still starting, or beyond the slots.
	Waiting int
	// Dropped are the Gitea job IDs whose claims were removed.
	Dropped []int64
}

// Make computes the plan.
func Make(in Input) Result {
	jobs := make(map[string]RunnerJob, len(in.Jobs))
	active := 0
	for _, j := range in.Jobs {
		jobs[j.Name] = j
		if j.Active {
			active++
		}
	}
	kept, dropped := keepClaims(in)
	// A claim whose Job is not listed is a Job being created right now, or
	// one whose creation failed; within the TTL it holds its slot either way.
	for _, e := range kept {
		if _, listed := jobs[e.JobName]; !listed && in.Now.Sub(e.ClaimedAt) < in.SpawnTTL {
			active++
		}
	}
	res := Result{Active: active, Slots: max(in.MaxActive-active, 0), Dropped: dropped}
	res.New, res.Waiting = claimQueued(in, kept, jobs, res.Slots)
	res.Claims = kept
	return res
}

// keepClaims returns the claims still worth keeping, and the sorted IDs of
// those dropped: a claim goes once its job is no longer queued, unless the
// claim is newer than the listing that says so.
func keepClaims(in Input) (state.Claims, []int64) {
	queued := make(map[int64]bool, len(in.Queued))
	for _, id := range in.Queued {
		queued[id] = true
	}
	kept := state.Claims{}
	var dropped []int64
	for id, e := range in.Claims {
		if queued[id] || e.ClaimedAt.After(in.SnapshotAt) {
			kept[id] = e
			continue
		}
		dropped = append(dropped, id)
	}
	sort.Slice(dropped, func(i, j int) bool { return dropped[i] < dropped[j] })
	return kept, dropped
}

// claimQueued claims the queued jobs that need a runner, oldest first and
// at most slots of them, adding the new claims to claims. It returns them
// and how many queued jobs are left waiting.
func claimQueued(in Input, claims state.Claims, jobs map[string]RunnerJob, slots int) ([]Claim, int) {
	var (
		made    []Claim
		waiting int
	)
	ids := append([]int64(nil), in.Queued...)
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for i, id := range ids {
		if i > 0 && ids[i-1] == id {
			continue
		}
		prev, claimed := claims[id]
		if claimed && !spent(in, prev, id, jobs) {
			j, listed := jobs[prev.JobName]
			if in.Now.Sub(prev.ClaimedAt) < in.SpawnTTL || (listed && j.Active) {
				waiting++
				continue
			}
		}
		if len(made) == slots {
			waiting++
			continue
		}
		c := Claim{GiteaJobID: id, JobName: in.NewJobName(), Retry: claimed}
		claims[id] = state.Entry{ClaimedAt: in.Now, JobName: c.JobName}
		made = append(made, c)
	}
	return made, waiting
}

// spent reports whether a claim's runner can no longer serve the claimed,
// still queued, job: its Job finished, or it runs another job.
func spent(in Input, e state.Entry, id int64, jobs map[string]RunnerJob) bool {
	if j, ok := jobs[e.JobName]; ok && !j.Active {
		return true
	}
	other, busy := in.Busy[e.JobName]
	return busy && other != id
}
