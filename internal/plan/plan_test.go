package plan

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func names() func() string {
	n := 0
	return func() string { n++; return fmt.Sprintf("rg-%05d", n) }
}

func at(d time.Duration, job string) state.Entry {
	return state.Entry{ClaimedAt: t0.Add(d), JobName: job}
}

func starting(name string, id int64) RunnerJob {
	return RunnerJob{Name: name, Active: true, GiteaJobID: id}
}

func busy(name string, id int64) RunnerJob {
	return RunnerJob{Name: name, Active: true, Busy: true, GiteaJobID: id}
}

func TestMake(t *testing.T) {
	tests := []struct {
		name        string
		max         int
		jobs        []RunnerJob
		claims      state.Claims
		queued      []int64
		wantClaims  []Claim
		wantState   state.Claims
		wantActive  int
		wantWaiting int
		wantSurplus int
		wantDropped []int64
	}{
		{
			name:       "one runner per queued job, oldest first",
			max:        5,
			queued:     []int64{7, 3},
			wantClaims: []Claim{{3, "rg-00001"}, {7, "rg-00002"}},
			wantState:  state.Claims{3: at(0, "rg-00001"), 7: at(0, "rg-00002")},
		},
		{
			name:       "a runner that can take no work holds its slot and is no supply",
			max:        2,
			jobs:       []RunnerJob{{Name: "disabled", Active: true, Unavailable: true, GiteaJobID: 1}},
			queued:     []int64{1},
			wantClaims: []Claim{{1, "rg-00001"}},
			wantState:  state.Claims{1: at(0, "rg-00001")},
			wantActive: 1,
		},
		{
			name:       "a stranded runner (left in a place no pass can reach) holds no slot and is no supply",
			max:        1,
			jobs:       []RunnerJob{{Name: "stranded", Active: true, Unavailable: true, Stranded: true, GiteaJobID: 1}},
			queued:     []int64{1},
			wantClaims: []Claim{{1, "rg-00001"}},
			wantState:  state.Claims{1: at(0, "rg-00001")},
		},
		{
			name:        "no slots beyond maxActiveRunners",
			max:         2,
			jobs:        []RunnerJob{busy("old", 99)},
			queued:      []int64{1, 2, 3},
			wantClaims:  []Claim{{1, "rg-00001"}},
			wantState:   state.Claims{1: at(0, "rg-00001")},
			wantActive:  1,
			wantWaiting: 2,
		},
		{
			name:        "maxActiveRunners 0 pauses the group",
			max:         0,
			queued:      []int64{1},
			wantState:   state.Claims{},
			wantWaiting: 1,
		},
		{
			name:       "finished runner Jobs free their slots and are no supply",
			max:        1,
			jobs:       []RunnerJob{{Name: "done", GiteaJobID: 1}},
			queued:     []int64{1},
			wantClaims: []Claim{{1, "rg-00001"}},
			wantState:  state.Claims{1: at(0, "rg-00001")},
		},
		{
			name:       "a starting runner covers one queued job, whichever it was started for",
			max:        5,
			jobs:       []RunnerJob{starting("a", 1)},
			queued:     []int64{1, 2},
			wantClaims: []Claim{{2, "rg-00001"}},
			wantState:  state.Claims{2: at(0, "rg-00001")},
			wantActive: 1,
		},
		{
			// Jobs 7 and 8 got runners r7 and r8; Gitea gave job 8 to r7.
			// r8 is still starting and will take job 7: no third runner.
			name:       "runners that swapped jobs leave no surplus",
			max:        5,
			jobs:       []RunnerJob{busy("r7", 7), starting("r8", 8)},
			queued:     []int64{7},
			wantState:  state.Claims{},
			wantActive: 2,
		},
		{
			// Regression: a job that left "waiting" after its needs: finished
			// saw its runner take an older queued job; it must get a runner at
			// once, not after a TTL.
			name:       "a runner busy with another job is no supply: the job gets a runner at once",
			max:        2,
			jobs:       []RunnerJob{busy("r1", 1)},
			queued:     []int64{1},
			wantClaims: []Claim{{1, "rg-00001"}},
			wantState:  state.Claims{1: at(0, "rg-00001")},
			wantActive: 1,
		},
		{
			name:        "a job missed by one listing keeps its runner: nothing is dropped or started",
			max:         5,
			jobs:        []RunnerJob{starting("a", 1), starting("b", 2)},
			queued:      []int64{2},
			wantState:   state.Claims{},
			wantActive:  2,
			wantSurplus: 1,
		},
		{
			name:        "a claim whose Job is listed is dropped: the Job speaks for itself",
			max:         5,
			jobs:        []RunnerJob{starting("a", 1)},
			claims:      state.Claims{1: at(-time.Minute, "a")},
			queued:      []int64{1},
			wantState:   state.Claims{},
			wantActive:  1,
			wantDropped: []int64{1},
		},
		{
			// A user deleted one of a group's runner Jobs while its job is
			// still queued: the next pass replaces it, it does not wait out a TTL.
			name:        "a runner Job deleted after it was seen is replaced at once",
			max:         4,
			jobs:        []RunnerJob{starting("a", 1), starting("b", 2), starting("c", 3)},
			queued:      []int64{1, 2, 3, 4},
			wantClaims:  []Claim{{4, "rg-00001"}},
			wantState:   state.Claims{4: at(0, "rg-00001")},
			wantActive:  3,
			wantDropped: nil,
		},
		{
			name:       "claims whose Job is being created are supply and hold their slots",
			max:        3,
			claims:     state.Claims{1: at(-time.Second, "creating-1"), 2: at(-time.Second, "creating-2")},
			queued:     []int64{1, 2, 3},
			wantClaims: []Claim{{3, "rg-00001"}},
			wantState:  state.Claims{1: at(-time.Second, "creating-1"), 2: at(-time.Second, "creating-2"), 3: at(0, "rg-00001")},
			wantActive: 2,
		},
		{
			name:        "a claim in flight for a job no longer queued is still supply until its Job shows",
			max:         2,
			claims:      state.Claims{9: at(-time.Second, "other")},
			queued:      []int64{1},
			wantState:   state.Claims{9: at(-time.Second, "other")},
			wantActive:  1,
			wantDropped: nil,
		},
		{
			name:        "a claim whose Job never appeared stops counting after the TTL",
			max:         1,
			claims:      state.Claims{1: at(-6*time.Minute, "never")},
			queued:      []int64{2},
			wantClaims:  []Claim{{2, "rg-00001"}},
			wantState:   state.Claims{2: at(0, "rg-00001")},
			wantDropped: []int64{1},
		},
		{
			name:       "a claim from the future (clock skew) counts as fresh",
			max:        1,
			claims:     state.Claims{1: at(10*time.Minute, "ahead")},
			queued:     []int64{1, 2},
			wantState:  state.Claims{1: at(10*time.Minute, "ahead")},
			wantActive: 1, wantWaiting: 1,
		},
		{
			name:       "a Gitea job listed twice gets one runner",
			max:        5,
			queued:     []int64{4, 4},
			wantClaims: []Claim{{4, "rg-00001"}},
			wantState:  state.Claims{4: at(0, "rg-00001")},
		},
		{
			name:        "more active Jobs than the cap leave no slot and nothing negative",
			max:         1,
			jobs:        []RunnerJob{busy("a", 8), busy("b", 9)},
			queued:      []int64{1},
			wantState:   state.Claims{},
			wantActive:  2,
			wantWaiting: 1,
		},
		{
			name:        "idle runners beyond the demand are surplus",
			max:         5,
			jobs:        []RunnerJob{starting("a", 1), starting("b", 2), busy("c", 3)},
			wantState:   state.Claims{},
			wantActive:  3,
			wantSurplus: 2,
		},
		{
			name:       "when every queued job has a runner started for it, new runners still get a job to name",
			max:        5,
			jobs:       []RunnerJob{busy("a", 1), busy("b", 2)},
			queued:     []int64{1, 2},
			wantClaims: []Claim{{1, "rg-00001"}, {2, "rg-00002"}},
			wantState:  state.Claims{1: at(0, "rg-00001"), 2: at(0, "rg-00002")},
			wantActive: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claims := tt.claims
			if claims == nil {
				claims = state.Claims{}
			}
			held := Make(Input{Now: t0, ClaimTTL: 5 * time.Minute, MaxActive: tt.max, Jobs: tt.jobs, Claims: claims, Queued: tt.queued, NewJobName: names(), Hold: true})
			assert.Empty(t, held.New, "a held plan claims nothing")
			assert.Equal(t, tt.wantWaiting+len(tt.wantClaims), held.Waiting, "a held plan leaves its claims waiting")

			if claims == nil {
				claims = state.Claims{}
			}
			before := claims.Clone()
			got := Make(Input{
				Now: t0, ClaimTTL: 5 * time.Minute, MaxActive: tt.max,
				Jobs: tt.jobs, Claims: claims, Queued: tt.queued, NewJobName: names(),
			})
			assert.Equal(t, tt.wantClaims, got.New)
			assert.Equal(t, tt.wantState, got.Claims)
			assert.Equal(t, tt.wantActive, got.Active, "active")
			assert.Equal(t, tt.wantWaiting, got.Waiting, "waiting")
			assert.Equal(t, tt.wantSurplus, got.Surplus, "surplus")
			assert.Equal(t, tt.wantDropped, got.Dropped, "dropped")
			assert.Equal(t, before, claims, "the input state must not change")
		})
	}
}

// TestMakeWarmPool: ARC's semantics, desired = min(MinIdle + demand,
// maxActiveRunners) runners that are not busy; the demand is served first,
// warm claims take negative keys that no other claim holds.
func TestMakeWarmPool(t *testing.T) {
	idle := func(name string, id int64) RunnerJob { return RunnerJob{Name: name, Active: true, GiteaJobID: id} }
	tests := []struct {
		name        string
		max, warm   int
		jobs        []RunnerJob
		claims      state.Claims
		queued      []int64
		hold        bool
		wantClaims  []Claim
		wantWarm    int
		wantSurplus int
	}{
		{name: "no demand starts the pool", max: 5, warm: 2,
			wantClaims: []Claim{{-1, "rg-00001"}, {-2, "rg-00002"}}, wantWarm: 2},
		{name: "a full pool starts nothing", max: 5, warm: 2, jobs: []RunnerJob{idle("a", 0), idle("b", 0)},
			wantSurplus: 2},
		{name: "demand first, then the pool", max: 5, warm: 2, queued: []int64{9},
			wantClaims: []Claim{{9, "rg-00001"}, {-1, "rg-00002"}, {-2, "rg-00003"}}, wantWarm: 2},
		{name: "the pool serves a job and is topped up", max: 5, warm: 2, jobs: []RunnerJob{idle("a", 0), idle("b", 0)}, queued: []int64{9},
			wantClaims: []Claim{{-1, "rg-00001"}}, wantWarm: 1, wantSurplus: 1},
		{name: "the cap holds: min(warm + demand, max)", max: 3, warm: 2, queued: []int64{8, 9},
			wantClaims: []Claim{{8, "rg-00001"}, {9, "rg-00002"}, {-1, "rg-00003"}}, wantWarm: 1},
		{name: "busy runners take slots from the pool", max: 2, warm: 2, jobs: []RunnerJob{busy("x", 5)},
			wantClaims: []Claim{{-1, "rg-00001"}}, wantWarm: 1},
		{name: "a warm claim in flight counts, and its key is not reused", max: 5, warm: 2, claims: state.Claims{-1: at(-time.Second, "w1")},
			wantClaims: []Claim{{-2, "rg-00001"}}, wantWarm: 1, wantSurplus: 1},
		{name: "held: no claim", max: 5, warm: 2, hold: true},
		{name: "no pool: the demand only", max: 5, warm: 0, queued: []int64{9},
			wantClaims: []Claim{{9, "rg-00001"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			claims := tc.claims
			if claims == nil {
				claims = state.Claims{}
			}
			res := Make(Input{Now: t0, ClaimTTL: time.Minute, MaxActive: tc.max, MinIdle: tc.warm, Jobs: tc.jobs,
				Claims: claims, Queued: tc.queued, NewJobName: names(), Hold: tc.hold})
			assert.Equal(t, tc.wantClaims, res.New)
			assert.Equal(t, tc.wantWarm, res.Warm)
			assert.Equal(t, tc.wantSurplus, res.Surplus)
			assert.LessOrEqual(t, res.Active+len(res.New), tc.max, "never above the cap")
			for _, c := range res.New {
				assert.Equal(t, c.GiteaJobID < 0, IsWarm(c.GiteaJobID))
				assert.Contains(t, res.Claims, c.GiteaJobID, "every new claim is stored")
			}
		})
	}
}
