package scaler

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/kubecache"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// stillCache is a loop's Cache whose views are what the test says, however
// the API server moves on: the worst a watch cache can be.
type stillCache struct {
	mu      sync.Mutex
	views   map[string]kubecache.View
	refused map[string]bool
	forgot  []string
	// freshStates, when set, serves the state ConfigMaps as they are now:
	// the caches of one namespace lag apart, the state's behind by
	// nothing, the runner Jobs' by a whole round.
	freshStates *env
}

func (c *stillCache) Namespace(string) (*corev1.Namespace, bool) { return nil, false }
func (c *stillCache) Watch(_ context.Context, n string) (kubecache.View, bool) {
	c.mu.Lock()
	v, ok := c.views[n]
	live := c.freshStates
	c.mu.Unlock()
	if ok && live != nil {
		cms, err := live.kube.Tracker().List(corev1.SchemeGroupVersion.WithResource("configmaps"), corev1.SchemeGroupVersion.WithKind("ConfigMap"), n)
		if err != nil {
			return v, false
		}
		v.States = nil
		for _, cm := range cms.(*corev1.ConfigMapList).Items {
			v.States = append(v.States, cm.DeepCopy())
		}
	}
	return v, ok
}
func (c *stillCache) Forget(n string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgot = append(c.forgot, n)
	c.refused[n] = false
}
func (c *stillCache) Refused(n string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused[n]
}

// The hazard a watch cache brings: another pass created a runner Job for
// Gitea job 7 and, once it listed that Job, dropped its claim from the
// state. The state cache has that write; the Jobs cache has not had the
// Job yet. A plan from the two sees job 7 queued, unclaimed and without a
// runner, and its claim would be written under the current
// resourceVersion: the conditional write cannot catch it. The pass must
// read afresh before it claims.
func TestAPlanFromAStaleJobsCacheCreatesNoSecondRunner(t *testing.T) {
	rg := newGroup("ci", 5)
	now := metav1.NewTime(t0)
	rg.Status.LastCheckTime = &now
	e := newEnv(t, rg)
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}
	e.addJob(rg, "ci-other", 7, t0)
	_, err := state.Store{Client: e.kube}.Save(context.Background(), stateOwner(rg), state.Loaded{}, state.Claims{})
	require.NoError(t, err)
	cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), state.ConfigMapName("ci"), metav1.GetOptions{})
	require.NoError(t, err)
	c := &stillCache{views: map[string]kubecache.View{ns: {States: []*corev1.ConfigMap{cm}}}, refused: map[string]bool{}}

	e.pass(func(d *Deps, _ *Config) { d.Cache = c })

	assert.Equal(t, map[int64]int{7: 1}, e.giteaJobsServed(), "job 7 keeps its one runner")
}

// The other side: a plan from the caches that creates nothing is used as
// it is, with no read of the namespace's runner Jobs.
func TestAPlanFromTheCachesThatCreatesNothingReadsNothingMore(t *testing.T) {
	rg := newGroup("ci", 5)
	e := newEnv(t, rg)
	c := &stillCache{views: map[string]kubecache.View{ns: {}}, refused: map[string]bool{}}
	e.kube.ClearActions()

	e.pass(func(d *Deps, _ *Config) { d.Cache = c })

	for _, a := range e.kube.Actions() {
		assert.NotEqual(t, "list", a.GetVerb(), "%s %s", a.GetVerb(), a.GetResource().Resource)
	}
	assert.Empty(t, e.jobs())
}

// watchingScaler is a scaler of e whose scaler loops with real watch caches over the
// fake clientsets, as the Deployment does; the fake API server lets the
// scaler list and watch namespaces.
func watchingScaler(t testing.TB, e *env, more ...setup) (scaler *Scaler, c *kubecache.Cache) {
	t.Helper()
	e.kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		ar.Status.Allowed = true
		return true, ar, nil
	})
	c = kubecache.New(e.kube, nil)
	t.Cleanup(c.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.True(t, c.WatchNamespaces(ctx))
	groups, err := runnergroups.Watch(runnergroups.Client{Dynamic: e.dyn}, 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(groups.Stop)
	return e.scaler(append([]setup{func(d *Deps, cfg *Config) { d.Cache, d.Groups = c, groups; cfg.RightsRecheck = 10 * time.Minute }}, more...)...), c
}

func TestASteadyLoopPassSendsNoListAndNoReview(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5), newGroup("web", 5), newGroup("ci", 5, inNamespace(otherNS)))
	for _, s := range []*corev1.Secret{secret("api", secretToken), secret("reg", "reg-"+secretToken)} {
		s.Namespace = otherNS
		require.NoError(t, e.kube.Tracker().Add(s))
	}
	// With the lifecycle on, so each namespace's registrations ledger is read.
	rg := &runnersGitea{fakeGitea: e.gitea}
	sc, c := watchingScaler(t, e, func(d *Deps, c *Config) {
		d.Gitea = func(string, string) (gitea.Client, error) { return rg, nil }
		c.RunnerIdleTimeout = time.Minute
	})
	_, err := sc.Pass(context.Background())
	require.NoError(t, err)
	// The watches catch up with the first pass's writes (the states, and
	// the ledgers it created): an object they lack yet is read afresh,
	// rightly.
	require.Eventually(t, func() bool {
		for namespace, want := range map[string][]string{
			ns:      {state.ConfigMapName("ci"), state.ConfigMapName("web"), ledger.ConfigMapName},
			otherNS: {state.ConfigMapName("ci"), ledger.ConfigMapName},
		} {
			v, _ := c.Watch(context.Background(), namespace)
			for _, name := range want {
				if !slices.ContainsFunc(v.States, func(cm *corev1.ConfigMap) bool { return cm.Name == name }) {
					return false
				}
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	e.kube.ClearActions()
	e.dyn.ClearActions()

	for range 3 {
		sum, err := sc.Pass(context.Background())
		require.NoError(t, err)
		require.NoError(t, sum.Err())
	}

	var sent []string
	for _, a := range append(e.kube.Actions(), e.dyn.Actions()...) {
		// A status patch is the record's (its heartbeat, on the test's
		// fast clock), not a read. The registrations ledger comes with
		// the watch of the state ConfigMaps.
		if a.GetVerb() != "patch" {
			sent = append(sent, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	assert.Empty(t, sent, "three steady passes of three groups in two namespaces: no read sent to the API server")
	assert.Equal(t, map[string]int{ns: 1, otherNS: 1}, e.reviews, "each namespace reviewed once, in the first pass")
}

// servedLoop is a loop (a still cache) with the given RightsRecheck whose
// first pass served group ci of ns.
func servedLoop(t *testing.T, recheck time.Duration) (*env, *stillCache, *Scaler) {
	t.Helper()
	e := newEnv(t, newGroup("ci", 5))
	c := &stillCache{views: map[string]kubecache.View{ns: {}}, refused: map[string]bool{}}
	sc := e.scaler(func(d *Deps, cfg *Config) { d.Cache = c; cfg.RightsRecheck = recheck })
	_, err := sc.Pass(context.Background())
	require.NoError(t, err)
	require.Equal(t, v1alpha1.ReasonReconciled, ready(e.group("ci")).Reason)
	return e, c, sc
}

// disable makes the rights review find namespace not enabled.
func (e *env) disable(namespace string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.disabled[namespace] = true
}

func TestALoopSeesANamespaceDisabledWithinTheRecheckAndAtOnceWhenRefused(t *testing.T) {
	for _, how := range []string{"recheck due", "a watch refused"} {
		t.Run(how, func(t *testing.T) {
			e, c, sc := servedLoop(t, 10*time.Minute)
			e.disable(ns)
			_, err := sc.Pass(context.Background())
			require.NoError(t, err)
			assert.Equal(t, 1, e.reviews[ns], "within the recheck the review is not asked again")

			if how == "recheck due" {
				e.ticks.Add(int64(10 * time.Minute / time.Second))
			} else {
				c.mu.Lock()
				c.refused[ns] = true
				c.mu.Unlock()
			}
			_, err = sc.Pass(context.Background())
			require.NoError(t, err)
			assert.Equal(t, 2, e.reviews[ns])
			assert.Equal(t, v1alpha1.ReasonNamespaceNotEnabled, ready(e.group("ci")).Reason)
			assert.Contains(t, c.forgot, ns, "the namespace's watches stop")
		})
	}
}

// With the default RightsRecheck of 0, a loop reviews every namespace
// every pass: a removed RoleBinding is seen by the next pass, as in a
// CronJob, and the namespace's watches stop.
func TestByDefaultALoopSeesANamespaceDisabledAtTheNextPass(t *testing.T) {
	e, c, sc := servedLoop(t, 0)
	e.disable(ns)
	_, err := sc.Pass(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, e.reviews[ns])
	assert.Equal(t, v1alpha1.ReasonNamespaceNotEnabled, ready(e.group("ci")).Reason)
	assert.Contains(t, c.forgot, ns, "the namespace's watches stop")
}

func TestALoopServesANamespaceFromThePassAfterItIsEnabled(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	e.disabled[ns] = true
	c := &stillCache{views: map[string]kubecache.View{ns: {}}, refused: map[string]bool{}}
	sc := e.scaler(func(d *Deps, cfg *Config) { d.Cache = c; cfg.RightsRecheck = 10 * time.Minute })
	for range 2 {
		_, err := sc.Pass(context.Background())
		require.NoError(t, err)
	}
	require.Equal(t, v1alpha1.ReasonNamespaceNotEnabled, ready(e.group("ci")).Reason)
	assert.Equal(t, 2, e.reviews[ns], "a namespace not enabled is reviewed every pass")

	e.mu.Lock()
	delete(e.disabled, ns)
	e.mu.Unlock()
	for range 3 {
		_, err := sc.Pass(context.Background())
		require.NoError(t, err)
	}
	assert.Equal(t, v1alpha1.ReasonReconciled, ready(e.group("ci")).Reason, "served from the pass after")
	assert.Equal(t, 3, e.reviews[ns], "then trusted: one review in three passes")
}

func TestALoopReadsAGroupsSecretsAgainAfterItFailed(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	c := &stillCache{views: map[string]kubecache.View{ns: {}}, refused: map[string]bool{}}
	sc := e.scaler(func(d *Deps, _ *Config) { d.Cache = c })
	gets := func() int {
		n := 0
		for _, a := range e.kube.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "secrets" {
				n++
			}
		}
		return n
	}
	for range 2 {
		_, err := sc.Pass(context.Background())
		require.NoError(t, err)
	}
	require.Equal(t, 2, gets(), "each Secret read once in two passes")

	e.gitea.err = gitea.ErrUnauthorized // the token was rotated
	_, err := sc.Pass(context.Background())
	require.NoError(t, err)
	e.gitea.err = nil
	_, err = sc.Pass(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 4, gets(), "read again in the pass after the failure")
	assert.True(t, slices.Contains([]string{v1alpha1.ReasonReconciled}, ready(e.group("ci")).Reason))
}

// catchUp sets the cache's view of the test's namespace to the cluster as
// it is now.
func (c *stillCache) catchUp(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	jobs, err := e.kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	cms, err := e.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	v := kubecache.View{Jobs: jobs.Items, Pods: pods.Items}
	for i := range cms.Items {
		v.States = append(v.States, &cms.Items[i])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.views[ns] = v
}

// A pass over many new groups writes a state and a status for each; the
// bound leaves the rest to later passes, which take them in turn, while
// the groups served before are served every pass.
func TestNewGroupsBeyondTheBoundWaitForLaterPasses(t *testing.T) {
	old := newGroup("old", 5)
	served := metav1.NewTime(t0)
	old.Status.LastCheckTime = &served
	e := newEnv(t, old, newGroup("n1", 5), newGroup("n2", 5), newGroup("n3", 5), newGroup("n4", 5), newGroup("n5", 5))
	sc := e.scaler(func(_ *Deps, c *Config) { c.NewGroupsPerPass = 2 })
	recorded := func() int {
		n := 0
		for _, name := range []string{"n1", "n2", "n3", "n4", "n5"} {
			if e.group(name).Status.LastCheckTime != nil {
				n++
			}
		}
		return n
	}
	for pass, want := range []struct{ groups, deferred, recorded int }{{3, 3, 2}, {5, 1, 4}, {6, 0, 5}} {
		sum, err := sc.Pass(context.Background())
		require.NoError(t, err)
		assert.Equal(t, want.groups, len(sum.GroupStats), "pass %d: groups served", pass+1)
		assert.Equal(t, want.deferred, sum.Deferred, "pass %d: new groups left to later passes", pass+1)
		assert.Equal(t, want.recorded, recorded(), "pass %d: new groups served so far", pass+1)
		assert.Equal(t, want.deferred > 0, sum.Partial)
	}
}

// TestALoopJudgesARunnerPodAgainOnlyWhenItsGroupOrNamespaceChanged: a
// loop keeps each group's Pod Security verdict while neither the group nor
// its namespace moves (building every runner Job to judge it was over half
// of a steady pass's allocations at 5,000 groups), and judges again at once
// when either does: a namespace whose enforce label drops to baseline
// refuses the privileged runner in the next pass.
func TestALoopJudgesARunnerPodAgainOnlyWhenItsGroupOrNamespaceChanged(t *testing.T) {
	ctx := context.Background()
	rg := newGroup("ci", 5)
	rg.Generation = 1
	e := newEnv(t, rg)
	sc, c := watchingScaler(t, e)
	label := func(level, version string) { t.Helper(); relabelSeen(t, e, c, level, version) }
	pass := func() string {
		t.Helper()
		_, err := sc.Pass(ctx)
		require.NoError(t, err)
		return ready(e.group("ci")).Reason
	}
	judged := func(pod, spec int, msg string) {
		t.Helper()
		assert.Equal(t, pod, sc.mem.verdicts.judged[podVerdict], "runner pod verdicts: %s", msg)
		assert.Equal(t, spec, sc.mem.verdicts.judged[specVerdict], "spec verdicts: %s", msg)
	}
	label(tenancy.LevelPrivileged, "100")

	require.Equal(t, v1alpha1.ReasonReconciled, pass())
	judged(1, 1, "the first pass")
	for range 3 {
		require.Equal(t, v1alpha1.ReasonReconciled, pass())
	}
	judged(1, 1, "steady passes judge nothing again")

	label("baseline", "101")
	assert.Equal(t, v1alpha1.ReasonPodSecurityForbidsRunner, pass(), "the namespace moved: judged again at once")
	judged(2, 1, "the namespace moved")
	assert.Equal(t, v1alpha1.ReasonPodSecurityForbidsRunner, pass())
	judged(2, 1, "nothing moved")

	label(tenancy.LevelPrivileged, "102")
	assert.Equal(t, v1alpha1.ReasonReconciled, pass())
	judged(3, 1, "the namespace moved back")

	// A spec the scaler refuses: both verdicts are judged again at the
	// next pass, and kept while the spec stays.
	e.editGroupSpec("ci", func(rg *v1alpha1.RunnerGroup) {
		rg.Spec.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{ServiceAccountName: "deployer"}}
	})
	require.Eventually(t, func() bool {
		list, _, err := sc.groups.List(ctx, ns, "")
		return err == nil && len(list) == 1 && list[0].Generation == 2
	}, 10*time.Second, 10*time.Millisecond, "the loop's cache sees generation 2")
	assert.Equal(t, v1alpha1.ReasonInvalidTemplate, pass(), "the new spec is judged at once")
	judged(3, 2, "the spec moved")
	assert.Equal(t, v1alpha1.ReasonInvalidTemplate, pass())
	judged(3, 2, "nothing moved")
}

// relabelSeen sets the namespace's enforce label at resourceVersion rv and
// waits until the loop's cache c sees that version.
func relabelSeen(t *testing.T, e *env, c *kubecache.Cache, level, rv string) {
	t.Helper()
	ctx := context.Background()
	nsObj, err := e.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err)
	nsObj.Labels = map[string]string{tenancy.LabelEnforce: level}
	nsObj.ResourceVersion = rv
	_, err = e.kube.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, ok := c.Namespace(ns)
		return ok && got.ResourceVersion == rv
	}, 10*time.Second, 10*time.Millisecond, "the loop's cache sees namespace version %s", rv)
}
