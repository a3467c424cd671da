//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

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
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 8*time.Minute)
	ns := b.namespace(ctx, t, "e2e-scopes", nil)
	defaultLabel := uniq("e2e-default")
	values := deploymentValues(ns)
	values["scaler"].(map[string]any)["defaultLabels"] = []string{defaultLabel}
	b.helmInstall(ctx, t, ns, "gro", values)
	g := b.gitea

	cases := []struct {
		scope v1alpha1.Scope
		setup func(t *testing.T) scopeFixture
	}{
		{scope: v1alpha1.ScopeGlobal, setup: func(t *testing.T) scopeFixture {
			org := g.createOrg(ctx, t, uniq("e2e-global"))
			return scopeFixture{
				spec:     v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeGlobal},
				repo:     g.createOrgRepo(ctx, t, org, "app"),
				pushAs:   g.admin,
				regToken: g.registrationToken(ctx, t, g.admin, giteasetup.GlobalRunners()),
				apiToken: g.adminToken,
			}
		}},
		{scope: v1alpha1.ScopeOrg, setup: func(t *testing.T) scopeFixture {
			return b.newOrgScope(ctx, t, uniq("e2e-org"))
		}},
		{scope: v1alpha1.ScopeUser, setup: func(t *testing.T) scopeFixture {
			// A read-only token for the scaler.
			return b.newUserScope(ctx, t, uniq("e2e-user"), "read:repository", "read:user")
		}},
		{scope: v1alpha1.ScopeRepo, setup: func(t *testing.T) scopeFixture {
			org := g.createOrg(ctx, t, uniq("e2e-repo"))
			r := g.createOrgRepo(ctx, t, org, "app")
			return scopeFixture{
				spec:     v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeRepo, Org: org, Repo: r.Name},
				repo:     r,
				pushAs:   g.admin,
				regToken: g.registrationToken(ctx, t, g.admin, giteasetup.RepoRunners(r)),
				apiToken: g.adminToken,
			}
		}},
	}
	for _, tc := range cases {
		t.Run(string(tc.scope), func(t *testing.T) {
			t.Parallel()
			// A context of its own: a parallel subtest may wait minutes for
			// a free slot in the full suite, past its parent's deadline.
			ctx := testContext(t, 8*time.Minute)
			fx := tc.setup(t)
			group := "rg-" + string(tc.scope)
			label := uniq("e2e-" + string(tc.scope))
			runsOn := []string{label}
			if tc.scope == v1alpha1.ScopeRepo {
				runsOn = append(runsOn, defaultLabel)
			}
			b.createScopedGroup(ctx, t, ns, group, fx, 4, label)

			keys := []string{jobKey(string(tc.scope), "a"), jobKey(string(tc.scope), "b")}
			var jobs []wfJob
			for _, k := range keys {
				b.hold(t, k)
				jobs = append(jobs, wfJob{key: k, runsOn: runsOn})
			}
			g.pushWorkflow(ctx, t, fx.pushAs, fx.repo, "ci.yml", workflow(jobs...))
			dump := func() string { return b.dumpNamespaces(ns) + g.jobsLine(fx.repo) }

			got := b.expectServed(ctx, t, ns, group, fx.repo, keys, dump)

			// Later passes start no second runner for the finished jobs.
			b.waitPasses(ctx, t, ns, group, 2, dump, nil)
			all, err := b.runnerJobs(ctx, ns, group)
			require.NoError(t, err)
			require.Len(t, all, len(keys), "runner Jobs of %s: %v", group, jobNames(all))
			for k, s := range got {
				require.Len(t, byGiteaJob(all)[s.gitea.ID], 1, "runner Jobs of Gitea job %s", k)
			}
			rg, err := b.group(ctx, ns, group)
			require.NoError(t, err)
			ready := condition(rg, "Ready")
			require.NotNil(t, ready, statusLine(rg))
			require.Equal(t, metav1.ConditionTrue, ready.Status, statusLine(rg))
			require.Equal(t, "Reconciled", ready.Reason, statusLine(rg))
			require.Zero(t, rg.Status.QueuedJobs, statusLine(rg))
			require.Equal(t, rg.Generation, rg.Status.ObservedGeneration)

			events, err := b.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + group})
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
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 8*time.Minute)
	s := b.servedGroup(ctx, t, sceneOpts{name: "blocked", max: 5})
	ns, fx, group, label, dump := s.ns, s.fx, s.group, s.label, s.dump
	extra := uniq("e2e-extra")

	first, second, other := jobKey("first"), jobKey("second"), jobKey("other")
	pushJobs(ctx, t, b, fx, "ci.yml", []string{first},
		wfJob{key: first, runsOn: []string{label}},
		wfJob{key: second, runsOn: []string{label}, needs: []string{first}},
		wfJob{key: other, runsOn: []string{label, extra}},
	)
	jobs := b.gitea.waitJobs(ctx, t, fx.repo, 3)

	// noRunnerFor fails at once if a job that must wait has a runner Job.
	noRunnerFor := func(keys ...string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			all, err := b.runnerJobs(ctx, ns, group)
			if err != nil {
				return nil
			}
			by := byGiteaJob(all)
			for _, k := range keys {
				if rj := by[jobs[k].ID]; len(rj) > 0 {
					return fmt.Errorf("Gitea job %s (#%d) got runner Job(s) %v while it must wait", k, jobs[k].ID, jobNames(rj))
				}
			}
			return nil
		}
	}

	// first runs on its runner; second is blocked, other is queued but not
	// served, and the status says so.
	waitUntil(ctx, t, stepWait, "first in progress, second blocked, other unmatched", dump, func(ctx context.Context) (bool, string, error) {
		if err := noRunnerFor(second, other)(ctx); err != nil {
			return false, "", err
		}
		gjobs, err := b.gitea.repoJobs(ctx, fx.repo)
		if err != nil {
			return false, err.Error(), nil
		}
		rg, err := b.group(ctx, ns, group)
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
		return ok, describeGiteaJobs(gjobs) + " | " + statusLine(rg), nil
	})
	// ... and stays so for several passes.
	b.waitPasses(ctx, t, ns, group, 3, dump, noRunnerFor(second, other))

	// Once first is done, second is queued and gets its runner; other
	// still waits.
	b.release(t, first)
	done := b.expectCompleted(ctx, t, ns, group, fx.repo, idsOf(jobs, first, second), dump)
	firstDone := done[first].gitea.CompletedAt.Truncate(time.Second)
	for _, j := range []batchv1.Job{done[second].claim, done[second].runner} {
		require.False(t, j.CreationTimestamp.Time.Before(firstDone),
			"second's runner Job %s was created at %s, before first completed at %s", j.Name, j.CreationTimestamp.UTC(), firstDone.UTC())
	}
	b.waitPasses(ctx, t, ns, group, 2, dump, noRunnerFor(other))
	rg, err := b.group(ctx, ns, group)
	require.NoError(t, err)
	require.Zero(t, rg.Status.QueuedJobs, "other is queued but the group cannot serve it: %s", statusLine(rg))
	require.Zero(t, rg.Status.BlockedJobs, statusLine(rg))

	// The group learns other's label: other gets its runner.
	rg = b.patchGroup(ctx, t, ns, group, map[string]any{"spec": map[string]any{"labels": []string{label, extra}}})
	b.expectCompleted(ctx, t, ns, group, fx.repo, idsOf(jobs, other), dump)
	waitUntil(ctx, t, stepWait, "status observed the new labels", dump, func(ctx context.Context) (bool, string, error) {
		got, err := b.group(ctx, ns, group)
		if err != nil {
			return false, err.Error(), nil
		}
		return got.Status.ObservedGeneration == rg.Generation, statusLine(got), nil
	})
	all, err := b.runnerJobs(ctx, ns, group)
	require.NoError(t, err)
	require.Len(t, all, 3, "one runner Job per Gitea job: %v", jobNames(all))
}

// TestMaxActiveRunnersHoldsAndFreedSlotsAreReused queues five held jobs for
// a group capped at two runners. Throughout, an observer counts the group's
// active runner Jobs (and Gitea's in-progress jobs) and never sees more than
// two. At the cap the status says AtCapacity. Releasing the two running jobs
// frees their slots, which the next passes give to two of the waiting jobs;
// releasing all lets every job finish, each on exactly one runner.
func TestMaxActiveRunnersHoldsAndFreedSlotsAreReused(t *testing.T) {
	t.Parallel()
	const limit = 2
	b := getBed(t)
	ctx := testContext(t, 8*time.Minute)
	s := b.servedGroup(ctx, t, sceneOpts{name: "capacity", max: limit})
	ns, fx, group, label, dump := s.ns, s.fx, s.group, s.label, s.dump

	keys, wf := numberedJobs("cap", 5, label)
	pushJobs(ctx, t, b, fx, "ci.yml", keys, wf...)
	jobs := b.gitea.waitJobs(ctx, t, fx.repo, len(keys))

	obs := observeCapacity(ctx, b, ns, group, fx.repo)
	atCapacity := func(wantJobs, wantQueued int) ([]string, []string) {
		var running, waiting []string
		waitUntil(ctx, t, stepWait, fmt.Sprintf("%d runners busy, %d jobs queued, AtCapacity", limit, wantQueued), dump, func(ctx context.Context) (bool, string, error) {
			if v := obs.violation(); v != "" {
				return false, "", fmt.Errorf("%s", v)
			}
			all, err := b.runnerJobs(ctx, ns, group)
			if err != nil {
				return false, err.Error(), nil
			}
			gjobs, err := b.gitea.repoJobs(ctx, fx.repo)
			if err != nil {
				return false, err.Error(), nil
			}
			rg, err := b.group(ctx, ns, group)
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
			sc := condition(rg, "ScalingActive")
			ok := len(all) == wantJobs && len(running) == limit && len(waiting) == wantQueued &&
				rg.Status.ActiveRunners == limit && int(rg.Status.QueuedJobs) == wantQueued &&
				sc != nil && sc.Status == metav1.ConditionFalse && sc.Reason == "AtCapacity"
			return ok, fmt.Sprintf("runner Jobs %v | %s | %s", jobNames(all), describeGiteaJobs(gjobs), statusLine(rg)), nil
		})
		return running, waiting
	}
	noNewJobs := func(n int) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			if v := obs.violation(); v != "" {
				return fmt.Errorf("%s", v)
			}
			all, err := b.runnerJobs(ctx, ns, group)
			if err == nil && len(all) != n {
				return fmt.Errorf("at capacity, yet the group has %d runner Jobs, want %d: %v", len(all), n, jobNames(all))
			}
			return nil
		}
	}

	running, _ := atCapacity(limit, len(keys)-limit)
	b.waitPasses(ctx, t, ns, group, 3, dump, noNewJobs(limit))

	// Free the two slots: their jobs finish and two waiting jobs take them.
	b.release(t, running...)
	atCapacity(2*limit, len(keys)-2*limit)
	b.waitPasses(ctx, t, ns, group, 2, dump, noNewJobs(2*limit))

	b.release(t, keys...)
	b.expectCompleted(ctx, t, ns, group, fx.repo, idsOf(jobs, keys...), dump)
	maxSeen, n, v := obs.stop()
	require.Empty(t, v)
	require.LessOrEqual(t, maxSeen, limit)
	t.Logf("observed the group %d times: at most %d active runner Jobs (cap %d)", n, maxSeen, limit)
	all, err := b.runnerJobs(ctx, ns, group)
	require.NoError(t, err)
	require.Len(t, all, len(keys), "one runner Job per Gitea job: %v", jobNames(all))
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

func observeCapacity(ctx context.Context, b *bed, ns, group string, r giteasetup.Repo) *capacityObserver {
	o := &capacityObserver{done: make(chan struct{})}
	ctx, o.cancel = context.WithCancel(ctx)
	limit := 0
	if rg, err := b.group(ctx, ns, group); err == nil {
		limit = int(rg.Spec.MaxActiveRunners)
	}
	go func() {
		defer close(o.done)
		for ctx.Err() == nil {
			all, err := b.runnerJobs(ctx, ns, group)
			gjobs, gerr := b.gitea.repoJobs(ctx, r)
			if err == nil && gerr == nil {
				active := activeCount(all)
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
					o.bad = fmt.Sprintf("cap %d broken at %s: %d active runner Jobs %v, %d Gitea jobs in progress", limit, time.Now().UTC().Format(time.RFC3339Nano), active, jobNames(all), inProgress)
				}
				o.mu.Unlock()
			}
			sleepCtx(ctx, 250*time.Millisecond)
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
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 8*time.Minute)
	s := b.servedGroup(ctx, t, sceneOpts{name: "state", max: 3, listenerNamespace: true})
	sys, ns, fx, group, label, rg := s.sys, s.ns, s.fx, s.group, s.label, s.rg
	// No job is queued in the new organisation yet, so no runner pod can
	// have started before the quota holds.
	_, err := b.kube.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitUntil(ctx, t, stepWait, "the ResourceQuota enforced", nil, func(ctx context.Context) (bool, string, error) {
		q, err := b.kube.CoreV1().ResourceQuotas(ns).Get(ctx, "no-pods", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		_, ok := q.Status.Hard[corev1.ResourcePods]
		return ok, fmt.Sprint(q.Status), nil
	})
	second := b.gitea.createOrgRepo(ctx, t, fx.spec.Org, "second")
	dump := func() string { return b.dumpNamespaces(sys, ns) + b.gitea.jobsLine(fx.repo, second) }

	keyA, keyB := jobKey("state", "a"), jobKey("state", "b")
	pushJobs(ctx, t, b, fx, "ci.yml", nil, wfJob{key: keyA, runsOn: []string{label}})
	jobA := b.gitea.waitJobs(ctx, t, fx.repo, 1)[keyA]

	cmName := group + "-runner-state"
	type claim struct {
		SpawnedAt time.Time `json:"spawnedAt"`
		JobName   string    `json:"jobName"`
	}
	readState := func(ctx context.Context) (*corev1.ConfigMap, map[string]claim, error) {
		cm, err := b.kube.CoreV1().ConfigMaps(ns).Get(ctx, cmName, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		var doc struct {
			Spawned map[string]claim `json:"spawned"`
		}
		if err := json.Unmarshal([]byte(cm.Data[stateDataKey]), &doc); err != nil {
			return cm, nil, fmt.Errorf("ConfigMap %s: %w", cmName, err)
		}
		return cm, doc.Spawned, nil
	}
	// oneJobEach fails at once on a second runner Job for any Gitea job.
	oneJobEach := func(ctx context.Context) (map[int64][]batchv1.Job, error) {
		all, err := b.runnerJobs(ctx, ns, group)
		if err != nil {
			return nil, nil
		}
		by := byGiteaJob(all)
		for id, js := range by {
			if len(js) > 1 {
				return nil, fmt.Errorf("Gitea job #%d has %d runner Jobs: %v", id, len(js), jobNames(js))
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
			return fmt.Errorf("the claim of Gitea job %s names %s, not its runner Job %v", id, c.JobName, jobNames(rj))
		}
		return nil
	}
	var (
		cm0    *corev1.ConfigMap
		runner string
	)
	idA := strconv.FormatInt(jobA.ID, 10)
	waitUntil(ctx, t, stepWait, "the state ConfigMap and a runner Job for the first job", dump, func(ctx context.Context) (bool, string, error) {
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
		return len(rj) == 1, fmt.Sprintf("claims %v, runner Jobs %v", claims, jobNames(rj)), nil
	})
	require.Equal(t, group, cm0.Labels[labelGroup])
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
	b.waitPasses(ctx, t, ns, group, 3, dump, sameState)
	_, claims, err := readState(ctx)
	require.NoError(t, err)
	require.NotContains(t, claims, idA, "a pass that listed the runner Job dropped its claim")

	// A second job, in another repository of the org: the same ConfigMap,
	// a new resourceVersion, both claims.
	b.gitea.pushWorkflow(ctx, t, fx.pushAs, second, "ci.yml", workflow(wfJob{key: keyB, runsOn: []string{label}}))
	jobB := b.gitea.waitJobs(ctx, t, second, 1)[keyB]
	idB := strconv.FormatInt(jobB.ID, 10)
	var cm1 *corev1.ConfigMap
	waitUntil(ctx, t, stepWait, "a runner Job for the second job, and none more for the first", dump, func(ctx context.Context) (bool, string, error) {
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
	waitUntil(ctx, t, stepWait, "status: 2 active, 2 queued", dump, func(ctx context.Context) (bool, string, error) {
		got, err := b.group(ctx, ns, group)
		if err != nil {
			return false, err.Error(), nil
		}
		return got.Status.ActiveRunners == 2 && got.Status.QueuedJobs == 2, statusLine(got), nil
	})

	// Deleting the group deletes what it owns, by the garbage collector.
	require.NoError(t, b.groups(ns).Delete(ctx, group, metav1.DeleteOptions{}))
	waitUntil(ctx, t, stepWait, "the group's Jobs and state ConfigMap garbage-collected", dump, func(ctx context.Context) (bool, string, error) {
		all, err := b.runnerJobs(ctx, ns, group)
		if err != nil {
			return false, err.Error(), nil
		}
		_, err = b.kube.CoreV1().ConfigMaps(ns).Get(ctx, cmName, metav1.GetOptions{})
		cmGone := apierrors.IsNotFound(err)
		return len(all) == 0 && cmGone, fmt.Sprintf("runner Jobs %v, ConfigMap gone: %v", jobNames(all), cmGone), nil
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
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 8*time.Minute)
	s := b.servedGroup(ctx, t, sceneOpts{name: "order", max: 1})
	ns, fx, group, label, dump := s.ns, s.fx, s.group, s.label, s.dump
	x, y, z := jobKey("order", "x"), jobKey("order", "y"), jobKey("order", "z")
	pushJobs(ctx, t, b, fx, "ci.yml", nil,
		wfJob{key: x, runsOn: []string{label}},
		wfJob{key: y, runsOn: []string{label}, needs: []string{x}},
		wfJob{key: z, runsOn: []string{label}},
	)
	jobs := b.gitea.waitJobs(ctx, t, fx.repo, 3)

	// Outcome only: which runner Job claims which job is the scaler's
	// business; that every job is served promptly is the promise.
	ids := idsOf(jobs, x, y, z)
	waitUntil(ctx, t, stepWait, "x, y and z succeeded", dump, func(ctx context.Context) (bool, string, error) {
		gjobs, err := b.gitea.repoJobs(ctx, fx.repo)
		if err != nil {
			return false, err.Error(), nil
		}
		done := 0
		for _, j := range gjobs {
			if j.State() == "completed/success" {
				done++
			}
		}
		return done == len(ids), describeGiteaJobs(gjobs), nil
	})
	gjobs, err := b.gitea.repoJobs(ctx, fx.repo)
	require.NoError(t, err)
	completed := map[string]time.Time{}
	for _, j := range gjobs {
		completed[j.Name] = j.CompletedAt
	}
	// The test values set the spawn TTL to 1m; the runner itself needs a
	// few seconds.
	late := completed[y].Sub(completed[x])
	require.Less(t, late, 30*time.Second, "y was done %s after x: it waited for the spawn TTL\n%s", late, redact(dump()))
	all, err := b.runnerJobs(ctx, ns, group)
	require.NoError(t, err)
	require.Len(t, all, len(ids), "one runner Job per Gitea job: %v", jobNames(all))
}
