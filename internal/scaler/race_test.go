package scaler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/kubecache"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerlabels"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// TestRacingPassesCampaign is the bounded randomized proof of "exactly one
// runner per queued job": rounds of 8 passes at once against one Gitea
// scene and one cluster, with jobs arriving and finishing and runners
// taking jobs in random order between rounds, and overlapping groups (two
// groups that can run the same jobs, one group that can run only some).
// Gitea is played by a scene that hands a runner asking for work the
// oldest queued job its labels cover, as Gitea does.
//
// It prints and checks: moments a group had more active runner Jobs than
// its maxActiveRunners; runners that were started and never took a job once
// the queue is drained (surplus: a Gitea job that got two runners shows as
// one of these, since a runner takes one job and each job is taken once);
// and queued jobs left without a runner at the end.
//
// "with lagging caches" runs it again with a loop's watch caches that lag
// apart: every pass of a round sees the runner Jobs as they were before
// the round, whatever the other passes created meanwhile, and the state
// ConfigMaps as they are (which the other passes' claims and drops moved).
// "with cluster-wide lists" runs it with Config.ClusterWideReads (a single
// pass's one list of each kind), and "with the cluster-wide caches" with
// a loop's real cluster-wide watch caches (kubecache.WatchClusterWide)
// over the fake API server.
func TestRacingPassesCampaign(t *testing.T) {
	const (
		passes = 8
		rounds = 50
	)
	off := false
	groups := []*v1alpha1.RunnerGroup{
		newGroup("plain-a", 5),
		newGroup("plain-b", 4), // the same scope and labels: the rule gives everything to plain-a
		newGroup("gpu", 2, withLabels("gpu"), func(rg *v1alpha1.RunnerGroup) { rg.Spec.DefaultLabels = &off }),
	}
	for _, run := range []struct {
		seed uint64
		// lagging: a still cache per namespace; clusterWide: the
		// cluster-wide reads, a loop's real caches (with lagging) or a
		// single pass's lists.
		lagging, clusterWide bool
	}{{1, false, false}, {2, false, false}, {3, false, false}, {1, true, false}, {2, true, false}, {1, false, true}, {2, false, true}, {1, true, true}, {2, true, true}} {
		name := fmt.Sprintf("seed %d", run.seed)
		switch {
		case run.lagging && run.clusterWide:
			name += " with the cluster-wide caches"
		case run.lagging:
			name += " with lagging caches"
		case run.clusterWide:
			name += " with cluster-wide lists"
		}
		seed := run.seed
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, groups...)
			sc := newScene(e, groups, rand.New(rand.NewPCG(seed, seed)))
			e.kube.PrependReactor("create", "jobs", sc.checkCap)
			deps, cfg := e.inputs()
			deps.Gitea = func(string, string) (gitea.Client, error) { return sc, nil }
			lag := &stillCache{views: map[string]kubecache.View{}, refused: map[string]bool{}, freshStates: e}
			switch {
			case run.lagging && run.clusterWide:
				// Real watch caches over the fake API server: they lag
				// as watch events arrive, not by a round.
				_, c := clusterWideLoop(t, e)
				deps.Cache = c
				lag = nil
			case run.lagging:
				deps.Cache = lag
			case run.clusterWide:
				cfg.ClusterWideReads = true
			}
			s, err := New(deps, cfg)
			require.NoError(t, err)

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for range rounds {
				sc.arrive(3)
				if lag != nil {
					lag.catchUp(t, e)
				}
				var wg sync.WaitGroup
				for range passes {
					wg.Go(func() {
						_, err := s.Pass(ctx)
						assert.NoError(t, err)
					})
				}
				wg.Wait()
				sc.step()
			}
			// Drain: no new jobs; one pass at a time until every job ran.
			// Each drain pass is a round of its own: its caches lag by one
			// pass, as a watch lags, never for ever. A view frozen at the
			// last round would show runner Jobs that finished long ago as
			// active, and a pass may rightly trust it to say "the group is
			// at its cap, nothing to create" (only a create reads afresh).
			for i := 0; sc.busy() && i < 500; i++ {
				if lag != nil {
					lag.catchUp(t, e)
				}
				_, err := s.Pass(ctx)
				require.NoError(t, err)
				sc.step()
			}

			r := sc.report()
			t.Logf("seed %d: %d jobs, %d runner Jobs, %d over the cap, %d surplus runners, %d jobs still queued",
				seed, r.jobs, r.runners, r.overCap, r.surplus, r.stillQueued)
			assert.Zero(t, r.overCap, "moments above maxActiveRunners")
			assert.Zero(t, r.surplus, "runners that never got a job")
			assert.Zero(t, r.stillQueued, "queued jobs left without a runner")
			assert.Equal(t, r.jobs, r.done, "every job ran once")
		})
	}
}

// scene plays Gitea and the runner pods for the campaign.
type scene struct {
	e      *env
	rnd    *rand.Rand
	groups map[string]*v1alpha1.RunnerGroup
	labels map[string]runnerlabels.Set // group → label names

	mu      sync.Mutex
	next    int64
	jobs    map[int64]*sceneJob
	took    map[string]bool // runner Job name → took a job
	overCap int
}

type sceneJob struct {
	labels []string
	runner string // the runner Job's name; "" while queued
	// runnerName is the name its runner registered with in Gitea.
	runnerName string
	done       bool
}

func newScene(e *env, groups []*v1alpha1.RunnerGroup, rnd *rand.Rand) *scene {
	sc := &scene{e: e, rnd: rnd, groups: map[string]*v1alpha1.RunnerGroup{}, labels: map[string]runnerlabels.Set{},
		jobs: map[int64]*sceneJob{}, took: map[string]bool{}}
	_, cfg := e.inputs()
	for _, rg := range groups {
		sc.groups[rg.Name] = rg
		sc.labels[rg.Name] = runnerlabels.NewSet(runnerlabels.ForGroup(&rg.Spec, cfg.Runner.DefaultLabels))
	}
	return sc
}

// arrive queues up to n new jobs, one in four on the gpu label.
func (sc *scene) arrive(n int) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for range sc.rnd.IntN(n + 1) {
		sc.next++
		l := []string{"ubuntu-latest"}
		if sc.rnd.IntN(4) == 0 {
			l = []string{"gpu"}
		}
		sc.jobs[sc.next] = &sceneJob{labels: l}
	}
}

// Snapshot answers as Gitea's listing does, for any target: the scene is
// one org.
func (sc *scene) Snapshot(context.Context, scope.Place) (gitea.Snapshot, error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	var snap gitea.Snapshot
	for id, j := range sc.jobs {
		gj := gitea.Job{ID: id, Labels: j.labels, Repo: "acme/app", RunnerName: j.runnerName}
		switch {
		case j.done:
		case j.runner == "":
			snap.Queued = append(snap.Queued, gj)
		default:
			snap.Running = append(snap.Running, gj)
		}
	}
	sort.Slice(snap.Queued, func(a, b int) bool { return snap.Queued[a].ID < snap.Queued[b].ID })
	return snap, nil
}

// step moves the world on between rounds: in random order, each active
// runner Job that has not taken a job yet starts (half of them each round)
// and takes the oldest queued job its labels cover, and running jobs finish
// (half of them), ending their runner Job.
func (sc *scene) step() {
	jobs := sc.e.jobs()
	sc.rnd.Shuffle(len(jobs), func(a, b int) { jobs[a], jobs[b] = jobs[b], jobs[a] })
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for i := range jobs {
		j := &jobs[i]
		if !runnerjob.IsActive(j) || sc.took[j.Name] || sc.rnd.IntN(2) == 0 {
			continue
		}
		if id, ok := sc.oldestFor(j.Labels[v1alpha1.LabelRunnerGroupName]); ok {
			sc.jobs[id].runner, sc.jobs[id].runnerName = j.Name, runnerjob.RunnerNameOf(j)
			sc.took[j.Name] = true
		}
	}
	ids := make([]int64, 0, len(sc.jobs))
	for id := range sc.jobs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	for _, id := range ids {
		if j := sc.jobs[id]; j.runner != "" && !j.done && sc.rnd.IntN(2) == 0 {
			j.done = true
			sc.finish(j.runner)
		}
	}
}

func (sc *scene) oldestFor(group string) (int64, bool) {
	best := int64(0)
	for id, j := range sc.jobs {
		if j.runner == "" && sc.labels[group].CanRun(j.labels) && (best == 0 || id < best) {
			best = id
		}
	}
	return best, best != 0
}

// finish marks a runner Job Complete, as the Job controller does once the
// ephemeral runner exits.
func (sc *scene) finish(name string) {
	ctx := context.Background()
	j, err := sc.e.kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(sc.e.t, err)
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})
	_, err = sc.e.kube.BatchV1().Jobs(ns).UpdateStatus(ctx, j, metav1.UpdateOptions{})
	require.NoError(sc.e.t, err)
}

// checkCap counts, at each create, whether the group would go above its
// cap with this Job: the moment the invariant would break.
func (sc *scene) checkCap(a k8stesting.Action) (bool, runtime.Object, error) {
	job := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job)
	group := job.Labels[v1alpha1.LabelRunnerGroupName]
	active := 0
	// The fake clientset holds its lock while reactors run: read through
	// its tracker, which the creates are serialised behind.
	list, err := sc.e.kube.Tracker().List(batchv1.SchemeGroupVersion.WithResource("jobs"), batchv1.SchemeGroupVersion.WithKind("Job"), ns)
	require.NoError(sc.e.t, err)
	for _, j := range list.(*batchv1.JobList).Items {
		if j.Labels[v1alpha1.LabelRunnerGroupName] == group && runnerjob.IsActive(&j) {
			active++
		}
	}
	if active+1 > int(sc.groups[group].Spec.MaxActiveRunners) {
		sc.mu.Lock()
		sc.overCap++
		sc.mu.Unlock()
	}
	return false, nil, nil
}

// busy reports whether any job has not finished yet.
func (sc *scene) busy() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, j := range sc.jobs {
		if !j.done {
			return true
		}
	}
	return false
}

type campaignReport struct {
	jobs, done, runners, overCap, surplus, stillQueued int
}

func (sc *scene) report() campaignReport {
	jobs := sc.e.jobs()
	sc.mu.Lock()
	defer sc.mu.Unlock()
	r := campaignReport{jobs: len(sc.jobs), runners: len(jobs), overCap: sc.overCap}
	for _, j := range sc.jobs {
		if j.done {
			r.done++
		}
		if j.runner == "" {
			r.stillQueued++
		}
	}
	for _, j := range jobs {
		if !sc.took[j.Name] {
			r.surplus++
		}
	}
	return r
}

// TestRacingPassesKeepTheWarmPoolExact: 8 passes at once, 5 rounds, for a
// group with a warm pool of 3 and no demand. Warm runners are claimed in the
// state ConfigMap like any other, so the racing passes start exactly the
// pool, never more.
func TestRacingPassesKeepTheWarmPoolExact(t *testing.T) {
	const passes, rounds = 8, 5
	e := newEnv(t, newGroup("ci", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.MinIdleRunners = 3 }))
	deps, cfg := e.inputs()
	s, err := New(deps, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range rounds {
		var wg sync.WaitGroup
		for range passes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = s.Pass(ctx)
			}()
		}
		wg.Wait()
		assert.Equal(t, 3, len(e.jobs()), "exactly the warm pool")
	}
	t.Logf("%d rounds of %d racing passes: %d runner Jobs", rounds, passes, len(e.jobs()))
}
