// Package plan decides, without any I/O, how many new runner Jobs a group
// starts in this pass, and what its claims become.
//
// Runners of one group are interchangeable: Gitea gives a queued job to
// whichever matching runner asks first (the job updated longest ago, not the
// one the runner was started for), and pods start in random order. So the
// plan counts, it does not pair:
//
//   - Demand is the queued Gitea jobs assigned to the group.
//   - Supply is the group's runner Jobs that are active and whose runner is
//     not running a job and can take one (starting, or registered, enabled
//     and idle: each will take one queued job), plus the claims whose Job
//     is not listed yet (a pass is creating it right now).
//   - The group starts demand − supply runners, within its slots:
//     maxActiveRunners minus the active runner Jobs minus those claims.
//   - A warm pool (MinIdle) asks for MinIdle runners beyond the demand as
//     well: with what the demand needs first, the group starts up to
//     demand + MinIdle − supply runners within its slots, so it has
//     min(MinIdle + demand, maxActiveRunners) runners that are not busy.
//     A warm runner's claim is keyed by a negative number (IsWarm), as it
//     was started for no Gitea job; it is raced for like any other claim.
//     Counting the claims is what keeps two racing passes under the cap and
//     from serving one job twice: they write their claims to one ConfigMap
//     under its resourceVersion, and the loser plans again with the winner's
//     claims in its supply.
//
// A claim exists only until its Job is seen: from then on the Job speaks for
// itself, so a runner Job deleted by hand or evicted is replaced by the next
// pass. A claim whose Job never appears (the create failed with an outcome
// the pass could not learn) stops counting after the claim TTL.
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
	// Busy is true while Gitea shows its runner running a job.
	Busy bool
	// Unavailable is true when its runner can take no work though the Job
	// is active: its runner container has ended (a sidecar keeps the pod
	// up), Gitea has it disabled (a reap that stopped after the disable),
	// or it started and is not registered past the start timeout (its
	// registration was deleted). It holds a slot and is no supply; the
	// lifecycle reaps it.
	Unavailable bool
	// Stranded is true when its runner registered where the group no
	// longer is, in a place no pass can reach to confirm it idle and reap
	// it (another Gitea, a scope the group's token may not list): it
	// takes none of the group's jobs and holds no slot, or it would keep
	// the group from serving for ever.
	Stranded bool
	// GiteaJobID is the Gitea job the Job was started for (its label), or 0.
	GiteaJobID int64
}

// Input is everything one plan is made from.
type Input struct {
	Now time.Time
	// ClaimTTL is how long a claim whose Job is not listed holds its slot.
	ClaimTTL time.Duration
	// MaxActive is the group's maxActiveRunners.
	MaxActive int
	// Jobs are the group's runner Jobs as listed in this pass.
	Jobs []RunnerJob
	// Claims are the claims as loaded in this pass.
	Claims state.Claims
	// Queued are the IDs of the queued Gitea jobs the group serves.
	Queued []int64
	// NewJobName returns a fresh runner Job name.
	NewJobName func() string
	// MinIdle is the group's warm pool: runners kept idle beyond the demand.
	MinIdle int
	// Hold makes no new claim: the loaded claims could not be trusted, and
	// a pass creating runners right now may have written claims this one
	// cannot see. Its Jobs are listed by the next pass.
	Hold bool
}

// Claim is a runner Job to create. GiteaJobID names the queued job it was
// started for, or is negative for a warm runner (IsWarm); any queued job the
// group serves may end up on it.
type Claim struct {
	GiteaJobID int64
	JobName    string
}

// Result is the plan.
type Result struct {
	// New are the claims this plan makes, one per runner Job to create,
	// oldest Gitea job first.
	New []Claim
	// Claims are what to store before any Job is created: the claims still
	// in flight plus the new ones.
	Claims state.Claims
	// Active counts active runner Jobs plus claims whose Job is not listed.
	Active int
	// Idle counts active runner Jobs whose runner is not running a job.
	Idle int
	// InFlight counts claims whose Job is not listed yet.
	InFlight int
	// Slots is how many runners the group could start before this plan.
	Slots int
	// Demand is the number of distinct queued jobs.
	Demand int
	// Waiting counts queued jobs left without a runner for want of a slot.
	Waiting int
	// Warm counts the new claims that are for the warm pool, not for a
	// queued job.
	Warm int
	// Surplus counts runners beyond the demand: idle or starting runners
	// and claims in flight that no queued job waits for.
	Surplus int
	// Dropped are the Gitea job IDs whose claims were removed: their Job
	// was seen, or never appeared within the claim TTL.
	Dropped []int64
}

// Make computes the plan.
func Make(in Input) Result {
	listed := make(map[string]bool, len(in.Jobs))
	covered := map[int64]bool{}
	var res Result
	for _, j := range in.Jobs {
		listed[j.Name] = true
		if !j.Active || j.Stranded {
			continue
		}
		res.Active++
		if !j.Busy && !j.Unavailable {
			res.Idle++
			covered[j.GiteaJobID] = true
		}
	}

	next := state.Claims{}
	for id, c := range in.Claims {
		if !listed[c.JobName] && InFlight(in.Now, in.ClaimTTL, c) {
			next[id] = c
			continue
		}
		res.Dropped = append(res.Dropped, id)
	}
	sort.Slice(res.Dropped, func(i, j int) bool { return res.Dropped[i] < res.Dropped[j] })
	res.InFlight = len(next)
	res.Active += res.InFlight
	res.Slots = max(0, in.MaxActive-res.Active)

	ids := unique(in.Queued)
	res.Demand = len(ids)
	supply := res.Idle + res.InFlight
	need := max(0, res.Demand-supply)
	res.Surplus = max(0, supply-res.Demand)
	create := min(need, res.Slots)
	// The warm pool tops up after the demand, within the slots left.
	warm := min(max(0, res.Demand+max(in.MinIdle, 0)-supply)-need, res.Slots-create)
	if in.Hold {
		create, warm = 0, 0
	}
	res.Waiting = need - create

	for _, id := range pick(ids, next, covered, create) {
		c := Claim{GiteaJobID: id, JobName: in.NewJobName()}
		next[id] = state.Entry{ClaimedAt: in.Now, JobName: c.JobName}
		res.New = append(res.New, c)
	}
	for key := int64(-1); res.Warm < warm; key-- {
		if _, taken := next[key]; taken {
			continue
		}
		c := Claim{GiteaJobID: key, JobName: in.NewJobName()}
		next[key] = state.Entry{ClaimedAt: in.Now, JobName: c.JobName}
		res.New = append(res.New, c)
		res.Warm++
	}
	res.Claims = next
	return res
}

// IsWarm says whether a claim's key is a warm pool's: a runner
// started for no Gitea job.
func IsWarm(giteaJobID int64) bool { return giteaJobID < 0 }

// InFlight reports whether a claim whose Job is not listed still holds its
// slot: its Job is taken to be on its way until the claim is ttl old (the
// spawn TTL). A claim from the future (the claiming pass ran on a node
// whose clock is ahead) is treated as fresh: skipping one create is better
// than a duplicate runner. The orphan reaper uses the same rule, so a
// registration a racing pass made just before it creates its Job is kept.
func InFlight(now time.Time, ttl time.Duration, c state.Entry) bool {
	return now.Sub(c.ClaimedAt) < ttl
}

// pick chooses which queued jobs the n new runners are started for: the
// oldest jobs that neither a claim in flight nor an idle runner was started
// for, then, when runners took each other's jobs, the oldest unclaimed ones.
// The choice only labels the Jobs (and so the rebuild of lost state); any
// runner of the group may take any of its jobs.
func pick(ids []int64, claimed state.Claims, covered map[int64]bool, n int) []int64 {
	var first, rest []int64
	for _, id := range ids {
		if _, ok := claimed[id]; ok {
			continue
		}
		if covered[id] {
			rest = append(rest, id)
		} else {
			first = append(first, id)
		}
	}
	out := append(first, rest...)
	if len(out) > n {
		out = out[:n]
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func unique(ids []int64) []int64 {
	out := append([]int64(nil), ids...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	n := 0
	for i, id := range out {
		if i == 0 || out[i-1] != id {
			out[n] = id
			n++
		}
	}
	return out[:n]
}
