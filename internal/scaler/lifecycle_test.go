package scaler

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// runnersGitea adds the runners API to the scaler tests' fake Gitea.
type runnersGitea struct {
	*fakeGitea
	mu       sync.Mutex
	runners  []gitea.Runner
	listErr  error
	calls    []string
	nextID   int64
	onSwitch func() // runs after a disable, before its answer
	// inProgress, when set, is what InProgress answers (the sound
	// confirmation), where the pass's snapshot may have missed a job;
	// else InProgress answers the snapshot's running jobs.
	inProgress    []gitea.Job
	inProgressErr error
	// onList runs before each runners listing is answered, with its
	// number (from 1).
	onList func(n int)
	lists  int
	// freshList is the number of the listing that reads the runners
	// again just before a stuck runner Job is deleted.
	freshList int
	// elsewhere are the runners and running jobs of targets other than
	// the group's own, when a test gives them; every other target
	// answers with runners and the snapshot.
	elsewhere map[scope.Place]*scopeRunners
}

// scopeRunners are one other target's registrations and running jobs.
type scopeRunners struct {
	runners []gitea.Runner
	running []gitea.Job
	listErr error
}

// place returns the other target t, made on first use.
func (r *runnersGitea) place(t scope.Place) *scopeRunners {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.elsewhere == nil {
		r.elsewhere = map[scope.Place]*scopeRunners{}
	}
	if r.elsewhere[t] == nil {
		r.elsewhere[t] = &scopeRunners{}
	}
	return r.elsewhere[t]
}

// registerAt registers a runner in the other target t.
func (r *runnersGitea) registerAt(t scope.Place, name string, online bool) {
	p := r.place(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	p.runners = append(p.runners, gitea.Runner{ID: r.nextID, Name: name, Online: online, Ephemeral: true})
}

// namesAt are the runners registered in the other target t.
func (r *runnersGitea) namesAt(t scope.Place) []string {
	p := r.place(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, x := range p.runners {
		out = append(out, x.Name)
	}
	return out
}

func (r *runnersGitea) ListRunners(_ context.Context, t scope.Place) ([]gitea.Runner, error) {
	r.mu.Lock()
	if p := r.elsewhere[t]; p != nil {
		defer r.mu.Unlock()
		r.calls = append(r.calls, "list "+t.String())
		return append([]gitea.Runner(nil), p.runners...), p.listErr
	}
	r.calls = append(r.calls, "list")
	r.lists++
	n, hook := r.lists, r.onList
	r.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]gitea.Runner(nil), r.runners...), r.listErr
}

func (r *runnersGitea) InProgress(_ context.Context, t scope.Place) ([]gitea.Job, error) {
	r.mu.Lock()
	if p := r.elsewhere[t]; p != nil {
		defer r.mu.Unlock()
		r.calls = append(r.calls, "confirm "+t.String())
		return append([]gitea.Job(nil), p.running...), nil
	}
	r.calls = append(r.calls, "confirm")
	jobs, err := r.inProgress, r.inProgressErr
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if jobs != nil {
		return jobs, nil
	}
	r.fakeGitea.mu.Lock()
	defer r.fakeGitea.mu.Unlock()
	return append([]gitea.Job(nil), r.fakeGitea.snap.Running...), nil
}

func (r *runnersGitea) DisableRunner(_ context.Context, _ scope.Place, id int64) error {
	r.mu.Lock()
	r.calls = append(r.calls, "disable "+r.nameOf(id))
	for i := range r.runners {
		if r.runners[i].ID == id {
			r.runners[i].Disabled = true
		}
	}
	for _, p := range r.elsewhere {
		for i := range p.runners {
			if p.runners[i].ID == id {
				p.runners[i].Disabled = true
			}
		}
	}
	hook := r.onSwitch
	r.mu.Unlock()
	if hook != nil {
		hook()
	}
	return nil
}

func (r *runnersGitea) DeleteRunner(_ context.Context, _ scope.Place, id int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "delete "+r.nameOf(id))
	drop := func(regs []gitea.Runner) []gitea.Runner {
		return slices.DeleteFunc(regs, func(x gitea.Runner) bool { return x.ID == id })
	}
	r.runners = drop(r.runners)
	for _, p := range r.elsewhere {
		p.runners = drop(p.runners)
	}
	return nil
}

func (r *runnersGitea) nameOf(id int64) string {
	for _, x := range r.runners {
		if x.ID == id {
			return x.Name
		}
	}
	for _, p := range r.elsewhere {
		for _, x := range p.runners {
			if x.ID == id {
				return x.Name
			}
		}
	}
	return "?"
}

func (r *runnersGitea) register(name string, online bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	r.runners = append(r.runners, gitea.Runner{ID: r.nextID, Name: name, Online: online, Ephemeral: true})
}

func (r *runnersGitea) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, x := range r.runners {
		out = append(out, x.Name)
	}
	return out
}

// lifecycleEnv is a test env whose Gitea has the runners API, with the
// lifecycle's timeouts at 10 minutes.
func lifecycleEnv(t *testing.T, rg *v1alpha1.RunnerGroup) (*env, *runnersGitea, setup) {
	e := newEnv(t, rg)
	rgit := &runnersGitea{fakeGitea: e.gitea}
	set := func(d *Deps, c *Config) {
		d.Gitea = func(string, string) (gitea.Client, error) { return rgit, nil }
		c.RunnerIdleTimeout, c.RunnerStartTimeout = 10*time.Minute, 10*time.Minute
	}
	return e, rgit, set
}

// addRunner adds a runner Job with a UID, made `age` before t0, and its pod
// in the given state (nil: no pod).
func (e *env) addRunner(rg *v1alpha1.RunnerGroup, name string, giteaJob int64, age time.Duration, pod *corev1.PodStatus) *batchv1.Job {
	e.t.Helper()
	// As a pass makes it for a group whose registration token is its
	// scope's own: the runner registers where the group is.
	return e.addRunnerAt(rg, scope.Of(&rg.Spec), true, name, giteaJob, age, pod)
}

// addRunnerAt is addRunner for a runner Job whose runner registers in
// at, as known or not.
func (e *env) addRunnerAt(rg *v1alpha1.RunnerGroup, at scope.Place, known bool, name string, giteaJob int64, age time.Duration, pod *corev1.PodStatus) *batchv1.Job {
	e.t.Helper()
	j, err := runnerjob.Build(rg, name, giteaJob, runnerjob.DefaultOptions())
	require.NoError(e.t, err)
	runnerjob.MarkScope(j, at, known)
	j.UID = types.UID("job-uid-" + name)
	j.CreationTimestamp = metav1.NewTime(t0.Add(-age))
	_, err = e.kube.BatchV1().Jobs(ns).Create(context.Background(), j, metav1.CreateOptions{})
	require.NoError(e.t, err)
	if pod != nil {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-pod", Namespace: ns, Labels: j.Spec.Template.Labels, CreationTimestamp: j.CreationTimestamp,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: j.UID, Controller: ptr.To(true)}}},
			Status: *pod,
		}
		_, err := e.kube.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
		require.NoError(e.t, err)
	}
	return j
}

var (
	podRunning   = &corev1.PodStatus{Phase: corev1.PodRunning}
	podPullError = &corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "runner",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: `pull access denied for no/such-image`}}}}}
	podUnschedulable = &corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient cpu."}}}
)

func eventReasons(e *env) []string {
	var out []string
	for _, ev := range e.events() {
		out = append(out, ev.Type+" "+ev.Reason+": "+ev.Message)
	}
	return out
}

func jobNamesOf(e *env) []string {
	var out []string
	for _, j := range e.jobs() {
		out = append(out, j.Name)
	}
	return out
}

func TestIdleSurplusRunnersAreReapedSafely(t *testing.T) {
	t.Run("idle past the timeout, no demand: disabled, confirmed idle, Job and registration deleted", func(t *testing.T) {
		rg := newGroup("ci", 3)
		e, g, set := lifecycleEnv(t, rg)
		old := e.addRunner(rg, "ci-aaaaa", 1, 20*time.Minute, podRunning)
		young := e.addRunner(rg, "ci-bbbbb", 2, 5*time.Minute, podRunning)
		g.register(runnerjob.RunnerNameOf(old), true)
		g.register(runnerjob.RunnerNameOf(young), true)

		e.pass(set)

		assert.Equal(t, []string{"ci-bbbbb"}, jobNamesOf(e), "only the runner idle past the timeout goes")
		assert.Equal(t, []string{"list", "disable " + runnerjob.RunnerNameOf(old), "confirm", "list", "delete " + runnerjob.RunnerNameOf(old)}, g.calls,
			"Gitea's running jobs and registrations were asked again after the disable")
		st := e.group("ci").Status
		assert.EqualValues(t, 1, st.IdleRunners, "the one left")
		assert.EqualValues(t, 1, st.ActiveRunners)
		assert.EqualValues(t, 1, st.ReapedRunners)
		assert.Contains(t, strings.Join(eventReasons(e), "\n"), "Normal RunnerReaped: Reaped idle runner Job ci-aaaaa")
	})
	t.Run("a runner that took a job between the disable and the check is left alone", func(t *testing.T) {
		rg := newGroup("ci", 3)
		e, g, set := lifecycleEnv(t, rg)
		j := e.addRunner(rg, "ci-aaaaa", 1, 20*time.Minute, podRunning)
		g.register(runnerjob.RunnerNameOf(j), true)
		g.onSwitch = func() {
			e.gitea.mu.Lock()
			e.gitea.snap.Running = []gitea.Job{{ID: 9, RunnerName: runnerjob.RunnerNameOf(j)}}
			e.gitea.mu.Unlock()
		}

		e.pass(set)

		assert.Equal(t, []string{"ci-aaaaa"}, jobNamesOf(e))
		assert.Equal(t, []string{"list", "disable " + runnerjob.RunnerNameOf(j), "confirm", "list"}, g.calls, "disabled, then never deleted")
		assert.Zero(t, e.group("ci").Status.ReapedRunners)
	})
	t.Run("idle runners the queued jobs need are kept", func(t *testing.T) {
		rg := newGroup("ci", 3)
		e, g, set := lifecycleEnv(t, rg)
		j := e.addRunner(rg, "ci-aaaaa", 1, 20*time.Minute, podRunning)
		g.register(runnerjob.RunnerNameOf(j), true)
		e.gitea.snap.Queued = []gitea.Job{queued(1, "ubuntu-latest")}

		e.pass(set)

		assert.Equal(t, []string{"ci-aaaaa"}, jobNamesOf(e))
		assert.Equal(t, []string{"list"}, g.calls)
	})
	t.Run("a runner not registered yet is not reaped: it could register and take a job right now", func(t *testing.T) {
		rg := newGroup("ci", 3)
		e, g, set := lifecycleEnv(t, rg)
		e.addRunner(rg, "ci-aaaaa", 1, 20*time.Minute, podRunning)

		e.pass(set)

		assert.Equal(t, []string{"ci-aaaaa"}, jobNamesOf(e))
		assert.Equal(t, []string{"list"}, g.calls)
	})
	t.Run("the warm pool's minimum is never reaped, and shows as warm", func(t *testing.T) {
		rg := newGroup("ci", 3)
		rg.Spec.MinIdleRunners = 1
		e, g, set := lifecycleEnv(t, rg)
		j := e.addRunner(rg, "ci-aaaaa", 0, 20*time.Minute, podRunning)
		g.register(runnerjob.RunnerNameOf(j), true)

		e.pass(set)

		assert.Equal(t, []string{"ci-aaaaa"}, jobNamesOf(e), "kept, and no second warm runner")
		assert.EqualValues(t, 1, e.group("ci").Status.WarmRunners)
	})
	t.Run("idle runners beyond the warm pool are reaped, the pool's are not", func(t *testing.T) {
		rg := newGroup("ci", 3)
		rg.Spec.MinIdleRunners = 1
		e, g, set := lifecycleEnv(t, rg)
		a := e.addRunner(rg, "ci-aaaaa", 0, 30*time.Minute, podRunning)
		b := e.addRunner(rg, "ci-bbbbb", 0, 20*time.Minute, podRunning)
		g.register(runnerjob.RunnerNameOf(a), true)
		g.register(runnerjob.RunnerNameOf(b), true)

		e.pass(set)

		assert.Equal(t, []string{"ci-bbbbb"}, jobNamesOf(e), "the longest idle goes")
		assert.EqualValues(t, 1, e.group("ci").Status.ReapedRunners)
	})
	t.Run("a runners API the token may not use fails the group, after the runners were created", func(t *testing.T) {
		rg := newGroup("ci", 3)
		e, g, set := lifecycleEnv(t, rg)
		g.listErr = &gitea.APIError{Kind: gitea.ErrForbidden, Status: 403, URL: "/api/v1/orgs/acme/actions/runners", Message: "Must be an organization owner"}
		e.gitea.snap.Queued = []gitea.Job{queued(1, "ubuntu-latest")}

		sum, err := e.scaler(set).Pass(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 1, sum.Created)
		ready := meta.FindStatusCondition(e.group("ci").Status.Conditions, v1alpha1.ConditionReady)
		require.NotNil(t, ready)
		assert.Equal(t, v1alpha1.ReasonRunnerReapFailed, ready.Reason)
		assert.Contains(t, ready.Message, "Must be an organization owner")
	})
}

func TestRunnerJobsThatNeverStartAreFreedWithTheirReason(t *testing.T) {
	tests := []struct {
		name       string
		pod        *corev1.PodStatus
		event      *corev1.Event
		wantReason string
	}{
		{name: "image cannot be pulled", pod: podPullError, wantReason: "ErrImagePull: pull access denied for no/such-image"},
		{name: "unschedulable", pod: podUnschedulable, wantReason: "Unschedulable: 0/3 nodes are available: 3 Insufficient cpu."},
		{name: "no pod: a quota refused it", event: &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "fc", Namespace: ns},
			InvolvedObject: corev1.ObjectReference{Kind: "Job", Name: "ci-aaaaa", UID: "job-uid-ci-aaaaa"},
			Reason:         "FailedCreate", Type: "Warning", LastTimestamp: metav1.NewTime(t0),
			Message: `Error creating: pods "ci-aaaaa-x" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=0, limited: pods=0`,
		}, wantReason: `FailedCreate: Error creating: pods "ci-aaaaa-x" is forbidden: exceeded quota`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := newGroup("ci", 3)
			e, _, set := lifecycleEnv(t, rg)
			e.addRunner(rg, "ci-aaaaa", 1, 11*time.Minute, tt.pod)
			e.addRunner(rg, "ci-bbbbb", 2, 9*time.Minute, tt.pod)
			if tt.event != nil {
				_, err := e.kube.CoreV1().Events(ns).Create(context.Background(), tt.event, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			e.gitea.snap.Queued = []gitea.Job{queued(1, "ubuntu-latest"), queued(2, "ubuntu-latest")}

			assert.Zero(t, e.pass(set).Created, "the demand of the deleted Job is held for a back-off")

			assert.Equal(t, []string{"ci-bbbbb"}, jobNamesOf(e), "only the Job past the start timeout goes")
			st := e.group("ci").Status
			assert.EqualValues(t, 1, st.StuckRunners)
			assert.EqualValues(t, 1, st.StartingRunners)
			scaling := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionScalingActive)
			require.NotNil(t, scaling)
			assert.Equal(t, metav1.ConditionFalse, scaling.Status)
			assert.Equal(t, v1alpha1.ReasonRunnerStartTimeout, scaling.Reason)
			assert.Contains(t, scaling.Message, tt.wantReason)
			assert.Contains(t, strings.Join(eventReasons(e), "\n"), "Warning RunnerStartTimeout: runner Job ci-aaaaa did not start within 10m0s: "+tt.wantReason)
			assert.Equal(t, "ci-aaaaa", e.claims("ci")[1].JobName, "the back-off claim names the deleted Job")

			assert.Zero(t, e.pass(set).Created, "still backing off")
			later := func(d *Deps, _ *Config) { d.Now = func() time.Time { return t0.Add(6 * time.Minute) } }
			assert.Equal(t, 1, e.pass(set, later).Created, "after the spawn TTL, the job gets a new runner")
		})
	}
}

func TestOrphanRegistrationsAreRemoved(t *testing.T) {
	rg := newGroup("ci", 3)
	e, g, set := lifecycleEnv(t, rg)
	live := e.addRunner(rg, "ci-aaaaa", 1, time.Minute, podRunning)
	other := newGroup("ci", 1, func(o *v1alpha1.RunnerGroup) { o.Namespace, o.UID = "elsewhere", "uid-elsewhere" })
	g.register(runnerjob.RunnerNameOf(live), false)                                                 // its Job exists
	g.register(runnerjob.RunnerName(rg, "ci-gone1"), false)                                         // orphan
	g.register(runnerjob.RunnerName(rg, "ci-gone2"), true)                                          // online: its pod may still run
	g.register(runnerjob.RunnerName(other, "ci-gone3"), false)                                      // another namespace's ci
	g.register("ci-gone4", false)                                                                   // a name without our tag
	g.register(runnerjob.RunnerName(newGroup("ci-gpu", 1), "ci-gpu-gone5"), false)                  // another group
	g.runners = append(g.runners, gitea.Runner{ID: 99, Name: runnerjob.RunnerName(rg, "ci-gone6")}) // not ephemeral

	e.pass(set, func(_ *Deps, c *Config) { c.DryRun = true })
	assert.Len(t, g.names(), 7, "a dry run removes nothing")
	assert.Contains(t, e.out.String(), "would remove runner "+runnerjob.RunnerName(rg, "ci-gone1"))

	e.pass(set)
	assert.NotContains(t, g.names(), runnerjob.RunnerName(rg, "ci-gone1"))
	assert.Len(t, g.names(), 6, "only the orphan goes")
	assert.EqualValues(t, 1, e.group("ci").Status.ReapedRunners)
}

func TestDryRunPrintsWhatWouldBeReaped(t *testing.T) {
	rg := newGroup("ci", 3)
	e, g, set := lifecycleEnv(t, rg)
	idle := e.addRunner(rg, "ci-aaaaa", 1, 20*time.Minute, podRunning)
	g.register(runnerjob.RunnerNameOf(idle), true)
	e.addRunner(rg, "ci-bbbbb", 2, 20*time.Minute, podPullError)

	e.pass(set, func(_ *Deps, c *Config) { c.DryRun = true })

	assert.ElementsMatch(t, []string{"ci-aaaaa", "ci-bbbbb"}, jobNamesOf(e))
	assert.Equal(t, []string{"list", "confirm", "list"}, g.calls, "only reads: the stuck Job is read again, as a real pass would")
	assert.Contains(t, e.out.String(), "would reap idle runner Job ci-aaaaa")
	assert.Contains(t, e.out.String(), "would delete runner Job ci-bbbbb did not start within 10m0s: ErrImagePull")
}

// A racing pass claims a job, registers its runner, then creates the
// runner Job: a pass that lists the registration in between finds no Job.
// The claim, saved before the registration, says the Job is on its way; it
// is an orphan only once the claim no longer holds its slot (the spawn
// TTL), as when the registering pass died before the create.
func TestARegistrationWhoseJobARacingPassIsCreatingIsKept(t *testing.T) {
	for _, tt := range []struct {
		name      string
		claimedAt time.Time
		kept      bool
	}{
		{"claimed just now", t0, true},
		{"claimed longer ago than the spawn TTL", t0.Add(-6 * time.Minute), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rg := newGroup("ci", 3)
			e, g, set := lifecycleEnv(t, rg)
			coming := runnerjob.RunnerName(rg, "ci-next1")
			g.onList = func(n int) {
				if n != 1 {
					return
				}
				e.seedClaims(rg, state.Claims{5: {ClaimedAt: tt.claimedAt, JobName: "ci-next1"}})
				g.mu.Lock()
				g.runners = append(g.runners, gitea.Runner{ID: 77, Name: coming, Ephemeral: true})
				g.mu.Unlock()
			}

			e.pass(set)

			if tt.kept {
				assert.Equal(t, []string{coming}, g.names(), "the registration of a Job being created stays")
				assert.Zero(t, e.group("ci").Status.ReapedRunners)
			} else {
				assert.Empty(t, g.names(), "an orphan whose claim expired goes")
			}
		})
	}
}
