//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// The racing campaign's size: campaignRacers scaler passes at once in each
// of campaignRounds rounds, with a burst of jobs pushed before some rounds.
// Bounded in count (the bursts add up to campaignJobs) and in time (the
// test's context).
const (
	campaignRacers = 8
	campaignRounds = 20
	// campaignIdle is the passes' --runner-idle-timeout: short, so that the
	// reaper works during the campaign on the runners overlapping groups
	// leave idle.
	campaignIdle = 10 * time.Second
	// campaignSpawnTTL is the passes' --spawn-ttl: a queued job without a
	// runner Job for longer, while its group has a free slot, is a job left
	// without a runner.
	campaignSpawnTTL = 45 * time.Second
)

// campaignBursts are the jobs pushed before each round (0: none).
var campaignBursts = [campaignRounds]int{3, 0, 2, 0, 4, 0, 0, 1, 3, 0, 2, 0, 0, 4, 0, 1, 0, 2, 0, 0}

// campaignTally is what the campaign counts; every field must end 0.
type campaignTally struct {
	duplicates    map[int64]bool // Gitea jobs with two active runner Jobs at one moment whose runners took no job
	overCap       int            // samples with a group over its cap
	leftQueued    map[int64]bool // queued past the spawn TTL without a runner Job while a slot was free
	surplusIdle   int            // runner Jobs left active once every job ended and the idle timeout passed
	killed        map[int64]string
	firstQueued   map[int64]time.Time
	claimedByJobs map[int64]map[string]bool // a duplicate's runner Jobs
}

// TestRacingCampaignWithRealRunners: two overlapping groups in one
// namespace (an org-scope group "wide" offering labels shared and own, and
// a repo-scope group "narrow" on the org's repository offering shared;
// caps 3 and 2), so that a runner of wide can take a job narrow started a
// runner for and leave that runner idle; jobs on either label arriving in
// bursts, and in each round eight scaler passes at once with idle reaping
// on a short timeout, Gitea's real runner taking the jobs. Between rounds
// and at the end it counts: Gitea jobs with more than one runner Job, a
// group over its cap, queued jobs left without a runner past the spawn TTL
// while a slot was free, surplus idle runners at the end, and jobs that did
// not succeed (their steps only echo, so a job that ends otherwise was
// killed or cancelled: its runner was removed under it). All must be 0.
//
// It does not run in parallel with the other tests: its eight passes at
// once and their runners load the machine enough to make other tests'
// short Gitea timeouts fire.
func TestRacingCampaignWithRealRunners(t *testing.T) {
	b := getBed(t)
	ctx := testContext(t, 12*time.Minute)

	g := b.gitea
	org := g.createOrg(ctx, t, uniq("e2e-campaign"))
	repo := g.createOrgRepo(ctx, t, org, "app")
	orgFx := scopeFixture{spec: v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeOrg, Org: org}, repo: repo, pushAs: g.admin,
		regToken: g.registrationToken(ctx, t, g.admin, giteasetup.OrgRunners(org)), apiToken: g.adminToken}
	repoFx := scopeFixture{spec: v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeRepo, Org: org, Repo: repo.Name}, repo: repo, pushAs: g.admin,
		regToken: g.registrationToken(ctx, t, g.admin, giteasetup.RepoRunners(repo)), apiToken: g.adminToken}
	shared, own := uniq("e2e-camp-shared"), uniq("e2e-camp-own")
	ns := b.namespace(ctx, t, "e2e-campaign", nil)
	caps := map[string]int32{"wide": 3, "narrow": 2}
	b.createScopedGroup(ctx, t, ns, "wide", orgFx, caps["wide"], shared, own)
	b.createScopedGroup(ctx, t, ns, "narrow", repoFx, caps["narrow"], shared)
	dump := func() string { return b.dumpNamespaces(ns) + g.jobsLine(repo) }
	passArgs := []string{"--runner-idle-timeout", campaignIdle.String(), "--spawn-ttl", campaignSpawnTTL.String()}

	tally := campaignTally{duplicates: map[int64]bool{}, leftQueued: map[int64]bool{}, killed: map[int64]string{},
		firstQueued: map[int64]time.Time{}, claimedByJobs: map[int64]map[string]bool{}}
	pushed := 0
	start := time.Now()
	for round, burst := range campaignBursts {
		if burst > 0 {
			keys, wf := numberedJobs(fmt.Sprintf("camp-%d", round), burst, shared)
			for i := range wf {
				if i%2 == 1 {
					wf[i].runsOn = []string{own}
				}
			}
			file := fmt.Sprintf("r%02d.yml", round)
			g.pushWorkflow(ctx, t, g.admin, repo, file, ownPushWorkflow(file, wf...))
			pushed += len(keys)
			// Gitea reads a push's workflows when its queue gets to it: the
			// next push waits until this one's jobs are listed (see
			// measureLatency).
			g.waitJobs(ctx, t, repo, pushed)
		}
		var wg sync.WaitGroup
		results := make([]passResult, campaignRacers)
		for i := range campaignRacers {
			wg.Go(func() { results[i] = b.pass(ctx, t, passOpts{namespaces: []string{ns}, args: passArgs}) })
		}
		wg.Wait()
		for i, r := range results {
			requireSanePass(t, r, fmt.Sprintf("round %d pass %d", round, i))
		}
		b.sampleCampaign(ctx, t, ns, repo, caps, &tally)
	}
	t.Logf("campaign: %d rounds of %d passes, %d jobs pushed, in %s", campaignRounds, campaignRacers, pushed, time.Since(start).Round(time.Second))

	// Settle: a pass every 2 s until every job has ended and no runner Job is
	// active, bounded by the idle timeout and the spawn TTL.
	settled := false
	deadline := time.Now().Add(campaignSpawnTTL + 4*campaignIdle)
	for !settled && time.Now().Before(deadline) {
		requireSanePass(t, b.pass(ctx, t, passOpts{namespaces: []string{ns}, args: passArgs}), "settling pass")
		active, done := b.sampleCampaign(ctx, t, ns, repo, caps, &tally)
		settled = done >= pushed && active == 0
		if !settled {
			sleepCtx(ctx, 2*time.Second)
		}
	}
	active, done := b.sampleCampaign(ctx, t, ns, repo, caps, &tally)
	if done >= pushed {
		tally.surplusIdle = active
	}

	t.Logf("campaign result: jobs with more than one runner=%d, samples over the cap=%d, queued past the spawn TTL without a runner=%d, surplus idle runners=%d, jobs killed or cancelled=%d (%d of %d jobs ended)",
		len(tally.duplicates), tally.overCap, len(tally.leftQueued), tally.surplusIdle, len(tally.killed), done, pushed)
	require.GreaterOrEqual(t, done, pushed, "every job ended\n%s", dump())
	require.Empty(t, tally.duplicates, "jobs with more than one runner Job: %s\n%s", describeClaims(tally.claimedByJobs), dump())
	require.Zero(t, tally.overCap, "samples with a group over its cap\n%s", dump())
	require.Empty(t, tally.leftQueued, "jobs left queued without a runner\n%s", dump())
	require.Zero(t, tally.surplusIdle, "surplus idle runners\n%s", dump())
	require.Empty(t, tally.killed, "jobs killed or cancelled\n%s", dump())
}

// sampleCampaign reads the groups' runner Jobs and the repository's Gitea
// jobs once and adds what it sees to the tally. It returns the active runner
// Jobs and the Gitea jobs that have ended.
func (b *bed) sampleCampaign(ctx context.Context, t *testing.T, ns string, repo giteasetup.Repo, caps map[string]int32, tally *campaignTally) (running, done int) {
	t.Helper()
	gjobs, err := b.gitea.repoJobs(ctx, repo)
	require.NoError(t, err)
	// Runners that took a job: the claim of a runner Job whose runner took
	// another job (Gitea hands a job to any matching runner) is served by a
	// new runner Job, so two claims of one job are a duplicate only when
	// neither runner has taken a job.
	took := map[string]bool{}
	for _, gj := range gjobs {
		if gj.RunnerName != "" {
			took[gj.RunnerName] = true
		}
	}
	claims := map[int64]bool{}
	waiting := map[int64][]string{}
	free := false
	for group, limit := range caps {
		jobs, err := b.runnerJobs(ctx, ns, group)
		require.NoError(t, err)
		n := int32(0)
		for i := range jobs {
			if !runnerjob.IsActive(&jobs[i]) {
				continue
			}
			n++
		}
		if n > limit {
			tally.overCap++
			t.Logf("group %s has %d active runner Jobs, over its cap %d: %s", group, n, limit, jobNames(jobs))
		}
		free = free || n < limit
		running += int(n)
		for id, js := range byGiteaJob(jobs) {
			if id == 0 {
				continue
			}
			claims[id] = true
			for i := range js {
				if runnerjob.IsActive(&js[i]) && !took[runnerjob.RunnerNameOf(&js[i])] {
					waiting[id] = append(waiting[id], group+"/"+js[i].Name)
				}
			}
		}
	}
	for id, names := range waiting {
		if len(names) > 1 {
			tally.duplicates[id] = true
			tally.claimedByJobs[id] = map[string]bool{}
			for _, n := range names {
				tally.claimedByJobs[id][n] = true
			}
		}
	}
	now := time.Now()
	for _, gj := range gjobs {
		switch gj.Status {
		case "completed":
			done++
			if gj.Conclusion != "success" {
				tally.killed[gj.ID] = gj.State()
			}
		case "queued":
			if _, ok := tally.firstQueued[gj.ID]; !ok {
				tally.firstQueued[gj.ID] = now
			}
			if !claims[gj.ID] && free && now.Sub(tally.firstQueued[gj.ID]) > campaignSpawnTTL {
				tally.leftQueued[gj.ID] = true
			}
		}
	}
	return running, done
}

// ownPushWorkflow is workflow(jobs...) run only by the push that adds its
// file: a later push of another file does not run it again.
func ownPushWorkflow(file string, jobs ...wfJob) string {
	_, body, _ := strings.Cut(workflow(jobs...), "jobs:\n")
	return fmt.Sprintf("name: %s\non:\n  push:\n    paths: ['.gitea/workflows/%s']\njobs:\n%s", file, file, body)
}

// describeClaims is the campaign's claims for a failure message.
func describeClaims(claims map[int64]map[string]bool) string {
	var parts []string
	for id, jobs := range claims {
		names := make([]string, 0, len(jobs))
		for n := range jobs {
			names = append(names, n)
		}
		sort.Strings(names)
		parts = append(parts, fmt.Sprintf("#%d:%s", id, strings.Join(names, ",")))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
