//go:build e2e

// The scale-up latency harness: how long a push that queues a Gitea job
// waits for its runner Job to exist, and for the job to be in_progress on a
// runner, on the bed with the real Gitea and Gitea's real runner, in each of the
// scaler's modes:
//
//   - webhook: a looping scaler whose next poll is ten minutes away, woken by
//     the real Gitea's workflow_job delivery (the bed's Gitea allows
//     loopback targets in [webhook] ALLOWED_HOST_LIST). Every runner Job
//     after its first pass comes from a delivery or a follow-up pass: the
//     harness gives up long before that poll, so this mode fails when the
//     webhook does not work. It runs as a local process bound to
//     127.0.0.1: the bed's pods share one address, and the chart's
//     listener binds its webhook port on every interface, which a test
//     must not do on these machines;
//   - chain: the same scaler, each sample the second job of a `needs:`
//     chain, queued as the first one's runner finishes;
//   - loop: the chart's Deployment, one pass every latencyInterval;
//   - cronjob: the chart's CronJob, one pass a minute (the chart's default);
//   - webhook-warm and loop-warm: the webhook and loop modes with a warm
//     pool (spec.minIdleRunners), whose registered runners ask Gitea for
//     work at gitea-runner's own default pace (fetch_interval 2s, backing
//     off to fetch_interval_max 5s while idle), not the bed's faster one:
//     a warm runner takes a job within that pace, whatever the scaler's
//     mode, and the scaler's mode decides how fast the pool is topped up.
//
// Each sample is one push of a workflow file that triggers only itself and
// holds one job (two for a chain). Where the scaler polls (loop, cronjob), a job's wait
// depends on where in the poll period it is queued, as it does for real
// pushes, which come at random points of the period. So that 20 samples
// give the p50 of such a random point without the noise of 20 random
// draws, the pushes are spread evenly over the period: the first at a
// random offset, each next one period×j/n later, with j coprime to the n
// samples, so that their points in the period are n distinct multiples of
// period/n. The webhook modes have no period; their pushes come at random,
// 1 to 3 s apart, or 5 to 15 s for the chains.
//
// `make bench-latency` takes latencyFullSamples samples per mode, one mode
// after the other so that they do not slow each other, and prints the
// percentiles; the e2e suite takes a few per mode, side by side with its
// other tests, so the harness cannot rot. Nothing asserts a time (the
// machines are shared): the harness fails when a job gets no runner Job or
// two, when a push starts more than its one job, or when a job does not end
// in success on one of its group's runners.

package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

const (
	// latencyFullSamples is how many jobs each mode measures in
	// `make bench-latency`.
	latencyFullSamples = 20
	// latencyInterval is the loop mode's scaler.interval in
	// `make bench-latency`.
	latencyInterval = 10 * time.Second
	// latencyPollEvery paces the harness's reading of Gitea's job list:
	// the "queued" and "in_progress" times are up to this late.
	latencyPollEvery = 100 * time.Millisecond
	// latencyMinGap is the least time between two pushes: more than Gitea
	// takes to list a pushed job when its push_update queue is idle (up to
	// 2.6s measured), so that the next push seldom waits for it and the
	// schedule holds.
	latencyMinGap = 4 * time.Second
	// latencyListedWait bounds the wait for a pushed job to be listed.
	latencyListedWait = time.Minute
	// latencyWebhookPoll is the webhook mode's --interval: far beyond the
	// measurement, so every runner Job it makes comes from a delivery.
	latencyWebhookPoll = 10 * time.Minute
	// latencyWarmPool is the warm modes' spec.minIdleRunners: enough that
	// pushes 4.5 s apart (loop-warm) rarely find the pool empty between
	// two passes 10 s apart.
	latencyWarmPool = 3
)

// latencyWarmRunnerConfig is the warm modes' spec.runnerConfig:
// gitea-runner 1.0.8's defaults for its fetch pace (see internal/pkg/config
// in its source), written out over the bed's faster defaults, so the
// figures are those of a runner as users run it.
func latencyWarmRunnerConfig() *v1alpha1.RunnerConfig {
	return &v1alpha1.RunnerConfig{Runner: &v1alpha1.RunnerRunnerConfig{FetchInterval: ptr.To("2s"), FetchIntervalMax: ptr.To("5s")}}
}

// latencyMode is one way of running the scaler, and how its pushes are
// paced.
type latencyMode struct {
	name    string
	samples int
	// period is the scaler's poll period, over which the pushes are
	// spread evenly (see pushGaps); 0 for none: then the pushes are
	// spacing/2 to 3×spacing/2 apart, at random.
	period, spacing time.Duration
	// chain makes each sample the second job of a `needs:` chain: it is
	// queued when the first job, on a runner of its own, has succeeded.
	chain bool
	// warm is the group's warm pool (spec.minIdleRunners); 0 for none.
	// Its jobs are taken by runners that were started for no job, so
	// the mode measures queued → in_progress, not the runner Job's
	// creation.
	warm int32
	// goal is the README's promise for the p50 from push to runner Job;
	// 0 for none.
	goal     time.Duration
	goalText string
	// fullOnly leaves the mode out of the e2e suite's smoke run.
	fullOnly bool
	// setUp makes the scene and starts its scaler; the scaler stops when
	// the test ends.
	setUp func(ctx context.Context, t *testing.T, b *e2e.Testbed) latencyScene
}

// latencyScene is a group served by a scaler in some mode.
type latencyScene struct {
	ns, group, label string
	fx               e2e.ScopeFixture
	dump             func() string
}

// latencyModes are the three modes, with full or smoke sample counts. The
// smoke's CronJob sample is pushed at once, without waiting for a first
// tick, and served by it: that bounds the smoke to about a minute, the
// e2e suite's longest tests' time.
func latencyModes(full bool) []latencyMode {
	interval, samples, chainSamples, cronSamples, cronPeriod := latencyInterval, latencyFullSamples, latencyFullSamples/2, latencyFullSamples, time.Minute
	if !full {
		interval, samples, chainSamples, cronSamples, cronPeriod = 4*time.Second, 3, 2, 1, 0
	}
	warmSamples := samples
	if !full {
		warmSamples = 2
	}
	return []latencyMode{
		{
			name: "webhook", samples: samples, spacing: 2 * time.Second,
			goal: time.Second, goalText: "p50 < 1s",
			setUp: func(ctx context.Context, t *testing.T, b *e2e.Testbed) latencyScene {
				return webhookLatencyScene(b, ctx, t, "lat-hook", int32(samples), 0)
			},
		},
		{
			// The next job of a chain is queued just as the runner of the
			// one before finishes, which counts as idle until its Job
			// completes: the follow-up passes serve it (see
			// leftToIdleRunners in the scaler). Pushes far enough apart that
			// the next push's delivery does not serve it instead.
			name: "chain", samples: chainSamples, spacing: 10 * time.Second, chain: true,
			setUp: func(ctx context.Context, t *testing.T, b *e2e.Testbed) latencyScene {
				return webhookLatencyScene(b, ctx, t, "lat-chain", int32(2*chainSamples), 0)
			},
		},
		{
			name: "loop", samples: samples, period: interval,
			goal: interval/2 + 500*time.Millisecond, goalText: fmt.Sprintf("p50 ≤ interval/2 + 0.5s = %s", interval/2+500*time.Millisecond),
			setUp: func(ctx context.Context, t *testing.T, b *e2e.Testbed) latencyScene {
				values := e2e.DeploymentValues()
				values["scaler"].(map[string]any)["interval"] = interval.String()
				return chartLatencyScene(b, ctx, t, e2e.SceneOpts{Name: "lat-loop", Max: int32(samples), Values: values}, true)
			},
		},
		{
			// The chart's schedule, every minute.
			name: "cronjob", samples: cronSamples, period: cronPeriod, spacing: 2 * time.Second,
			setUp: func(ctx context.Context, t *testing.T, b *e2e.Testbed) latencyScene {
				return chartLatencyScene(b, ctx, t, e2e.SceneOpts{Name: "lat-cron", Max: int32(cronSamples), Values: e2e.BaseValues()}, full)
			},
		},
		{
			name: "webhook-warm", samples: warmSamples, spacing: 2 * time.Second, warm: latencyWarmPool,
			setUp: func(ctx context.Context, t *testing.T, b *e2e.Testbed) latencyScene {
				return webhookLatencyScene(b, ctx, t, "lat-hook-warm", int32(warmSamples)+latencyWarmPool, latencyWarmPool)
			},
		},
		{
			// Only in full runs: the smoke's webhook-warm keeps the warm
			// path of the harness from rotting.
			name: "loop-warm", samples: samples, period: interval, warm: latencyWarmPool,
			setUp: func(ctx context.Context, t *testing.T, b *e2e.Testbed) latencyScene {
				values := e2e.DeploymentValues()
				values["scaler"].(map[string]any)["interval"] = interval.String()
				return chartLatencyScene(b, ctx, t, e2e.SceneOpts{Name: "lat-loop-warm", Max: int32(samples) + latencyWarmPool,
					Values: values, MinIdle: latencyWarmPool, RunnerConfig: latencyWarmRunnerConfig()}, true)
			},
			fullOnly: true,
		},
	}
}

// webhookLatencyScene is a group served by webhookScaler, with a warm pool
// of warm runners (and latencyWarmRunnerConfig) when warm > 0.
func webhookLatencyScene(b *e2e.Testbed, ctx context.Context, t *testing.T, name string, maxRunners, warm int32) latencyScene {
	t.Helper()
	ns := b.Namespace(ctx, t, "e2e-"+name, nil)
	s := latencyScene{ns: ns, group: name, label: e2e.Uniq("e2e-" + name), fx: b.NewOrgScope(ctx, t, e2e.Uniq("e2e-"+name))}
	b.TokenSecret(ctx, t, ns, e2e.GroupSecret(name), s.fx.RegToken, s.fx.APIToken)
	spec := b.GroupSpec(s.fx, e2e.GroupSecret(name), maxRunners, s.label)
	spec.Gitea.URL = b.Gitea.Admin.URL()
	if warm > 0 {
		spec.MinIdleRunners = warm
		spec.RunnerConfig = latencyWarmRunnerConfig()
	}
	b.CreateGroup(ctx, t, ns, s.group, nil, spec)
	webhookScaler(b, ctx, t, ns, s.group, s.fx, latencyWebhookPoll)
	s.dump = func() string { return b.DumpNamespaces(ns) + b.Gitea.JobsLine(s.fx.Repo) }
	return s
}

// chartLatencyScene is the usual scene, the chart serving one group, with
// the group's first pass done when firstPass asks for it: then the clock
// starts only once the listener is at work. In cronjob mode that pass is
// the first tick's.
func chartLatencyScene(b *e2e.Testbed, ctx context.Context, t *testing.T, o e2e.SceneOpts, firstPass bool) latencyScene {
	t.Helper()
	s := b.ServedGroup(ctx, t, o)
	if firstPass {
		b.WaitPasses(ctx, t, s.NS, s.Group, 0, s.Dump, nil)
	}
	return latencyScene{ns: s.NS, group: s.Group, label: s.Label, fx: s.Fx, dump: s.Dump}
}

// TestScaleUpLatency measures each mode and prints, per mode, the
// percentiles from push to the Gitea job being queued, to its runner Job
// existing and to the job being in_progress, beside the README's goal.
// LATENCY=full (make bench-latency) takes latencyFullSamples per mode.
func TestScaleUpLatency(t *testing.T) {
	// Alone on the bed when it measures: its figures must not measure
	// other tests. The smoke run shares it.
	full := os.Getenv("LATENCY") == "full"
	e2e.ExclusiveWhen(t, full)
	b := e2e.Bed(t)
	modes := latencyModes(full)
	reports := make([]string, len(modes))
	for i, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			if !full {
				if m.fullOnly {
					t.Skip("measured by make bench-latency only")
				}
				e2e.ParallelSub(t)
			}
			reports[i] = measureLatency(b, t, m)
		})
	}
	t.Cleanup(func() {
		t.Logf("scale-up latency (%d samples per mode in full runs; this run %s):\n%s",
			latencyFullSamples, map[bool]string{true: "full", false: "smoke"}[full], strings.Join(reports, ""))
	})
}

// measureLatency sets the mode's scene up, pushes its samples and waits
// until every job ran, then reports the percentiles.
func measureLatency(b *e2e.Testbed, t *testing.T, m latencyMode) string {
	// Setup (a chart install, the first CronJob tick) and each sample's
	// gap and run, with room for a loaded machine.
	gaps := pushGaps(m.period, m.spacing, m.samples)
	var pushing time.Duration
	for _, g := range gaps {
		pushing += g
	}
	ctx := e2e.TestContext(t, 5*time.Minute+pushing+time.Duration(m.samples)*latencyListedWait)
	s := m.setUp(ctx, t, b)
	if m.warm > 0 {
		waitWarmPool(b, ctx, t, s, m.warm)
	}
	obs := newLatencyObserver(b.Dir, m.warm > 0)
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); obs.watchRunnerJobs(wctx, b, s.ns, s.group) }()
	go func() { defer wg.Done(); obs.pollGitea(wctx, b, s.fx.Repo) }()
	defer func() { stop(); wg.Wait() }()

	next := time.Now()
	for i, gap := range gaps {
		next = next.Add(gap)
		time.Sleep(time.Until(next))
		key := e2e.JobKey("lat", m.name, strconv.Itoa(i))
		b.Hold(t, key)
		file := fmt.Sprintf("lat-%d.yml", i)
		at := time.Now()
		obs.pushed(key, at)
		b.Gitea.PushWorkflow(ctx, t, s.fx.PushAs, s.fx.Repo, file, selfTriggeredWorkflow(file, key, s.label, m.chain))
		// Gitea reads a push's workflows at the branch's head when its
		// push_update queue gets to the push, not at the pushed commit: a
		// push handled after the next one landed runs that one's new file
		// too (its paths filter sees both files changed), and the next
		// push runs it again. So the next push waits until this one's job
		// exists.
		e2e.WaitUntil(ctx, t, latencyListedWait, fmt.Sprintf("Gitea job %s listed", key), s.dump, func(context.Context) (bool, string, error) {
			return obs.listed(key), "", obs.failure()
		})
	}
	var ids map[string]int64
	e2e.WaitUntil(ctx, t, e2e.StepWait, fmt.Sprintf("%d %s samples in progress", m.samples, m.name), s.dump,
		func(context.Context) (bool, string, error) {
			var done bool
			var err error
			ids, done, err = obs.progress()
			return done, fmt.Sprintf("%d of %d in progress", obs.running(), m.samples), err
		})
	stop()
	wg.Wait()
	// The promise behind the numbers: each job had one runner Job, ran on a
	// runner of the group and succeeded.
	if m.warm > 0 {
		obs.takenWarm = b.ExpectCompletedOnPool(ctx, t, s.ns, s.group, s.fx.Repo, ids, s.dump)
		return obs.report(m)
	}
	b.ExpectCompleted(ctx, t, s.ns, s.group, s.fx.Repo, ids, s.dump)
	return obs.report(m)
}

// waitWarmPool waits until the group's warm runners are registered in
// Gitea (and so asking it for work), so that the first sample finds the
// pool warm as a steady state would. The group's status says so only at the
// next pass, which the webhook modes do not make before the first push.
func waitWarmPool(b *e2e.Testbed, ctx context.Context, t *testing.T, s latencyScene, warm int32) {
	t.Helper()
	e2e.WaitUntil(ctx, t, e2e.StepWait, fmt.Sprintf("%d warm runners registered", warm), s.dump, func(ctx context.Context) (bool, string, error) {
		jobs, err := b.RunnerJobs(ctx, s.ns, s.group)
		if err != nil {
			return false, err.Error(), nil
		}
		regs := b.OrgRunners(ctx, t, s.fx.Spec.Org)
		registered := 0
		for i := range jobs {
			if _, ok := regs[runnerjob.RunnerNameOf(&jobs[i])]; ok {
				registered++
			}
		}
		return registered == int(warm), fmt.Sprintf("%d runner Jobs, %d registered", len(jobs), registered), nil
	})
}

// pushGaps are the n pauses before each push. With a period: a random
// offset within one gap, then period×j/n apart, with j the least that is
// coprime to n and keeps the gap at least latencyMinGap; the pushes then
// fall on n distinct points of the period, period/n apart (j coprime to n
// makes i×j mod n visit every residue once). Without one: spacing/2 to
// 3×spacing/2 apart, at random.
func pushGaps(period, spacing time.Duration, n int) []time.Duration {
	gaps := make([]time.Duration, n)
	if period <= 0 {
		for i := range gaps {
			gaps[i] = spacing/2 + rand.N(spacing)
		}
		return gaps
	}
	j := max(1, int((latencyMinGap*time.Duration(n)+period-1)/period))
	for gcd(j, n) != 1 {
		j++
	}
	gap := period * time.Duration(j) / time.Duration(n)
	for i := range gaps {
		gaps[i] = gap
	}
	gaps[0] = rand.N(gap)
	return gaps
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// selfTriggeredWorkflow is a workflow with the job key that only a push of
// its own file triggers: the pushes of later samples, which add their own
// files, do not run it again. With chain the job needs another one, key_a,
// before it.
func selfTriggeredWorkflow(file, key, label string, chain bool) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "name: %s\non:\n  push:\n    paths: ['.gitea/workflows/%s']\njobs:\n", key, file)
	if chain {
		fmt.Fprintf(&sb, "  %s_a:\n    runs-on: [%s]\n%s", key, label, e2e.JobSteps(key+"_a"))
	}
	fmt.Fprintf(&sb, "  %s:\n    runs-on: [%s]\n", key, label)
	if chain {
		fmt.Fprintf(&sb, "    needs: [%s_a]\n", key)
	}
	sb.WriteString(e2e.JobSteps(key))
	return sb.String()
}

// latencySample is one push and when the harness first saw what followed.
type latencySample struct {
	key    string
	id     int64
	pushed time.Time
	// listed is when the job was first listed, in any status; queued
	// when it was first listed queued (later, for the second job of a
	// chain).
	listed, queued, runnerJob, running time.Time
}

// latencyObserver records, for the pushed samples, when Gitea lists each
// job, when its runner Job appears (from a watch) and when the job is
// in_progress (from polling Gitea), and releases a job's hold once it is.
type latencyObserver struct {
	holdDir string
	// warmPool admits runner Jobs that claim no Gitea job (a warm pool's).
	warmPool bool
	// takenWarm is how many samples a runner that claimed no job, or
	// another job, took; set after the run.
	takenWarm int

	mu       sync.Mutex
	byKey    map[string]*latencySample
	order    []string
	created  map[int64][]string // runner Jobs by the Gitea job they claim
	seenJobs map[string]time.Time
	err      error
}

func newLatencyObserver(bedDir string, warmPool bool) *latencyObserver {
	return &latencyObserver{holdDir: filepath.Join(bedDir, "hold"), warmPool: warmPool, byKey: map[string]*latencySample{},
		created: map[int64][]string{}, seenJobs: map[string]time.Time{}}
}

func (o *latencyObserver) pushed(key string, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.byKey[key] = &latencySample{key: key, pushed: at}
	o.order = append(o.order, key)
}

func (o *latencyObserver) fail(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf(format, args...)
	}
}

// jobSeen records a runner Job the first time the watch (or a list after
// the watch broke) shows it.
func (o *latencyObserver) jobSeen(j *batchv1.Job, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.seenJobs[j.Name]; ok {
		return
	}
	o.seenJobs[j.Name] = at
	id := runnerjob.GiteaJobID(j)
	if id == 0 && o.warmPool {
		return
	}
	if id == 0 {
		o.fail("runner Job %s claims no Gitea job (label %s=%q): this harness's groups keep no warm pool", j.Name, e2e.LabelGiteaJob, j.Labels[e2e.LabelGiteaJob])
		return
	}
	o.created[id] = append(o.created[id], j.Name)
	if len(o.created[id]) > 1 {
		o.fail("Gitea job %d got %d runner Jobs: %v", id, len(o.created[id]), o.created[id])
	}
}

// watchRunnerJobs records the group's runner Jobs as they are created. A
// watch that ends is resumed from the last version it delivered; one the
// API server refuses (the version expired) starts again from a list, whose
// new Jobs are recorded as seen at the list.
func (o *latencyObserver) watchRunnerJobs(ctx context.Context, b *e2e.Testbed, ns, group string) {
	jobs := b.Kube.BatchV1().Jobs(ns)
	sel := e2e.LabelGroup + "=" + group
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			list, err := jobs.List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				e2e.SleepCtx(ctx, 200*time.Millisecond)
				continue
			}
			now := time.Now()
			for i := range list.Items {
				o.jobSeen(&list.Items[i], now)
			}
			rv = list.ResourceVersion
		}
		w, err := jobs.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			rv = ""
			e2e.SleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			now := time.Now()
			if ev.Type == watch.Error {
				rv = ""
				break
			}
			obj, ok := ev.Object.(metav1.Object)
			if !ok {
				continue
			}
			rv = obj.GetResourceVersion()
			if j, ok := ev.Object.(*batchv1.Job); ok && ev.Type == watch.Added {
				o.jobSeen(j, now)
			}
		}
		w.Stop()
	}
}

// pollGitea reads the repository's jobs every latencyPollEvery, records
// when each sample's job is first listed and first in_progress (or already
// past it), and releases its hold then.
func (o *latencyObserver) pollGitea(ctx context.Context, b *e2e.Testbed, repo giteasetup.Repo) {
	for ctx.Err() == nil {
		jobs, err := b.Gitea.RepoJobs(ctx, repo)
		now := time.Now()
		if err == nil {
			o.giteaJobs(jobs, now)
		}
		e2e.SleepCtx(ctx, latencyPollEvery)
	}
}

func (o *latencyObserver) giteaJobs(jobs []giteasetup.Job, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, j := range jobs {
		s := o.byKey[j.Name]
		if s == nil {
			// A job the listing shows before its push returned is
			// recorded on the next poll.
			continue
		}
		if s.id != 0 && s.id != j.ID {
			o.fail("the push of %s started two jobs, %d and %d: its workflow should trigger on its own file only", j.Name, s.id, j.ID)
			continue
		}
		s.id = j.ID
		if s.listed.IsZero() {
			s.listed = now
		}
		if s.queued.IsZero() && j.Status != "waiting" {
			s.queued = now
		}
		if s.running.IsZero() && (j.Status == "in_progress" || j.Status == "completed") {
			s.running = now
			_ = os.Remove(filepath.Join(o.holdDir, "name-"+s.key))
		}
	}
}

// progress returns the samples' Gitea job ids by key and whether every
// sample is in progress with its runner Job seen; or the first broken
// promise.
func (o *latencyObserver) progress() (map[string]int64, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return nil, false, o.err
	}
	ids := map[string]int64{}
	done := true
	for key, s := range o.byKey {
		ids[key] = s.id
		if s.runnerJob.IsZero() && s.id != 0 {
			if names := o.created[s.id]; len(names) > 0 {
				s.runnerJob = o.seenJobs[names[0]]
			}
		}
		done = done && !s.running.IsZero() && (o.warmPool || !s.runnerJob.IsZero())
	}
	return ids, done, nil
}

func (o *latencyObserver) listed(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.byKey[key].listed.IsZero()
}

func (o *latencyObserver) failure() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

func (o *latencyObserver) running() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, s := range o.byKey {
		if !s.running.IsZero() {
			n++
		}
	}
	return n
}

// report is the mode's rows: percentiles of each span over its samples,
// and the p50 from queued to runner Job against the goal (printed, not
// asserted). The goals are measured from the job being queued, because
// the time from the push to Gitea creating the job is Gitea's own
// (its push_update queue) and the same for every scaler.
func (o *latencyObserver) report(m latencyMode) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	type span struct {
		name     string
		from, to func(*latencySample) time.Time
	}
	spans := []span{
		{"push → queued", pushedAt, queuedAt},
		{"queued → runner Job", queuedAt, runnerJobAt},
		{"push → runner Job", pushedAt, runnerJobAt},
		{"push → in_progress", pushedAt, runningAt},
	}
	if o.warmPool {
		// A warm runner exists before its job: the runner Job's
		// creation says nothing about the job's wait.
		spans = []span{
			{"push → queued", pushedAt, queuedAt},
			{"queued → in_progress", queuedAt, runningAt},
			{"push → in_progress", pushedAt, runningAt},
		}
	}
	var sb strings.Builder
	goal := "no goal"
	for i, sp := range spans {
		ds := make([]time.Duration, 0, len(o.order))
		for _, key := range o.order {
			s := o.byKey[key]
			ds = append(ds, sp.to(s).Sub(sp.from(s)))
		}
		head := ""
		if i == 0 {
			head = fmt.Sprintf("%s (n=%d)", m.name, len(ds))
		}
		fmt.Fprintf(&sb, "  %-16s %-20s p50 %6.2fs  p90 %6.2fs  max %6.2fs\n", head, sp.name,
			e2e.Percentile(ds, 50).Seconds(), e2e.Percentile(ds, 90).Seconds(), slices.Max(ds).Seconds())
		if i == 1 && m.goal > 0 {
			verdict := "met"
			if e2e.Percentile(ds, 50) > m.goal {
				verdict = "MISSED"
			}
			goal = fmt.Sprintf("goal, queued → runner Job %s: %s", m.goalText, verdict)
		}
	}
	fmt.Fprintf(&sb, "  %-16s %s\n", "", goal)
	if o.warmPool {
		fmt.Fprintf(&sb, "  %-16s taken by a warm runner: %d of %d (pool of %d)\n", "", o.takenWarm, len(o.order), m.warm)
	}
	return sb.String()
}

func pushedAt(s *latencySample) time.Time    { return s.pushed }
func queuedAt(s *latencySample) time.Time    { return s.queued }
func runnerJobAt(s *latencySample) time.Time { return s.runnerJob }
func runningAt(s *latencySample) time.Time   { return s.running }

// webhookScaler starts a looping scaler over ns with its webhook on a free
// loopback port and a poll interval of its own, points a webhook of fx's
// repository at it, and returns once the group's first pass is recorded.
// The scaler stops when the test ends.
func webhookScaler(b *e2e.Testbed, ctx context.Context, t *testing.T, ns, group string, fx e2e.ScopeFixture, interval time.Duration) {
	t.Helper()
	addr := e2e.FreeLoopbackAddr(t)
	secret := e2e.Uniq("hook-secret")
	e2e.Secrets.Add(secret)
	secretFile := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secretFile, []byte(secret), 0o600))

	run := b.StartPass(ctx, t, e2e.PassOpts{Namespaces: []string{ns}, Deadline: time.Until(deadlineOf(ctx)),
		Args: []string{"--loop", "--interval", interval.String(), "--webhook-addr", addr, "--webhook-secret-file", secretFile}})
	t.Cleanup(func() {
		_ = run.Cmd.Process.Signal(syscall.SIGTERM)
		res := run.Wait(t)
		// The whole log beside the listeners' (which the agent writes
		// there), for reading what each pass did.
		file := filepath.Join(b.Dir, "logs", "pods", ns+"_webhook-scaler_listener.log")
		if err := os.WriteFile(file, []byte(e2e.Redact(res.Log)), 0o644); err != nil {
			t.Errorf("write the scaler's log: %v", err)
		}
		t.Logf("scaler log tail (all of it in %s):\n%s", file, e2e.Redact(e2e.Tail(res.Log, 15)))
	})
	b.WaitPasses(ctx, t, ns, group, 0, nil, nil)
	require.NoError(t, fx.PushAs.CreateRepoHook(ctx, fx.Repo, "http://"+addr+"/webhook", secret))
}

// deadlineOf is ctx's deadline; every test context has one.
func deadlineOf(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		panic("a test context without a deadline")
	}
	return d
}

// The pushes of a polled mode fall on n distinct points of the period,
// period/n apart, at least latencyMinGap after each other; without a
// period they come spacing/2 to 3×spacing/2 apart.
func TestPushGapsSpreadPushesOverThePeriod(t *testing.T) {
	e2e.Parallel(t)
	for _, tc := range []struct {
		period time.Duration
		n      int
		gap    time.Duration
	}{
		{10 * time.Second, 20, 4500 * time.Millisecond}, // j = 8 shares 4 with 20: 9
		{time.Minute, 20, 9 * time.Second},              // j = 2 shares 2: 3
		{4 * time.Second, 3, 16 * time.Second / 3},      // j = 3 shares 3: 4
		{time.Minute, 2, 30 * time.Second},
		{time.Minute, 1, time.Minute},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.period, tc.n), func(t *testing.T) {
			gaps := pushGaps(tc.period, time.Second, tc.n)
			require.Len(t, gaps, tc.n)
			require.Less(t, gaps[0], tc.gap, "the first push comes at a random offset within one gap")
			points := map[time.Duration]bool{}
			at := time.Duration(0)
			for i, g := range gaps {
				if i > 0 {
					require.Equal(t, tc.gap, g)
				}
				at += g
				points[(at-gaps[0])%tc.period] = true
			}
			require.Len(t, points, tc.n, "n distinct points of the period")
			for p := range points {
				require.Zero(t, p%(tc.period/time.Duration(tc.n)), "points are multiples of period/n")
			}
		})
	}
	for _, g := range pushGaps(0, 2*time.Second, 50) {
		require.GreaterOrEqual(t, g, time.Second)
		require.Less(t, g, 3*time.Second)
	}
}
