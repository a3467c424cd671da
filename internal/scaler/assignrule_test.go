package scaler

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/assign"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// servedAt makes a group look served by a pass at the given time: Ready,
// at its generation.
func servedAt(at time.Time) func(*v1alpha1.RunnerGroup) {
	return func(rg *v1alpha1.RunnerGroup) {
		t := metav1.NewTime(at)
		rg.Status.ObservedGeneration = rg.Generation
		rg.Status.LastCheckTime = &t
		rg.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReconciled}}
	}
}

// recordedFailure makes a group look served by a pass at t0 that failed
// with reason.
func recordedFailure(reason string) func(*v1alpha1.RunnerGroup) {
	return func(rg *v1alpha1.RunnerGroup) {
		servedAt(t0)(rg)
		rg.Status.Conditions[0].Status, rg.Status.Conditions[0].Reason = metav1.ConditionFalse, reason
	}
}

// newServedEnv is newEnv with a state ConfigMap for every group with a
// lastCheckTime, as its earlier passes left it (without one, the pass
// would take the state for deleted and rebuild it, creating nothing).
func newServedEnv(t *testing.T, groups ...*v1alpha1.RunnerGroup) *env {
	e := newEnv(t, groups...)
	for _, rg := range groups {
		if rg.Status.LastCheckTime != nil {
			_, err := state.Store{Client: e.kube}.Save(context.Background(), stateOwner(rg), state.Loaded{}, state.Claims{})
			require.NoError(t, err)
		}
	}
	return e
}

// addTokens puts the API and registration token Secrets into namespace.
func (e *env) addTokens(namespace string) {
	e.t.Helper()
	for _, name := range []string{"api", "reg"} {
		s := secret(name, secretToken)
		s.Namespace = namespace
		require.NoError(e.t, e.kube.Tracker().Add(s))
	}
}

// runnersOf counts the runner Jobs of each group, in every namespace.
func (e *env) runnersOf(namespaces ...string) map[string]int {
	e.t.Helper()
	out := map[string]int{}
	for _, n := range append(namespaces, ns) {
		l, err := e.kube.BatchV1().Jobs(n).List(context.Background(), metav1.ListOptions{})
		require.NoError(e.t, err)
		for _, j := range l.Items {
			out[n+"/"+j.Labels[v1alpha1.LabelRunnerGroupName]]++
		}
	}
	return out
}

// Issue 25.3 and 25.4: which group can serve is judged by one rule, from
// each group's spec and recorded status, in every pass (of any listener)
// and in the why command alike.
func TestAGroupThatCannotServeKeepsNoJobs(t *testing.T) {
	job := queuedIn(1, "acme/app", "ubuntu-latest")
	tests := []struct {
		name string
		// repo is the more specific group, which the listener's selector
		// may leave to another listener (pool=elsewhere).
		repo *v1alpha1.RunnerGroup
		// selector picks the groups this pass serves.
		selector string
		// prepare spoils something before the pass.
		prepare func(e *env)
		want    map[string]int
	}{
		{
			name:     "a group no listener has ever served (no status) keeps nothing",
			repo:     newGroup("app", 5, repoScope("app"), labelled("pool", "elsewhere")),
			selector: "pool!=elsewhere",
			want:     map[string]int{"runners/acme": 1},
		},
		{
			name:     "a group whose listener is gone (lastCheckTime long past) keeps nothing",
			repo:     newGroup("app", 5, repoScope("app"), labelled("pool", "elsewhere"), servedAt(t0.Add(-time.Hour))),
			selector: "pool!=elsewhere",
			want:     map[string]int{"runners/acme": 1},
		},
		{
			name:     "a group another listener serves keeps its job",
			repo:     newGroup("app", 5, repoScope("app"), labelled("pool", "elsewhere"), servedAt(t0)),
			selector: "pool!=elsewhere",
			want:     map[string]int{},
		},
		{
			name: "a served group whose last pass failed after validating (state ConfigMap not its own) keeps nothing",
			repo: newGroup("app", 5, repoScope("app"), recordedFailure(v1alpha1.ReasonStateNotOwned)),
			prepare: func(e *env) {
				require.NoError(t, e.kube.Tracker().Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-state", Namespace: ns}}))
			},
			want: map[string]int{"runners/acme": 1},
		},
		{
			name: "a served group whose token was revoked (recorded by its listing) keeps nothing",
			repo: newGroup("app", 5, repoScope("app"), recordedFailure(v1alpha1.ReasonGiteaUnauthorized)),
			want: map[string]int{"runners/acme": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newServedEnv(t, tt.repo, newGroup("acme", 5, servedAt(t0)))
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{job}}
			if tt.prepare != nil {
				tt.prepare(e)
			}
			e.pass(func(_ *Deps, c *Config) { c.Selector = tt.selector })
			assert.Equal(t, tt.want, e.runnersOf())
		})
	}
}

// Issue 25.6: a transient failure of the owner does not move its jobs.
func TestATransientFailureDoesNotMoveJobs(t *testing.T) {
	e := newServedEnv(t, newGroup("app", 5, repoScope("app"), withAPISecret("app-api"), servedAt(t0)), newGroup("acme", 5, servedAt(t0)))
	s := secret("app-api", secretToken)
	require.NoError(t, e.kube.Tracker().Add(s))
	e.kube.PrependReactor("get", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() == "app-api" {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queuedIn(1, "acme/app", "ubuntu-latest")}}
	sum := e.pass()
	assert.Equal(t, []string{"runners/app"}, sum.Failed)
	assert.Equal(t, map[string]int{}, e.runnersOf(), "the org group leaves the job to its owner, which fails for now")
	assert.Equal(t, int32(1), e.group("acme").Status.JobsLeftToOtherGroups)
}

// Issue 25.6: a job whose owner changes (here: a paused group is resumed)
// gets no second runner while the runner another group started for it
// may still take it.
func TestAMovedJobCountsTheRunnerAlreadyStarting(t *testing.T) {
	e := newServedEnv(t, newGroup("app", 0, repoScope("app"), servedAt(t0)), newGroup("acme", 5, servedAt(t0)))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queuedIn(1, "acme/app", "ubuntu-latest")}}
	e.pass()
	require.Equal(t, map[string]int{"runners/acme": 1}, e.runnersOf(), "the paused group leaves it to the org group")

	resumed := e.group("app")
	resumed.Spec.MaxActiveRunners = 5
	resumed.Generation++
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(resumed)
	require.NoError(t, err)
	obj, err := e.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Get(context.Background(), "app", metav1.GetOptions{})
	require.NoError(t, err)
	obj.Object = u
	_, err = e.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Update(context.Background(), obj, metav1.UpdateOptions{})
	require.NoError(t, err)

	e.pass()
	e.pass()
	assert.Equal(t, map[string]int{"runners/acme": 1}, e.runnersOf(), "the resumed group owns the job now, and counts the org group's runner starting for it")
	assert.Equal(t, map[int64]int{1: 1}, e.giteaJobsServed())
}

// Issue 19: team B's repo-scope group on team A's repository ranks before
// A's org group, and may never take the job (its runners register in B's
// own org). It keeps the job for one hold at most; then A's group serves
// it. A group outside its namespace's grant serves nothing and takes no
// part in the rule.
func TestAnotherTenantsGroupCannotStarveAJob(t *testing.T) {
	const teamA, teamB = "team-a", "team-b"
	hold := 10 * time.Minute
	tests := []struct {
		name    string
		created time.Time
		grantB  map[string]string
		want    map[string]int
		reasonB string
		// recorded: B's own last pass found it outside its grant already.
		recorded bool
	}{
		{"within the hold the more specific group of B has it", t0, nil, map[string]int{"team-b/web": 1}, v1alpha1.ReasonReconciled, false},
		{"past the hold A's group has it", t0.Add(-hold - time.Minute), nil, map[string]int{"team-a/contoso": 1}, v1alpha1.ReasonReconciled, false},
		{"B's group outside B's grant serves nothing, and A's group has the job at once", t0,
			map[string]string{tenancy.AnnotationGrantedRepositories: "fabrikam"}, map[string]int{"team-a/contoso": 1}, v1alpha1.ReasonNotGranted, false},
		{"B's group outside B's grant, as recorded by its last pass", t0,
			map[string]string{tenancy.AnnotationGrantedRepositories: "fabrikam"}, map[string]int{"team-a/contoso": 1}, v1alpha1.ReasonNotGranted, true},
		{"B's group on a Gitea not granted to B", t0,
			map[string]string{tenancy.AnnotationGrantedGiteaURLs: "https://other.example.com"}, map[string]int{"team-a/contoso": 1}, v1alpha1.ReasonNotGranted, false},
		{"B granted A's repository: the hold decides", t0,
			map[string]string{tenancy.AnnotationGrantedRepositories: "contoso/web"}, map[string]int{"team-b/web": 1}, v1alpha1.ReasonReconciled, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orgA := func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "contoso" }
			a := newGroup("contoso", 5, inNamespace(teamA), orgA, servedAt(t0))
			b := newGroup("web", 5, inNamespace(teamB), orgA, repoScope("web"), servedAt(t0))
			if tt.recorded {
				// Recorded by B's own last pass, as any listener sees it.
				recordedFailure(v1alpha1.ReasonNotGranted)(b)
			}
			e := newServedEnv(t, a, b)
			e.addTokens(teamA)
			e.addTokens(teamB)
			nsB, err := e.kube.CoreV1().Namespaces().Get(context.Background(), teamB, metav1.GetOptions{})
			require.NoError(t, err)
			nsB.Annotations = tt.grantB
			_, err = e.kube.CoreV1().Namespaces().Update(context.Background(), nsB, metav1.UpdateOptions{})
			require.NoError(t, err)
			job := queuedIn(1, "contoso/web", "ubuntu-latest")
			job.Created = tt.created
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{job}}
			e.kube.ClearActions()
			e.pass(func(_ *Deps, c *Config) { c.AssignmentHold = hold })
			assert.Equal(t, tt.want, e.runnersOf(teamA, teamB))
			assert.Equal(t, tt.reasonB, ready(e.groupIn(teamB, "web")).Reason)
			if tt.reasonB == v1alpha1.ReasonNotGranted {
				assert.Contains(t, ready(e.groupIn(teamB, "web")).Message, "is not granted to namespace team-b")
				for _, r := range requestsIn(e, teamB) {
					assert.NotEqual(t, "get secrets", r, "no Secret of a group outside its grant is read")
				}
			}
		})
	}
}

// Gitea job IDs are per Gitea: a runner Job another group started for job
// 1 of another Gitea says nothing about job 1 of this one.
func TestARunnerForTheSameJobIDOnAnotherGiteaIsNotCounted(t *testing.T) {
	other := newGroup("other", 5, servedAt(t0), func(rg *v1alpha1.RunnerGroup) { rg.Spec.Gitea.URL = "https://other.example.com" })
	e := newServedEnv(t, newGroup("acme", 5, servedAt(t0)), other)
	e.addJob(other, "other-aaaaa", 1, t0)
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queuedIn(1, "acme/app", "ubuntu-latest")}}
	e.pass()
	assert.Equal(t, map[string]int{"runners/acme": 1, "runners/other": 1}, e.runnersOf())
}

// failingRepo fails the jobs listing of one repository's target with err,
// as Gitea does for a token it refuses there (401, 403) or a repository it
// does not know (404); every other target is listed.
type failingRepo struct {
	*fakeGitea
	repo string
	err  error
}

func (f failingRepo) Snapshot(ctx context.Context, t scope.Place) (gitea.Snapshot, error) {
	if t.Repo() == f.repo {
		return gitea.Snapshot{}, f.err
	}
	return f.fakeGitea.Snapshot(ctx, t)
}

// listedGroups are every RunnerGroup of the cluster, as why lists them.
func (e *env) listedGroups() []v1alpha1.RunnerGroup {
	e.t.Helper()
	all, _, err := runnergroups.Client{Dynamic: e.dyn}.List(context.Background(), metav1.NamespaceAll, "")
	require.NoError(e.t, err)
	return all
}

// Issue 32.2: a new group that fails after validating (its state
// ConfigMap is not its own, Gitea refuses its listing) records why but no
// lastCheckTime. It was taken for "served for the first time" in every
// pass after, for ever, and kept the jobs it is preferred for; why named
// another owner. A group that has failed is never new again: from its
// second pass on it holds nothing, and the passes and why agree.
func TestANewGroupThatFailsAfterValidatingHoldsNothing(t *testing.T) {
	const teamA, teamB = "team-a", "team-b"
	hold := 10 * time.Minute
	unauthorized := &gitea.APIError{Kind: gitea.ErrUnauthorized, Status: 401, URL: "/api/v1/repos/acme/app/actions/jobs"}
	notFound := &gitea.APIError{Kind: gitea.ErrNotFound, Status: 404, URL: "/api/v1/repos/contoso/web/actions/jobs"}
	orgContoso := func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "contoso" }
	tests := []struct {
		name    string
		groups  []*v1alpha1.RunnerGroup
		repo    string
		listErr error
		// foreignState puts a ConfigMap not the group's own where the
		// failing group keeps its state.
		foreignState *corev1.ConfigMap
		job          gitea.Job
		failing      string
		wantReason   string
		want         map[string]int
	}{
		{
			name:   "its state ConfigMap is not its own",
			groups: []*v1alpha1.RunnerGroup{newGroup("app", 5, repoScope("app")), newGroup("acme", 5, servedAt(t0))},
			foreignState: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: state.ConfigMapName("app"), Namespace: ns,
				Labels: map[string]string{v1alpha1.LabelRunnerGroupName: "app"}}},
			job:     queuedIn(1, "acme/app", "ubuntu-latest"),
			failing: ns + "/app", wantReason: v1alpha1.ReasonStateNotOwned,
			want: map[string]int{ns + "/acme": 1},
		},
		{
			name:    "Gitea refuses its token on its listing (401)",
			groups:  []*v1alpha1.RunnerGroup{newGroup("app", 5, repoScope("app")), newGroup("acme", 5, servedAt(t0))},
			repo:    "app",
			listErr: unauthorized,
			job:     queuedIn(1, "acme/app", "ubuntu-latest"),
			failing: ns + "/app", wantReason: v1alpha1.ReasonGiteaUnauthorized,
			want: map[string]int{ns + "/acme": 1},
		},
		{
			name: "another tenant's group with a junk token keeps no job of A's, not even for a hold",
			groups: []*v1alpha1.RunnerGroup{
				newGroup("contoso", 5, inNamespace(teamA), orgContoso, servedAt(t0)),
				newGroup("web", 5, inNamespace(teamB), orgContoso, repoScope("web")),
			},
			repo:    "web",
			listErr: notFound,
			job:     queuedIn(1, "contoso/web", "ubuntu-latest"),
			failing: teamB + "/web", wantReason: v1alpha1.ReasonGiteaNotFound,
			want: map[string]int{teamA + "/contoso": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newServedEnv(t, tt.groups...)
			e.addTokens(teamA)
			e.addTokens(teamB)
			if tt.foreignState != nil {
				require.NoError(t, e.kube.Tracker().Add(tt.foreignState))
			}
			job := tt.job
			job.Created = t0
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{job}}
			setups := []setup{func(d *Deps, c *Config) {
				c.AssignmentHold = hold
				if tt.listErr != nil {
					d.Gitea = func(string, string) (gitea.Client, error) { return failingRepo{e.gitea, tt.repo, tt.listErr}, nil }
				}
			}}
			failNs, failName, _ := strings.Cut(tt.failing, "/")

			// Its first pass takes it for new: it may hold the job for
			// that pass, and records why it failed.
			e.pass(setups...)
			require.Equal(t, tt.wantReason, ready(e.groupIn(failNs, failName)).Reason)
			require.Nil(t, e.groupIn(failNs, failName).Status.LastCheckTime, "it never asked Gitea for its jobs successfully")

			for pass := 2; pass <= 3; pass++ {
				e.pass(setups...)
				assert.Equal(t, tt.want, e.runnersOf(teamA, teamB), "pass %d: the failing group holds nothing", pass)
				rule := assign.FromGroups(pointers(e.listedGroups()), assign.Options{DefaultLabels: []string{"ubuntu-latest:docker://x"}, Hold: hold, Now: e.now}, nil)
				owner := rule.Owner("https://gitea.example.com", assign.Job{Repo: job.Repo, Labels: job.Labels, Created: job.Created})
				assert.Contains(t, tt.want, owner, "pass %d: why names the owner the passes serve the job with", pass)
			}
		})
	}
}

// Issue 32.7: a job whose owner changed waits for another group's runner
// Job started for it only while that runner may still take it: not when
// Gitea lists it running another job, nor when its runner container has
// ended after a job. Such a runner will not take this one, and the job
// would wait the whole hold for nothing.
func TestAMovedJobWaitsOnlyForAFreeRunner(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.PodStatus
		// busy: Gitea lists the other runner running job 2.
		busy bool
		// want is how many runners the owner starts for job 1.
		want int
	}{
		{name: "the other group's runner is starting: the job waits for it", want: 0},
		{name: "the other group's runner is up and idle: the job waits for it", pod: runnerRunningSince(t0.Add(-30 * time.Second)), want: 0},
		{name: "the other group's runner runs another job: the owner serves this one", pod: runnerRunningSince(t0.Add(-30 * time.Second)), busy: true, want: 1},
		{name: "the other group's runner has ended after a job: the owner serves this one", pod: podWithSidecar, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acme := newGroup("acme", 5, servedAt(t0))
			e := newServedEnv(t, newGroup("app", 5, repoScope("app"), servedAt(t0)), acme)
			// Started by the org group a minute ago, for job 1, while the
			// repo group could not serve it.
			other := e.addRunner(acme, "acme-aaaaa", 1, time.Minute, tt.pod)
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queuedIn(1, "acme/app", "ubuntu-latest")}}
			if tt.busy {
				e.gitea.snap.Running = []gitea.Job{{ID: 2, Repo: "acme/web", Labels: []string{"ubuntu-latest"}, RunnerName: runnerjob.RunnerNameOf(other)}}
			}
			e.pass()
			assert.Equal(t, tt.want, e.runnersOf()[ns+"/app"])
		})
	}
}

// lastCheckedAt makes a group look last served at t, Ready or failed
// with reason (empty: Ready).
func lastCheckedAt(t time.Time, reason string) func(*v1alpha1.RunnerGroup) {
	return func(rg *v1alpha1.RunnerGroup) {
		servedAt(t)(rg)
		if reason != "" {
			rg.Status.Conditions[0].Status, rg.Status.Conditions[0].Reason = metav1.ConditionFalse, reason
		}
	}
}

// Issue 32, risk: with passes further apart than ServedWithin allows
// (--interval or a CronJob schedule of 15 minutes), every group's
// lastCheckTime is older than the window when the next pass begins. The
// pass serves those groups itself, now: it judges them by their spec and
// recorded reason, so a group that cannot serve still comes after one
// that can, and a healthy one keeps its place.
func TestPassesFarApartJudgeTheirOwnGroupsAsServed(t *testing.T) {
	const interval = 15 * time.Minute
	last := t0.Add(-interval)
	tests := []struct {
		name string
		app  func(*v1alpha1.RunnerGroup)
		want map[string]int
	}{
		{"a healthy repo group keeps its job", lastCheckedAt(last, ""), map[string]int{ns + "/app": 1}},
		{"a paused repo group leaves it to the org group", func(rg *v1alpha1.RunnerGroup) {
			lastCheckedAt(last, "")(rg)
			rg.Spec.MaxActiveRunners = 0
		}, map[string]int{ns + "/acme": 1}},
		{"a repo group whose token was revoked leaves it to the org group", lastCheckedAt(last, v1alpha1.ReasonGiteaUnauthorized), map[string]int{ns + "/acme": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newServedEnv(t, newGroup("app", 5, repoScope("app"), tt.app), newGroup("acme", 5, lastCheckedAt(last, "")))
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queuedIn(1, "acme/app", "ubuntu-latest")}}
			e.pass(at(0))
			assert.Equal(t, tt.want, e.runnersOf())
		})
	}
}

// Issue 32, risk: a Gitea outage on one group's listing that lasts longer
// than ServedWithin does not move the group's jobs to another group its
// listener serves: the listener serves the group still, and a timeout is
// a transient reason.
func TestALongOutageOfOneListingDoesNotMoveItsJobs(t *testing.T) {
	timeout := &gitea.APIError{Kind: gitea.ErrTimeout, URL: "/api/v1/repos/acme/app/actions/jobs"}
	e := newServedEnv(t,
		newGroup("app", 5, repoScope("app"), lastCheckedAt(t0.Add(-15*time.Minute), v1alpha1.ReasonGiteaTimeout)),
		newGroup("acme", 5, lastCheckedAt(t0.Add(-time.Minute), "")))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queuedIn(1, "acme/app", "ubuntu-latest")}}
	sum := e.pass(at(0), func(d *Deps, _ *Config) {
		d.Gitea = func(string, string) (gitea.Client, error) { return failingRepo{e.gitea, "app", timeout}, nil }
	})
	assert.Equal(t, []string{ns + "/app"}, sum.Failed)
	assert.Equal(t, map[string]int{}, e.runnersOf(), "the org group leaves the job to the repo group, whose listing times out for now")
	assert.Equal(t, int32(1), e.group("acme").Status.JobsLeftToOtherGroups)
}
