//go:build e2e

package node

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// The warm pool on the real node: how long a container job waits for a
// warm dind-rootless runner pod that is already registered. A warm runner
// asks Gitea for work at gitea-runner's own default pace (fetch_interval
// 2s, fetch_interval_max 5s while idle), so queued -> in_progress is that
// pace plus the runner's start of the job's container, whatever the
// scaler's mode; the scaler (a loop woken by the webhook) only tops the
// pool up.
const (
	// warmPoolOnNode is the group's spec.minIdleRunners.
	warmPoolOnNode = 2
	// warmSamplesSmoke and warmSamplesFull are the jobs pushed by make
	// test and by LATENCY=full.
	warmSamplesSmoke, warmSamplesFull = 3, 10
	// warmPushGap leaves the pool time to top up (a replacement's cold
	// start is 17-19 s here) between pushes, so each job can meet a
	// registered runner.
	warmPushGap = 15 * time.Second
)

// TestRealNodeWarmPoolTakesContainerJobs pushes container jobs one at a
// time to a group whose warm runners run on the real node, and logs, from
// Gitea's listing polled every 250 ms, when each job was first listed
// queued and first listed in_progress: p50, p90 and max. Each job runs
// once, on a runner of the group, and succeeds; the log says how many were
// taken by a warm runner (one started for no job).
func TestRealNodeWarmPoolTakesContainerJobs(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	n := readRealNode(b, t)
	im := b.RunnerImages(t)
	samples := warmSamplesSmoke
	if os.Getenv("LATENCY") == "full" {
		samples = warmSamplesFull
	}
	ctx := e2e.TestContext(t, 8*time.Minute+time.Duration(samples)*warmPushGap)
	s := newRunnerScene(b, ctx, t, n, im, "realwarm", "3.1.0", dindRootless, func(spec *v1alpha1.RunnerGroupSpec) {
		spec.MaxActiveRunners = int32(samples) + warmPoolOnNode
		spec.MinIdleRunners = warmPoolOnNode
		// gitea-runner's defaults, over the bed's faster ones.
		spec.RunnerConfig = &v1alpha1.RunnerConfig{Runner: &v1alpha1.RunnerRunnerConfig{FetchInterval: ptr.To("2s"), FetchIntervalMax: ptr.To("5s")}}
	})
	b.StartLoopScaler(ctx, t, s.ns, s.group, s.fx, 10*time.Second)
	s.waitWarmRunners(ctx, t, warmPoolOnNode)

	obs := &queueWatch{queued: map[string]time.Time{}, running: map[string]time.Time{}, ids: map[string]int64{}}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); obs.poll(wctx, s) }()
	defer func() { stop(); wg.Wait() }()

	var keys []string
	for i := 0; i < samples; i++ {
		if i > 0 {
			time.Sleep(warmPushGap)
		}
		key := e2e.JobKey("warm", fmt.Sprint(i))
		keys = append(keys, key)
		file := fmt.Sprintf("warm-%d.yml", i)
		b.Gitea.PushWorkflow(ctx, t, s.fx.PushAs, s.fx.Repo, file, warmContainerWorkflow(file, key, s.label, im.Job))
	}
	ids := obs.waitListed(ctx, t, keys, s.dump)
	warm := b.ExpectCompletedOnPool(ctx, t, s.ns, s.group, s.fx.Repo, ids, s.dump)
	stop()
	wg.Wait()
	// The first job finds the pool registered and idle: a warm runner
	// takes it, not one started for it.
	require.GreaterOrEqual(t, warm, 1, "a warm runner took a job")

	var waits []time.Duration
	for _, k := range keys {
		q, r := obs.at(k)
		require.False(t, q.IsZero() || r.IsZero(), "job %s was seen queued (%v) and in_progress (%v)", k, q, r)
		waits = append(waits, r.Sub(q))
	}
	t.Logf("warm pool of %d dind-rootless runners on the real node, %d container jobs %s apart: queued -> in_progress p50 %s, p90 %s, max %s; %d of %d taken by a warm runner",
		warmPoolOnNode, samples, warmPushGap, e2e.Percentile(waits, 50).Round(10*time.Millisecond), e2e.Percentile(waits, 90).Round(10*time.Millisecond),
		e2e.Percentile(waits, 100).Round(10*time.Millisecond), warm, samples)
}

// warmContainerWorkflow runs only when its own file is pushed: one job in
// a container of the job image, with one run: step.
func warmContainerWorkflow(file, key, label, image string) string {
	return fmt.Sprintf(`name: %s
on:
  push:
    paths: ['.gitea/workflows/%s']
jobs:
  %s:
    runs-on: [%s]
    container:
      image: %s
    steps:
      - run: test -f /.dockerenv && echo "in a container of the job image"
`, key, file, key, label, image)
}

// waitWarmRunners waits until want runners of the group are registered in
// Gitea with no job: the pool is warm, as in a steady state.
func (s runnerScene) waitWarmRunners(ctx context.Context, t *testing.T, want int) {
	t.Helper()
	e2e.WaitUntil(ctx, t, 5*time.Minute, fmt.Sprintf("%d warm runners registered", want), s.dump, func(ctx context.Context) (bool, string, error) {
		jobs, err := s.b.RunnerJobs(ctx, s.ns, s.group)
		if err != nil {
			return false, err.Error(), nil
		}
		regs := s.b.OrgRunners(ctx, t, s.fx.Spec.Org)
		registered := 0
		for i := range jobs {
			if r, ok := regs[runnerjob.RunnerNameOf(&jobs[i])]; ok && r.Online {
				registered++
			}
		}
		return registered >= want, fmt.Sprintf("%d runner Jobs, %d online", len(jobs), registered), nil
	})
}

// queueWatch is when Gitea's listing first showed each job queued and
// in_progress (or later: a job that started and ended between two polls
// counts as running at the poll that saw it end). A job first seen
// already started counts as queued at its created_at.
type queueWatch struct {
	mu              sync.Mutex
	queued, running map[string]time.Time
	ids             map[string]int64
}

func (w *queueWatch) poll(ctx context.Context, s runnerScene) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		jobs, err := s.b.Gitea.RepoJobs(ctx, s.fx.Repo)
		now := time.Now()
		if err == nil {
			w.mu.Lock()
			for _, j := range jobs {
				w.ids[j.Name] = j.ID
				if _, ok := w.queued[j.Name]; !ok {
					switch {
					case j.Status == "queued" || j.Status == "waiting":
						w.queued[j.Name] = now
					case !j.CreatedAt.IsZero():
						// Started before a poll saw it queued: Gitea's
						// own time, in whole seconds.
						w.queued[j.Name] = j.CreatedAt
					}
				}
				if _, ok := w.running[j.Name]; !ok && j.Status != "queued" && j.Status != "waiting" {
					w.running[j.Name] = now
				}
			}
			w.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (w *queueWatch) at(key string) (queued, running time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queued[key], w.running[key]
}

// waitListed waits until every job of keys was listed, and returns their
// Gitea IDs by key.
func (w *queueWatch) waitListed(ctx context.Context, t *testing.T, keys []string, dump func() string) map[string]int64 {
	t.Helper()
	ids := map[string]int64{}
	e2e.WaitUntil(ctx, t, e2e.StepWait, fmt.Sprintf("%d jobs listed", len(keys)), dump, func(context.Context) (bool, string, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, k := range keys {
			if id, ok := w.ids[k]; ok {
				ids[k] = id
			}
		}
		return len(ids) == len(keys), fmt.Sprintf("%d of %d listed", len(ids), len(keys)), nil
	})
	return ids
}
