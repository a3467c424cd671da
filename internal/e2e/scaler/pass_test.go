//go:build e2e

package scaler

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
)

// TestEveryQueuedJobGetsOneRunnerInEachScope installs the chart (a looping
// Deployment listener) and, for each Gitea scope, a RunnerGroup whose
// workflow has two jobs: each job gets exactly one runner Job, that runner
// registers under the Job's name and takes the job, the job succeeds and the
// Job completes.
//
// Every group serves a label of its own: Gitea gives a job to any runner of
// the right labels in scope, and a global runner is in every scope. The
// release's default labels are one more label of this run, so no group here
// serves the instance's ubuntu-latest jobs (or anyone else's), and the repo
// group's job needs it, which proves the default labels reach the runner.
func TestEveryQueuedJobGetsOneRunnerInEachScope(t *testing.T) {
	// Alone on the bed: its instance-wide group would serve every other test's
	// jobs.
	e2e.Exclusive(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 8*time.Minute)
	ns := b.Namespace(ctx, t, "e2e-scopes", nil)
	defaultLabel := e2e.Uniq("e2e-default")
	values := e2e.DeploymentValues(ns)
	values["scaler"].(map[string]any)["defaultLabels"] = []string{defaultLabel}
	b.HelmInstall(ctx, t, ns, "gro", values)
	g := b.Gitea

	cases := []struct {
		scope v1alpha1.Scope
		setup func(t *testing.T) e2e.ScopeFixture
	}{
		{scope: v1alpha1.ScopeGlobal, setup: func(t *testing.T) e2e.ScopeFixture {
			org := g.CreateOrg(ctx, t, e2e.Uniq("e2e-global"))
			return e2e.ScopeFixture{
				Spec:     v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeGlobal},
				Repo:     g.CreateOrgRepo(ctx, t, org, "app"),
				PushAs:   g.Admin,
				RegToken: g.RegistrationToken(ctx, t, g.Admin, giteasetup.GlobalRunners()),
				APIToken: g.AdminToken,
			}
		}},
		{scope: v1alpha1.ScopeOrg, setup: func(t *testing.T) e2e.ScopeFixture {
			return b.NewOrgScope(ctx, t, e2e.Uniq("e2e-org"))
		}},
		{scope: v1alpha1.ScopeUser, setup: func(t *testing.T) e2e.ScopeFixture {
			// A read-only token for the scaler.
			return b.NewUserScope(ctx, t, e2e.Uniq("e2e-user"), "read:repository", "read:user")
		}},
		{scope: v1alpha1.ScopeRepo, setup: func(t *testing.T) e2e.ScopeFixture {
			org := g.CreateOrg(ctx, t, e2e.Uniq("e2e-repo"))
			r := g.CreateOrgRepo(ctx, t, org, "app")
			return e2e.ScopeFixture{
				Spec:     v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeRepo, Org: org, Repo: r.Name},
				Repo:     r,
				PushAs:   g.Admin,
				RegToken: g.RegistrationToken(ctx, t, g.Admin, giteasetup.RepoRunners(r)),
				APIToken: g.AdminToken,
			}
		}},
	}
	for _, tc := range cases {
		t.Run(string(tc.scope), func(t *testing.T) {
			e2e.ParallelSub(t)
			// A context of its own: a parallel subtest may wait minutes for
			// a free slot in the full suite, past its parent's deadline.
			ctx := e2e.TestContext(t, 8*time.Minute)
			fx := tc.setup(t)
			group := "rg-" + string(tc.scope)
			label := e2e.Uniq("e2e-" + string(tc.scope))
			runsOn := []string{label}
			if tc.scope == v1alpha1.ScopeRepo {
				runsOn = append(runsOn, defaultLabel)
			}
			b.CreateScopedGroup(ctx, t, ns, group, fx, 4, label)

			keys := []string{e2e.JobKey(string(tc.scope), "a"), e2e.JobKey(string(tc.scope), "b")}
			var jobs []e2e.WfJob
			for _, k := range keys {
				b.Hold(t, k)
				jobs = append(jobs, e2e.WfJob{Key: k, RunsOn: runsOn})
			}
			g.PushWorkflow(ctx, t, fx.PushAs, fx.Repo, "ci.yml", e2e.Workflow(jobs...))
			dump := func() string { return b.DumpNamespaces(ns) + g.JobsLine(fx.Repo) }

			got := b.ExpectServed(ctx, t, ns, group, fx.Repo, keys, dump)

			// Later passes start no second runner for the finished jobs.
			b.WaitPasses(ctx, t, ns, group, 2, dump, nil)
			all, err := b.RunnerJobs(ctx, ns, group)
			require.NoError(t, err)
			require.Len(t, all, len(keys), "runner Jobs of %s: %v", group, e2e.JobNames(all))
			for k, s := range got {
				require.Len(t, e2e.ByGiteaJob(all)[s.Gitea.ID], 1, "runner Jobs of Gitea job %s", k)
			}
			rg, err := b.Group(ctx, ns, group)
			require.NoError(t, err)
			ready := e2e.Condition(rg, "Ready")
			require.NotNil(t, ready, e2e.StatusLine(rg))
			require.Equal(t, metav1.ConditionTrue, ready.Status, e2e.StatusLine(rg))
			require.Equal(t, "Reconciled", ready.Reason, e2e.StatusLine(rg))
			require.Zero(t, rg.Status.QueuedJobs, e2e.StatusLine(rg))
			require.Equal(t, rg.Generation, rg.Status.ObservedGeneration)

			events, err := b.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + group})
			require.NoError(t, err)
			created := 0
			for _, e := range events.Items {
				if e.Reason == "RunnerJobCreated" && e.Type == "Normal" {
					created++
				}
			}
			require.Equal(t, len(keys), created, "RunnerJobCreated events on %s", group)
		})
	}
}

// TestBlockedAndUnmatchedJobsWaitForTheirTurn pushes one workflow with three
// jobs: "first" (held in progress), "second" that needs first, and "other"
// whose runs-on includes a label the group does not serve. While first runs,
// neither of the others gets a runner and the status counts second as
// blocked and other as nothing. Once first is done, second gets its runner;
// once the group's labels include other's, other gets its runner.
func TestBlockedAndUnmatchedJobsWaitForTheirTurn(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 8*time.Minute)
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "blocked", Max: 5})
	ns, fx, group, label, dump := s.NS, s.Fx, s.Group, s.Label, s.Dump
	extra := e2e.Uniq("e2e-extra")

	first, second, other := e2e.JobKey("first"), e2e.JobKey("second"), e2e.JobKey("other")
	e2e.PushJobs(ctx, t, b, fx, "ci.yml", []string{first},
		e2e.WfJob{Key: first, RunsOn: []string{label}},
		e2e.WfJob{Key: second, RunsOn: []string{label}, Needs: []string{first}},
		e2e.WfJob{Key: other, RunsOn: []string{label, extra}},
	)
	jobs := b.Gitea.WaitJobs(ctx, t, fx.Repo, 3)

	// noRunnerFor fails at once if a job that must wait has a runner Job.
	noRunnerFor := func(keys ...string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			all, err := b.RunnerJobs(ctx, ns, group)
			if err != nil {
				return nil
			}
			by := e2e.ByGiteaJob(all)
			for _, k := range keys {
				if rj := by[jobs[k].ID]; len(rj) > 0 {
					return fmt.Errorf("Gitea job %s (#%d) got runner Job(s) %v while it must wait", k, jobs[k].ID, e2e.JobNames(rj))
				}
			}
			return nil
		}
	}

	// first runs on its runner; second is blocked, other is queued but not
	// served, and the status says so.
	e2e.WaitUntil(ctx, t, e2e.StepWait, "first in progress, second blocked, other unmatched", dump, func(ctx context.Context) (bool, string, error) {
		if err := noRunnerFor(second, other)(ctx); err != nil {
			return false, "", err
		}
		gjobs, err := b.Gitea.RepoJobs(ctx, fx.Repo)
		if err != nil {
			return false, err.Error(), nil
		}
		rg, err := b.Group(ctx, ns, group)
		if err != nil {
			return false, err.Error(), nil
		}
		state := map[string]string{}
		for _, j := range gjobs {
			state[j.Name] = j.State()
		}
		s := rg.Status
		ok := state[first] == "in_progress" && state[second] == "waiting" && state[other] == "queued" &&
			s.BlockedJobs == 1 && s.QueuedJobs == 0 && s.RunningJobs == 1 && s.ActiveRunners == 1
		return ok, e2e.DescribeGiteaJobs(gjobs) + " | " + e2e.StatusLine(rg), nil
	})
	// ... and stays so for several passes.
	b.WaitPasses(ctx, t, ns, group, 3, dump, noRunnerFor(second, other))

	// Once first is done, second is queued and gets its runner; other
	// still waits.
	b.Release(t, first)
	done := b.ExpectCompleted(ctx, t, ns, group, fx.Repo, e2e.IDsOf(jobs, first, second), dump)
	firstDone := done[first].Gitea.CompletedAt.Truncate(time.Second)
	for _, j := range []batchv1.Job{done[second].Claim, done[second].Runner} {
		require.False(t, j.CreationTimestamp.Time.Before(firstDone),
			"second's runner Job %s was created at %s, before first completed at %s", j.Name, j.CreationTimestamp.UTC(), firstDone.UTC())
	}
	b.WaitPasses(ctx, t, ns, group, 2, dump, noRunnerFor(other))
	rg, err := b.Group(ctx, ns, group)
	require.NoError(t, err)
	require.Zero(t, rg.Status.QueuedJobs, "other is queued but the group cannot serve it: %s", e2e.StatusLine(rg))
	require.Zero(t, rg.Status.BlockedJobs, e2e.StatusLine(rg))

	// The group learns other's label: other gets its runner.
	rg = b.PatchGroup(ctx, t, ns, group, map[string]any{"spec": map[string]any{"labels": []string{label, extra}}})
	b.ExpectCompleted(ctx, t, ns, group, fx.Repo, e2e.IDsOf(jobs, other), dump)
	e2e.WaitUntil(ctx, t, e2e.StepWait, "status observed the new labels", dump, func(ctx context.Context) (bool, string, error) {
		got, err := b.Group(ctx, ns, group)
		if err != nil {
			return false, err.Error(), nil
		}
		return got.Status.ObservedGeneration == rg.Generation, e2e.StatusLine(got), nil
	})
	all, err := b.RunnerJobs(ctx, ns, group)
	require.NoError(t, err)
	require.Len(t, all, 3, "one runner Job per Gitea job: %v", e2e.JobNames(all))
}

// TestMaxActiveRunnersHoldsAndFreedSlotsAreReused queues five held jobs for
// a group capped at two runners. Throughout, an observer counts the group's
// active runner Jobs (and Gitea's in-progress jobs) and never sees more than
// two. At the cap the status says AtCapacity. Releasing the two running jobs
// frees their slots, which the next passes give to two of the waiting jobs;
// releasing all lets every job finish, each on exactly one runner.
func TestMaxActiveRunnersHoldsAndFreedSlotsAreReused(t *testing.T) {
	e2e.Parallel(t)
	const limit = 2
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 8*time.Minute)
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "capacity", Max: limit})
	ns, fx, group, label, dump := s.NS, s.Fx, s.Group, s.Label, s.Dump

	keys, wf := e2e.NumberedJobs("cap", 5, label)
	e2e.PushJobs(ctx, t, b, fx, "ci.yml", keys, wf...)
	jobs := b.Gitea.WaitJobs(ctx, t, fx.Repo, len(keys))

	obs := observeCapacity(ctx, b, ns, group, fx.Repo)
	atCapacity := func(wantJobs, wantQueued int) ([]string, []string) {
		var running, waiting []string
		e2e.WaitUntil(ctx, t, e2e.StepWait, fmt.Sprintf("%d runners busy, %d jobs queued, AtCapacity", limit, wantQueued), dump, func(ctx context.Context) (bool, string, error) {
			if v := obs.violation(); v != "" {
				return false, "", fmt.Errorf("%s", v)
			}
			all, err := b.RunnerJobs(ctx, ns, group)
			if err != nil {
				return false, err.Error(), nil
			}
			gjobs, err := b.Gitea.RepoJobs(ctx, fx.Repo)
			if err != nil {
				return false, err.Error(), nil
			}
			rg, err := b.Group(ctx, ns, group)
			if err != nil {
				return false, err.Error(), nil
			}
			running, waiting = nil, nil
			for _, j := range gjobs {
				switch j.Status {
				case "in_progress":
					running = append(running, j.Name)
				case "queued":
					waiting = append(waiting, j.Name)
				}
			}
			sc := e2e.Condition(rg, "ScalingActive")
			ok := len(all) == wantJobs && len(running) == limit && len(waiting) == wantQueued &&
				rg.Status.ActiveRunners == limit && int(rg.Status.QueuedJobs) == wantQueued &&
				sc != nil && sc.Status == metav1.ConditionFalse && sc.Reason == "AtCapacity"
			return ok, fmt.Sprintf("runner Jobs %v | %s | %s", e2e.JobNames(all), e2e.DescribeGiteaJobs(gjobs), e2e.StatusLine(rg)), nil
		})
		return running, waiting
	}
	noNewJobs := func(n int) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			if v := obs.violation(); v != "" {
				return fmt.Errorf("%s", v)
			}
			all, err := b.RunnerJobs(ctx, ns, group)
			if err == nil && len(all) != n {
				return fmt.Errorf("at capacity, yet the group has %d runner Jobs, want %d: %v", len(all), n, e2e.JobNames(all))
			}
			return nil
		}
	}

	running, _ := atCapacity(limit, len(keys)-limit)
	b.WaitPasses(ctx, t, ns, group, 3, dump, noNewJobs(limit))

	// Free the two slots: their jobs finish and two waiting jobs take them.
	b.Release(t, running...)
	atCapacity(2*limit, len(keys)-2*limit)
	b.WaitPasses(ctx, t, ns, group, 2, dump, noNewJobs(2*limit))

	b.Release(t, keys...)
	b.ExpectCompleted(ctx, t, ns, group, fx.Repo, e2e.IDsOf(jobs, keys...), dump)
	maxSeen, n, v := obs.stop()
	require.Empty(t, v)
	require.LessOrEqual(t, maxSeen, limit)
	t.Logf("observed the group %d times: at most %d active runner Jobs (cap %d)", n, maxSeen, limit)
	all, err := b.RunnerJobs(ctx, ns, group)
	require.NoError(t, err)
	require.Len(t, all, len(keys), "one runner Job per Gitea job: %v", e2e.JobNames(all))
}

// capacityObserver samples a group's active runner Jobs and its
// repository's in-progress Gitea jobs every 250ms until stopped, and
// remembers the first sample over the group's cap.
type capacityObserver struct {
	mu      sync.Mutex
	maxSeen int
	n       int
	bad     string
	cancel  context.CancelFunc
	done    chan struct{}
}

func observeCapacity(ctx context.Context, b *e2e.Testbed, ns, group string, r giteasetup.Repo) *capacityObserver {
	o := &capacityObserver{done: make(chan struct{})}
	ctx, o.cancel = context.WithCancel(ctx)
	limit := 0
	if rg, err := b.Group(ctx, ns, group); err == nil {
		limit = int(rg.Spec.MaxActiveRunners)
	}
	go func() {
		defer close(o.done)
		for ctx.Err() == nil {
			all, err := b.RunnerJobs(ctx, ns, group)
			gjobs, gerr := b.Gitea.RepoJobs(ctx, r)
			if err == nil && gerr == nil {
				active := e2e.ActiveCount(all)
				inProgress := 0
				for _, j := range gjobs {
					if j.Status == "in_progress" {
						inProgress++
					}
				}
				o.mu.Lock()
				o.n++
				o.maxSeen = max(o.maxSeen, active, inProgress)
				if (active > limit || inProgress > limit) && o.bad == "" {
					o.bad = fmt.Sprintf("cap %d broken at %s: %d active runner Jobs %v, %d Gitea jobs in progress", limit, time.Now().UTC().Format(time.RFC3339Nano), active, e2e.JobNames(all), inProgress)
				}
				o.mu.Unlock()
			}
			e2e.SleepCtx(ctx, 250*time.Millisecond)
		}
	}()
	return o
}

func (o *capacityObserver) violation() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.bad
}

func (o *capacityObserver) stop() (maxSeen, n int, bad string) {
	o.cancel()
	<-o.done
	return o.maxSeen, o.n, o.bad
}

// TestStateConfigMapOutlivesPassesAndGoesWithItsGroup keeps runner pods from
// starting (a ResourceQuota of zero pods in the group's namespace), so the
// claimed Gitea jobs stay queued. The claims live in the state ConfigMap:
// later passes keep them (and start no second runner), a new job adds its
// claim under a new resourceVersion of the same ConfigMap, and deleting the
// RunnerGroup lets the garbage collector remove its Jobs and its ConfigMap.
// The listener runs in a namespace of its own and watches the group's.
func TestStateConfigMapOutlivesPassesAndGoesWithItsGroup(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 8*time.Minute)
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "state", Max: 3, ListenerNamespace: true})
	sys, ns, fx, group, label, rg := s.Sys, s.NS, s.Fx, s.Group, s.Label, s.RG
	// No job is queued in the new organisation yet, so no runner pod can
	// have started before the quota holds.
	_, err := b.Kube.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the ResourceQuota enforced", nil, func(ctx context.Context) (bool, string, error) {
		q, err := b.Kube.CoreV1().ResourceQuotas(ns).Get(ctx, "no-pods", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		_, ok := q.Status.Hard[corev1.ResourcePods]
		return ok, fmt.Sprint(q.Status), nil
	})
	second := b.Gitea.CreateOrgRepo(ctx, t, fx.Spec.Org, "second")
	dump := func() string { return b.DumpNamespaces(sys, ns) + b.Gitea.JobsLine(fx.Repo, second) }

	keyA, keyB := e2e.JobKey("state", "a"), e2e.JobKey("state", "b")
	e2e.PushJobs(ctx, t, b, fx, "ci.yml", nil, e2e.WfJob{Key: keyA, RunsOn: []string{label}})
	jobA := b.Gitea.WaitJobs(ctx, t, fx.Repo, 1)[keyA]

	cmName := group + "-runner-state"
	type claim struct {
		SpawnedAt time.Time `json:"spawnedAt"`
		JobName   string    `json:"jobName"`
	}
	readState := func(ctx context.Context) (*corev1.ConfigMap, map[string]claim, error) {
		cm, err := b.Kube.CoreV1().ConfigMaps(ns).Get(ctx, cmName, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		var doc struct {
			Spawned map[string]claim `json:"spawned"`
		}
		if err := json.Unmarshal([]byte(cm.Data[e2e.StateDataKey]), &doc); err != nil {
			return cm, nil, fmt.Errorf("ConfigMap %s: %w", cmName, err)
		}
		return cm, doc.Spawned, nil
	}
	// oneJobEach fails at once on a second runner Job for any Gitea job.
	oneJobEach := func(ctx context.Context) (map[int64][]batchv1.Job, error) {
		all, err := b.RunnerJobs(ctx, ns, group)
		if err != nil {
			return nil, nil
		}
		by := e2e.ByGiteaJob(all)
		for id, js := range by {
			if len(js) > 1 {
				return nil, fmt.Errorf("Gitea job #%d has %d runner Jobs: %v", id, len(js), e2e.JobNames(js))
			}
		}
		return by, nil
	}

	// A claim lives only until its runner Job is listed: from then on the
	// Job speaks for itself. So a claim, when the test sees one, names the
	// job's one runner Job, and is gone a pass later. The test lists the
	// Jobs before it reads the state, and the scaler writes the claim
	// before it creates the Job, so a claim whose Job the earlier listing
	// does not have yet is the pass between the two, not a fault.
	claimOf := func(claims map[string]claim, id string, rj []batchv1.Job) error {
		if c, ok := claims[id]; ok && len(rj) > 0 && (len(rj) != 1 || c.JobName != rj[0].Name) {
			return fmt.Errorf("the claim of Gitea job %s names %s, not its runner Job %v", id, c.JobName, e2e.JobNames(rj))
		}
		return nil
	}
	var (
		cm0    *corev1.ConfigMap
		runner string
	)
	idA := strconv.FormatInt(jobA.ID, 10)
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the state ConfigMap and a runner Job for the first job", dump, func(ctx context.Context) (bool, string, error) {
		by, err := oneJobEach(ctx)
		if err != nil || by == nil {
			return false, "", err
		}
		cm, claims, err := readState(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		rj := by[jobA.ID]
		if err := claimOf(claims, idA, rj); err != nil {
			return false, "", err
		}
		cm0 = cm
		if len(rj) == 1 {
			runner = rj[0].Name
		}
		return len(rj) == 1, fmt.Sprintf("claims %v, runner Jobs %v", claims, e2e.JobNames(rj)), nil
	})
	require.Equal(t, group, cm0.Labels[e2e.LabelGroup])
	require.Len(t, cm0.OwnerReferences, 1)
	owner := cm0.OwnerReferences[0]
	require.Equal(t, v1alpha1.GroupVersion.String(), owner.APIVersion)
	require.Equal(t, v1alpha1.Kind, owner.Kind)
	require.Equal(t, group, owner.Name)
	require.Equal(t, rg.UID, owner.UID)
	t.Logf("ConfigMap %s (uid %s, resourceVersion %s); runner Job %s serves Gitea job %d", cmName, cm0.UID, cm0.ResourceVersion, runner, jobA.ID)

	// Passes go on; the job stays queued (its runner cannot start, but it
	// is starting: supply), the ConfigMap stays the same object, and nobody
	// starts a second runner.
	sameState := func(ctx context.Context) error {
		by, err := oneJobEach(ctx)
		if err != nil {
			return err
		}
		cm, claims, err := readState(ctx)
		if err != nil {
			return nil
		}
		if cm.UID != cm0.UID {
			return fmt.Errorf("ConfigMap %s was replaced: uid %s, was %s", cmName, cm.UID, cm0.UID)
		}
		return claimOf(claims, idA, by[jobA.ID])
	}
	b.WaitPasses(ctx, t, ns, group, 3, dump, sameState)
	_, claims, err := readState(ctx)
	require.NoError(t, err)
	require.NotContains(t, claims, idA, "a pass that listed the runner Job dropped its claim")

	// A second job, in another repository of the org: the same ConfigMap,
	// a new resourceVersion, both claims.
	b.Gitea.PushWorkflow(ctx, t, fx.PushAs, second, "ci.yml", e2e.Workflow(e2e.WfJob{Key: keyB, RunsOn: []string{label}}))
	jobB := b.Gitea.WaitJobs(ctx, t, second, 1)[keyB]
	idB := strconv.FormatInt(jobB.ID, 10)
	var cm1 *corev1.ConfigMap
	e2e.WaitUntil(ctx, t, e2e.StepWait, "a runner Job for the second job, and none more for the first", dump, func(ctx context.Context) (bool, string, error) {
		if err := sameState(ctx); err != nil {
			return false, "", err
		}
		by, _ := oneJobEach(ctx)
		cm, claims, err := readState(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		rj := by[jobB.ID]
		if err := claimOf(claims, idB, rj); err != nil {
			return false, "", err
		}
		cm1 = cm
		return len(rj) == 1, fmt.Sprintf("resourceVersion %s claims %v", cm.ResourceVersion, claims), nil
	})
	require.NotEqual(t, cm0.ResourceVersion, cm1.ResourceVersion, "the second job was claimed in the same ConfigMap")
	t.Logf("ConfigMap %s (uid %s) moved from resourceVersion %s to %s", cmName, cm1.UID, cm0.ResourceVersion, cm1.ResourceVersion)
	e2e.WaitUntil(ctx, t, e2e.StepWait, "status: 2 active, 2 queued", dump, func(ctx context.Context) (bool, string, error) {
		got, err := b.Group(ctx, ns, group)
		if err != nil {
			return false, err.Error(), nil
		}
		return got.Status.ActiveRunners == 2 && got.Status.QueuedJobs == 2, e2e.StatusLine(got), nil
	})

	// Deleting the group deletes what it owns, by the garbage collector.
	require.NoError(t, b.Groups(ns).Delete(ctx, group, metav1.DeleteOptions{}))
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the group's Jobs and state ConfigMap garbage-collected", dump, func(ctx context.Context) (bool, string, error) {
		all, err := b.RunnerJobs(ctx, ns, group)
		if err != nil {
			return false, err.Error(), nil
		}
		_, err = b.Kube.CoreV1().ConfigMaps(ns).Get(ctx, cmName, metav1.GetOptions{})
		cmGone := apierrors.IsNotFound(err)
		return len(all) == 0 && cmGone, fmt.Sprintf("runner Jobs %v, ConfigMap gone: %v", e2e.JobNames(all), cmGone), nil
	})
}

// TestJobUnblockedLateIsNotLeftWaitingForTheSpawnTTL: a group capped at one
// runner; "x" runs first, "y" needs x, "z" is queued from the start. When x
// is done, y and z are both queued. The scaler claims y (the lower id) and
// starts a runner for it, but Gitea hands an idle runner the queued job
// updated longest ago (ORDER BY updated, id), which is z: y's claim is then
// spent on z, and y waits, with a free slot, until the spawn TTL expires
// before it gets a runner. It must get one as soon as a slot is free.
func TestJobUnblockedLateIsNotLeftWaitingForTheSpawnTTL(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 8*time.Minute)
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "order", Max: 1})
	ns, fx, group, label, dump := s.NS, s.Fx, s.Group, s.Label, s.Dump
	x, y, z := e2e.JobKey("order", "x"), e2e.JobKey("order", "y"), e2e.JobKey("order", "z")
	e2e.PushJobs(ctx, t, b, fx, "ci.yml", nil,
		e2e.WfJob{Key: x, RunsOn: []string{label}},
		e2e.WfJob{Key: y, RunsOn: []string{label}, Needs: []string{x}},
		e2e.WfJob{Key: z, RunsOn: []string{label}},
	)
	jobs := b.Gitea.WaitJobs(ctx, t, fx.Repo, 3)

	// Outcome only: which runner Job claims which job is the scaler's
	// business; that every job is served promptly is the promise.
	ids := e2e.IDsOf(jobs, x, y, z)
	e2e.WaitUntil(ctx, t, e2e.StepWait, "x, y and z succeeded", dump, func(ctx context.Context) (bool, string, error) {
		gjobs, err := b.Gitea.RepoJobs(ctx, fx.Repo)
		if err != nil {
			return false, err.Error(), nil
		}
		done := 0
		for _, j := range gjobs {
			if j.State() == "completed/success" {
				done++
			}
		}
		return done == len(ids), e2e.DescribeGiteaJobs(gjobs), nil
	})
	gjobs, err := b.Gitea.RepoJobs(ctx, fx.Repo)
	require.NoError(t, err)
	completed := map[string]time.Time{}
	for _, j := range gjobs {
		completed[j.Name] = j.CompletedAt
	}
	// The test values set the spawn TTL to 1m; the runner itself needs a
	// few seconds.
	late := completed[y].Sub(completed[x])
	require.Less(t, late, 30*time.Second, "y was done %s after x: it waited for the spawn TTL\n%s", late, e2e.Redact(dump()))
	all, err := b.RunnerJobs(ctx, ns, group)
	require.NoError(t, err)
	require.Len(t, all, len(ids), "one runner Job per Gitea job: %v", e2e.JobNames(all))
}
