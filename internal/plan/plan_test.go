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

func TestMake(t *testing.T) {
	tests := []struct {
		name        string
		max         int
		jobs        []RunnerJob
		claims      state.Claims
		queued      []int64
		busy        map[string]int64
		snapshotAt  time.Duration // relative to t0; the pass runs at t0
		wantNew     []Claim
		wantClaims  state.Claims
		wantActive  int
		wantWaiting int
		wantDropped []int64
	}{
		{
			name:       "spawns one runner per queued job, oldest first",
			max:        5,
			queued:     []int64{7, 3},
			wantNew:    []Claim{{GiteaJobID: 3, JobName: "rg-00001"}, {GiteaJobID: 7, JobName: "rg-00002"}},
			wantClaims: state.Claims{3: at(0, "rg-00001"), 7: at(0, "rg-00002")},
		},
		{
			name:        "no slots beyond maxActiveRunners",
			max:         2,
			jobs:        []RunnerJob{{Name: "old", Active: true}},
			queued:      []int64{1, 2, 3},
			wantNew:     []Claim{{GiteaJobID: 1, JobName: "rg-00001"}},
			wantClaims:  state.Claims{1: at(0, "rg-00001")},
			wantActive:  1,
			wantWaiting: 2,
		},
		{
			name:        "maxActiveRunners 0 pauses the group",
			max:         0,
			queued:      []int64{1},
			wantClaims:  state.Claims{},
			wantWaiting: 1,
		},
		{
			name:       "finished runner Jobs free their slots",
			max:        1,
			jobs:       []RunnerJob{{Name: "done", Active: false}},
			queued:     []int64{1},
			wantNew:    []Claim{{GiteaJobID: 1, JobName: "rg-00001"}},
			wantClaims: state.Claims{1: at(0, "rg-00001")},
		},
		{
			name:        "a claim within the TTL is skipped",
			max:         5,
			jobs:        []RunnerJob{{Name: "a", Active: true}},
			claims:      state.Claims{1: at(-4*time.Minute, "a")},
			queued:      []int64{1},
			wantClaims:  state.Claims{1: at(-4*time.Minute, "a")},
			wantActive:  1,
			wantWaiting: 1,
		},
		{
			name:       "an expired claim whose runner Job failed is retried",
			max:        5,
			jobs:       []RunnerJob{{Name: "a", Active: false}},
			claims:     state.Claims{1: at(-6*time.Minute, "a")},
			queued:     []int64{1},
			wantNew:    []Claim{{GiteaJobID: 1, JobName: "rg-00001", Retry: true}},
			wantClaims: state.Claims{1: at(0, "rg-00001")},
		},
		{
			name:       "an expired claim whose runner Job is gone is retried",
			max:        5,
			claims:     state.Claims{1: at(-6*time.Minute, "gone")},
			queued:     []int64{1},
			wantNew:    []Claim{{GiteaJobID: 1, JobName: "rg-00001", Retry: true}},
			wantClaims: state.Claims{1: at(0, "rg-00001")},
		},
		{
			name:        "an expired claim whose runner Job is still active waits for it",
			max:         5,
			jobs:        []RunnerJob{{Name: "slow", Active: true}},
			claims:      state.Claims{1: at(-6*time.Minute, "slow")},
			queued:      []int64{1},
			wantClaims:  state.Claims{1: at(-6*time.Minute, "slow")},
			wantActive:  1,
			wantWaiting: 1,
		},
		{
			// Regression: a job that left "waiting" after its needs: finished
			// saw its runner take an older queued job and then sat queued for a
			// whole spawn TTL with a slot free.
			name:       "a claim whose runner finished while the job is still queued is spent: retried at once",
			max:        1,
			jobs:       []RunnerJob{{Name: "took-another", Active: false}},
			claims:     state.Claims{1: at(-time.Minute, "took-another")},
			queued:     []int64{1},
			wantNew:    []Claim{{GiteaJobID: 1, JobName: "rg-00001", Retry: true}},
			wantClaims: state.Claims{1: at(0, "rg-00001")},
		},
		{
			name:       "a claim whose runner runs another job is spent: retried at once if a slot is free",
			max:        2,
			jobs:       []RunnerJob{{Name: "r1", Active: true}},
			claims:     state.Claims{1: at(-time.Minute, "r1")},
			queued:     []int64{1},
			busy:       map[string]int64{"r1": 9},
			wantNew:    []Claim{{GiteaJobID: 1, JobName: "rg-00001", Retry: true}},
			wantClaims: state.Claims{1: at(0, "rg-00001")},
			wantActive: 1,
		},
		{
			name:        "a spent claim waits for a slot like any other job",
			max:         1,
			jobs:        []RunnerJob{{Name: "r1", Active: true}},
			claims:      state.Claims{1: at(-time.Minute, "r1")},
			queued:      []int64{1},
			busy:        map[string]int64{"r1": 9},
			wantClaims:  state.Claims{1: at(-time.Minute, "r1")},
			wantActive:  1,
			wantWaiting: 1,
		},
		{
			name:        "claims of jobs no longer queued are dropped",
			max:         5,
			claims:      state.Claims{1: at(-time.Minute, "a"), 2: at(-10*time.Minute, "b")},
			queued:      nil,
			wantClaims:  state.Claims{},
			wantDropped: []int64{1, 2},
		},
		{
			name:        "a claim newer than the snapshot is kept: another pass saw a job this one had not",
			max:         1,
			claims:      state.Claims{9: at(-time.Second, "other")},
			snapshotAt:  -2 * time.Second,
			queued:      []int64{1},
			wantClaims:  state.Claims{9: at(-time.Second, "other")},
			wantActive:  1,
			wantWaiting: 1,
		},
		{
			name:        "claims whose Job is being created hold their slots",
			max:         2,
			claims:      state.Claims{1: at(-time.Second, "creating-1"), 2: at(-time.Second, "creating-2")},
			queued:      []int64{1, 2, 3},
			wantClaims:  state.Claims{1: at(-time.Second, "creating-1"), 2: at(-time.Second, "creating-2")},
			wantActive:  2,
			wantWaiting: 3,
		},
		{
			name:        "a claim whose Job never appeared stops holding a slot after the TTL",
			max:         1,
			claims:      state.Claims{1: at(-6*time.Minute, "never")},
			queued:      []int64{2},
			wantNew:     []Claim{{GiteaJobID: 2, JobName: "rg-00001"}},
			wantClaims:  state.Claims{2: at(0, "rg-00001")},
			wantDropped: []int64{1},
		},
		{
			name:       "a Gitea job listed twice gets one runner",
			max:        5,
			queued:     []int64{4, 4},
			wantNew:    []Claim{{GiteaJobID: 4, JobName: "rg-00001"}},
			wantClaims: state.Claims{4: at(0, "rg-00001")},
		},
		{
			name:        "more active Jobs than the cap leave no slot and nothing negative",
			max:         1,
			jobs:        []RunnerJob{{Name: "a", Active: true}, {Name: "b", Active: true}},
			queued:      []int64{1},
			wantClaims:  state.Claims{},
			wantActive:  2,
			wantWaiting: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claims := tt.claims
			if claims == nil {
				claims = state.Claims{}
			}
			before := claims.Clone()
			got := Make(Input{
				Now: t0, SpawnTTL: 5 * time.Minute, MaxActive: tt.max,
				Jobs: tt.jobs, Claims: claims, Queued: tt.queued, Busy: tt.busy,
				SnapshotAt: t0.Add(tt.snapshotAt), NewJobName: names(),
			})
			assert.Equal(t, tt.wantNew, got.New, "new claims")
			assert.Equal(t, tt.wantClaims, got.Claims, "claims to store")
			assert.Equal(t, tt.wantActive, got.Active, "active")
			assert.Equal(t, tt.wantWaiting, got.Waiting, "waiting")
			assert.Equal(t, tt.wantDropped, got.Dropped, "dropped")
			assert.Equal(t, before, claims, "the input claims must not change")
		})
	}
}
