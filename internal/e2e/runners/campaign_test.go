//go:build e2e

package runners

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

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
	// runner Job for longer, while a group that serves it has a free slot,
	// is a job left without a runner.
	campaignSpawnTTL = 45 * time.Second
	// campaignStart is the passes' --runner-start-timeout: short, so that
	// the long job's runner is well past it while it runs.
	campaignStart = 30 * time.Second
	// campaignLong is how long the long job is held running: past the
	// start timeout and the minute a runner container may run before a
	// runner missing from the listing counts as unregistered, with
	// rounds of passes after that.
	campaignLong = campaignStart + time.Minute + 20*time.Second
	// campaignGraceRound and campaignMoveRound are the rounds before which
	// wide's grace changes and narrow moves to the other repository.
	campaignGraceRound = 6
	campaignMoveRound  = 10
	// campaignGrace is wide's terminationGracePeriodSeconds from
	// campaignGraceRound on (the built-in one before).
	campaignGrace = 300
)

// campaignBursts are the jobs pushed before each round (0: none).
var campaignBursts = [campaignRounds]int{3, 0, 2, 0, 4, 0, 0, 1, 3, 0, 2, 0, 0, 4, 0, 1, 0, 2, 0, 0}

// campaignTally is what the campaign counts; every field must end 0.
type campaignTally struct {
	duplicates  map[int64]bool // Gitea jobs with two active runner Jobs at one moment whose runners took no job
	overCap     int            // samples with a group over its cap
	leftQueued  map[int64]bool // queued past the spawn TTL without a runner Job while a group serving it had a free slot
	surplusIdle int            // runner Jobs left active once every job ended and the idle timeout passed
	killed      map[int64]string
	// deletedMidJob are the Gitea jobs whose runner's Job was seen deleted
	// (gone or terminating) while Gitea showed the job running on it: a
	// job killed, whatever the runner's shutdown_timeout then saved.
	deletedMidJob map[int64]string
	firstQueued   map[int64]time.Time
	claimedByJobs map[int64]map[string]bool // a duplicate's runner Jobs
	// runners are the runner Jobs seen so far, by their runner's name.
	runners map[string]string
	// elsewhere counts the Gitea jobs of another repository than its
	// group's that a runner of narrow ran (what its org token allows).
	elsewhere map[int64]string
}

// campaignGroup is what the campaign knows of one group: its cap, the
// labels it offers and the repositories whose jobs it serves.
type campaignGroup struct {
	max    int32
	labels []string
	repos  []giteasetup.Repo
}

// serves says whether the group serves a job: its repository is one of
// the group's and the group offers every label it runs on.
func (c campaignGroup) serves(repo giteasetup.Repo, labels []string) bool {
	if !slices.Contains(c.repos, repo) {
		return false
	}
	for _, l := range labels {
		if !slices.Contains(c.labels, l) {
			return false
		}
	}
	return true
}

// TestRacingCampaignWithRealRunners: two overlapping groups in one
// namespace of an organisation with repositories app, lib and docs: an
// org-scope group "wide" offering labels shared and own, and a repo-scope
// group "narrow" on app offering shared and solo, whose registration token
// is the organisation's (a containing scope: its runners register in the
// org, so Gitea hands them any org job their labels match); caps 3 and 2.
// A runner of wide can take a job narrow started a runner for and leave
// that runner idle; a runner of narrow takes other repositories' jobs. Jobs
// on shared or own arrive in bursts in app and lib; before the first burst
// a long job of docs on solo, which only a runner of narrow can take (and
// no group serves: docs is never narrow's repository), is queued and held
// running for campaignLong. Mid-campaign wide's
// terminationGracePeriodSeconds changes and narrow moves to lib. In each
// round eight scaler passes run at once with idle reaping and the start
// timeout short, Gitea's real runner taking the jobs. Between rounds and
// at the end it counts: Gitea jobs with more than one runner Job, a group
// over its cap, queued jobs left without a runner past the spawn TTL while
// a group serving them had a free slot, surplus idle runners at the end,
// runner Jobs deleted while Gitea showed their job running, and jobs that
// did not succeed (their steps only echo, so a job that ends otherwise was
// killed or cancelled: its runner was removed under it). All must be 0.
//
// It does not run in parallel with the other tests: its eight passes at
// once and their runners load the machine enough to make other tests'
// short Gitea timeouts fire.
func TestRacingCampaignWithRealRunners(t *testing.T) {
	// Alone on the bed: see above.
	e2e.Exclusive(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 12*time.Minute)

	g := b.Gitea
	org := g.CreateOrg(ctx, t, e2e.Uniq("e2e-campaign"))
	app := g.CreateOrgRepo(ctx, t, org, "app")
	lib := g.CreateOrgRepo(ctx, t, org, "lib")
	docs := g.CreateOrgRepo(ctx, t, org, "docs")
	repos := []giteasetup.Repo{app, lib}
	sampled := []giteasetup.Repo{app, lib, docs}
	orgToken := g.RegistrationToken(ctx, t, g.Admin, giteasetup.OrgRunners(org))
	orgFx := e2e.ScopeFixture{Spec: v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeOrg, Org: org}, Repo: app, PushAs: g.Admin,
		RegToken: orgToken, APIToken: g.AdminToken}
	// narrow uses the org's registration token: a containing scope.
	repoFx := e2e.ScopeFixture{Spec: v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeRepo, Org: org, Repo: app.Name}, Repo: app, PushAs: g.Admin,
		RegToken: orgToken, APIToken: g.AdminToken}
	shared, own, solo := e2e.Uniq("e2e-camp-shared"), e2e.Uniq("e2e-camp-own"), e2e.Uniq("e2e-camp-solo")
	ns := b.Namespace(ctx, t, "e2e-campaign", nil)
	groups := map[string]*campaignGroup{
		"wide":   {max: 3, labels: []string{shared, own}, repos: repos},
		"narrow": {max: 2, labels: []string{shared, solo}, repos: []giteasetup.Repo{app}},
	}
	for name, cg := range groups {
		fx := orgFx
		if name == "narrow" {
			fx = repoFx
		}
		b.CreateScopedGroup(ctx, t, ns, name, fx, cg.max, cg.labels...)
	}
	dump := func() string { return b.DumpNamespaces(ns) + g.JobsLine(sampled...) }
	passArgs := []string{"--runner-idle-timeout", campaignIdle.String(), "--spawn-ttl", campaignSpawnTTL.String(),
		"--runner-start-timeout", campaignStart.String()}

	tally := campaignTally{duplicates: map[int64]bool{}, leftQueued: map[int64]bool{}, killed: map[int64]string{},
		deletedMidJob: map[int64]string{}, firstQueued: map[int64]time.Time{}, claimedByJobs: map[int64]map[string]bool{},
		runners: map[string]string{}, elsewhere: map[int64]string{}}
	pushed := map[giteasetup.Repo]int{}
	push := func(r giteasetup.Repo, file string, wf ...e2e.WfJob) {
		g.PushWorkflow(ctx, t, g.Admin, r, file, ownPushWorkflow(file, wf...))
		pushed[r] += len(wf)
		// Gitea reads a push's workflows when its queue gets to it: the
		// next push waits until this one's jobs are listed (see
		// measureLatency).
		g.WaitJobs(ctx, t, r, pushed[r])
	}
	total := func() int { return pushed[app] + pushed[lib] + pushed[docs] }

	// The long job first, so that it is the oldest waiting job narrow's
	// first runner can take (Gitea orders by update time, in seconds).
	long := e2e.JobKey("camp", "long")
	b.Hold(t, long)
	push(docs, "long.yml", e2e.WfJob{Key: long, RunsOn: []string{solo}})
	longID := e2e.IDsOf(g.WaitJobs(ctx, t, docs, 1), long)[long]
	e2e.SleepCtx(ctx, 1100*time.Millisecond)
	var longSince time.Time
	releaseLong := func() {
		if !longSince.IsZero() && time.Since(longSince) < campaignLong {
			return
		}
		gj, err := b.GiteaJob(ctx, docs, longID)
		require.NoError(t, err)
		switch {
		case gj.Status == "in_progress" && longSince.IsZero():
			longSince = time.Now()
		case gj.Status == "in_progress" && time.Since(longSince) >= campaignLong:
			b.Release(t, long)
			t.Logf("long job released after %s running on %s", time.Since(longSince).Round(time.Second), gj.RunnerName)
			longSince = time.Now().Add(time.Hour) // released
		}
	}

	start := time.Now()
	bursts := 0
	for round, burst := range campaignBursts {
		switch round {
		case campaignGraceRound:
			b.PatchGroup(ctx, t, ns, "wide", map[string]any{"spec": map[string]any{"template": map[string]any{
				"spec": map[string]any{"terminationGracePeriodSeconds": campaignGrace}}}})
			t.Logf("round %d: wide's terminationGracePeriodSeconds set to %d", round, campaignGrace)
		case campaignMoveRound:
			b.PatchGroup(ctx, t, ns, "narrow", map[string]any{"spec": map[string]any{"repo": lib.Name}})
			groups["narrow"].repos = []giteasetup.Repo{lib}
			t.Logf("round %d: narrow moved from %s to %s", round, app, lib)
		}
		if burst > 0 {
			r := repos[bursts%2]
			bursts++
			_, wf := e2e.NumberedJobs(fmt.Sprintf("camp-%d", round), burst, shared)
			for i := range wf {
				if i%2 == 1 {
					wf[i].RunsOn = []string{own}
				}
			}
			push(r, fmt.Sprintf("r%02d.yml", round), wf...)
		}
		var wg sync.WaitGroup
		results := make([]e2e.PassResult, campaignRacers)
		for i := range campaignRacers {
			wg.Go(func() { results[i] = b.Pass(ctx, t, e2e.PassOpts{Namespaces: []string{ns}, Args: passArgs}) })
		}
		wg.Wait()
		for i, r := range results {
			e2e.RequireSanePass(t, r, fmt.Sprintf("round %d pass %d", round, i))
		}
		sampleCampaign(b, ctx, t, ns, sampled, groups, &tally)
		releaseLong()
	}
	t.Logf("campaign: %d rounds of %d passes, %d jobs pushed, in %s", campaignRounds, campaignRacers, total(), time.Since(start).Round(time.Second))

	// Settle: a pass every 2 s until every job has ended and no runner Job is
	// active, bounded by the long job's hold, the idle timeout and the spawn
	// TTL.
	settled := false
	deadline := time.Now().Add(campaignLong + campaignSpawnTTL + 4*campaignIdle)
	for !settled && time.Now().Before(deadline) {
		e2e.RequireSanePass(t, b.Pass(ctx, t, e2e.PassOpts{Namespaces: []string{ns}, Args: passArgs}), "settling pass")
		active, done := sampleCampaign(b, ctx, t, ns, sampled, groups, &tally)
		releaseLong()
		settled = done >= total() && active == 0
		if !settled {
			e2e.SleepCtx(ctx, 2*time.Second)
		}
	}
	active, done := sampleCampaign(b, ctx, t, ns, sampled, groups, &tally)
	if done >= total() {
		tally.surplusIdle = active
	}

	t.Logf("campaign result: jobs with more than one runner=%d, samples over the cap=%d, queued past the spawn TTL without a runner=%d, surplus idle runners=%d, runner Jobs deleted mid-job=%d, jobs killed or cancelled=%d (%d of %d jobs ended; narrow's runners ran %d jobs of a repository not its group's: %v)",
		len(tally.duplicates), tally.overCap, len(tally.leftQueued), tally.surplusIdle, len(tally.deletedMidJob), len(tally.killed), done, total(), len(tally.elsewhere), tally.elsewhere)
	require.GreaterOrEqual(t, done, total(), "every job ended\n%s", dump())
	require.Empty(t, tally.duplicates, "jobs with more than one runner Job: %s\n%s", describeClaims(tally.claimedByJobs), dump())
	require.Zero(t, tally.overCap, "samples with a group over its cap\n%s", dump())
	require.Empty(t, tally.leftQueued, "jobs left queued without a runner\n%s", dump())
	require.Zero(t, tally.surplusIdle, "surplus idle runners\n%s", dump())
	require.Empty(t, tally.deletedMidJob, "runner Jobs deleted while their job ran\nevents: %s\n%s", b.ReapedMessages(ctx, t, ns), dump())
	require.Empty(t, tally.killed, "jobs killed or cancelled\n%s", dump())
}

// sampleCampaign reads the groups' runner Jobs and the repositories' Gitea
// jobs once and adds what it sees to the tally. It returns the active runner
// Jobs and the Gitea jobs that have ended.
func sampleCampaign(b *e2e.Testbed, ctx context.Context, t *testing.T, ns string, repos []giteasetup.Repo, groups map[string]*campaignGroup, tally *campaignTally) (running, done int) {
	t.Helper()
	// Gitea first: a runner Job read after Gitea showed its job running
	// exists (a Job that completed stays for its TTL) unless it was
	// deleted.
	type repoJob struct {
		giteasetup.Job
		repo giteasetup.Repo
	}
	var gjobs []repoJob
	for _, r := range repos {
		list, err := b.Gitea.RepoJobs(ctx, r)
		require.NoError(t, err)
		for _, gj := range list {
			gjobs = append(gjobs, repoJob{gj, r})
		}
	}
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
	free := map[string]bool{}
	live := map[string]string{} // runner name -> its Job's state now
	for group, cg := range groups {
		jobs, err := b.RunnerJobs(ctx, ns, group)
		require.NoError(t, err)
		n := int32(0)
		for i := range jobs {
			j := &jobs[i]
			name := runnerjob.RunnerNameOf(j)
			tally.runners[name] = group + "/" + j.Name
			live[name] = e2e.JobState(j)
			if j.DeletionTimestamp != nil {
				live[name] = "terminating"
			}
			if !runnerjob.IsActive(j) {
				continue
			}
			n++
		}
		if n > cg.max {
			tally.overCap++
			t.Logf("group %s has %d active runner Jobs, over its cap %d: %s", group, n, cg.max, e2e.JobNames(jobs))
		}
		free[group] = n < cg.max
		running += int(n)
		for id, js := range e2e.ByGiteaJob(jobs) {
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
		case "in_progress":
			job, ours := tally.runners[gj.RunnerName]
			if st := live[gj.RunnerName]; ours && (st == "" || st == "terminating") {
				if _, seen := tally.deletedMidJob[gj.ID]; !seen {
					t.Logf("runner Job %s deleted (%s) while Gitea job %s#%d of %s runs on it", job, cmp.Or(st, "gone"), gj.Name, gj.ID, gj.repo)
				}
				tally.deletedMidJob[gj.ID] = job
			}
			if ours && strings.HasPrefix(job, "narrow/") && !groups["narrow"].serves(gj.repo, nil) {
				tally.elsewhere[gj.ID] = job + " ran " + gj.repo.String() + "#" + strconv.FormatInt(gj.ID, 10)
			}
		case "queued":
			if _, ok := tally.firstQueued[gj.ID]; !ok {
				tally.firstQueued[gj.ID] = now
			}
			servedFree := false
			for group, cg := range groups {
				servedFree = servedFree || free[group] && cg.serves(gj.repo, gj.Labels)
			}
			if !claims[gj.ID] && servedFree && now.Sub(tally.firstQueued[gj.ID]) > campaignSpawnTTL {
				tally.leftQueued[gj.ID] = true
			}
		}
	}
	return running, done
}

// ownPushWorkflow is workflow(jobs...) run only by the push that adds its
// file: a later push of another file does not run it again.
func ownPushWorkflow(file string, jobs ...e2e.WfJob) string {
	_, body, _ := strings.Cut(e2e.Workflow(jobs...), "jobs:\n")
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
