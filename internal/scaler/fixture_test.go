package scaler

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

const (
	ns = "runners"
	// secretToken is distinctive so tests can prove it never leaks.
	secretToken = "s3cr3t-t0ken-value-xyz"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// fakeGitea serves a fixed snapshot per target; it is the scaler-level
// stand-in for Gitea (the HTTP-level fake in internal/gitea/giteatest is
// checked against recordings of a real Gitea).
type fakeGitea struct {
	mu    sync.Mutex
	snap  gitea.Snapshot
	err   error
	calls int
	seen  []scope.Place
	// barrier, when set, runs before answering, outside the lock: a pass
	// asks Gitea after it read the state and before it writes it.
	barrier func()
	// regToken is what minting a registration token answers (regErr
	// fails it); mints counts the requests.
	regToken string
	regErr   error
	mints    int
}

func (f *fakeGitea) RegistrationToken(_ context.Context, t scope.Place) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mints++
	f.seen = append(f.seen, t)
	if f.regErr != nil {
		return "", f.regErr
	}
	return f.regToken, nil
}

func (f *fakeGitea) Snapshot(_ context.Context, t scope.Place) (gitea.Snapshot, error) {
	if f.barrier != nil {
		f.barrier()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.seen = append(f.seen, t)
	if f.err != nil {
		return gitea.Snapshot{}, f.err
	}
	return f.snap, nil
}

func queued(id int64, labels ...string) gitea.Job {
	return gitea.Job{ID: id, Labels: labels}
}

func newGroup(name string, max int32, mutate ...func(*v1alpha1.RunnerGroup)) *v1alpha1.RunnerGroup {
	rg := &v1alpha1.RunnerGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Generation: 3},
		Spec: v1alpha1.RunnerGroupSpec{
			Scope: v1alpha1.ScopeOrg, Org: "acme",
			Gitea:             v1alpha1.GiteaSpec{URL: "https://gitea.example.com"},
			MaxActiveRunners:  max,
			RegistrationToken: &v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "reg", Key: "token"}},
			AuthToken:         v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "api", Key: "token"}},
		},
	}
	for _, m := range mutate {
		m(rg)
	}
	return rg
}

type env struct {
	t      testing.TB
	kube   *fake.Clientset
	dyn    *dynamicfake.FakeDynamicClient
	gitea  *fakeGitea
	logs   *lockedBuffer
	out    *lockedBuffer
	mu     sync.Mutex
	tokens []string
	cms    *optimisticConfigMaps
	names  atomic.Int64
	ticks  atomic.Int64
	// disabled are the namespaces where the scaler lacks the tenant
	// rights; reviews counts the rules reviews asked per namespace. Both
	// under mu.
	disabled map[string]bool
	reviews  map[string]int
}

// now is a clock that moves one second per reading, so successive passes
// (and the steps inside one) happen at distinct, ordered times.
func (e *env) now() time.Time { return t0.Add(time.Duration(e.ticks.Add(1)) * time.Second) }

func newEnv(t testing.TB, groups ...*v1alpha1.RunnerGroup) *env {
	t.Helper()
	e := &env{t: t, gitea: &fakeGitea{}, logs: &lockedBuffer{}, out: &lockedBuffer{}, reviews: map[string]int{}}
	runnerToken := map[string]string{tenancy.SecretLabel: "true"}
	e.kube = fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{tenancy.LabelEnforce: tenancy.LevelPrivileged}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns, Labels: runnerToken, Annotations: tokenKeys("api")}, Data: map[string][]byte{"token": []byte(secretToken)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "reg", Namespace: ns, Labels: runnerToken, Annotations: tokenKeys("reg")}, Data: map[string][]byte{"token": []byte("reg-" + secretToken)}},
	)
	e.disabled = map[string]bool{}
	// The API server answers a rules review with what RBAC grants: the
	// tenant rules in an enabled namespace (every one but those a test
	// disables), nothing elsewhere.
	e.kube.PrependReactor("create", "selfsubjectrulesreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		rr := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectRulesReview).DeepCopy()
		e.mu.Lock()
		defer e.mu.Unlock()
		e.reviews[rr.Spec.Namespace]++
		if !e.disabled[rr.Spec.Namespace] {
			for _, r := range append(tenancy.Rights, tenancy.WatchRights...) {
				rr.Status.ResourceRules = append(rr.Status.ResourceRules, authorizationv1.ResourceRule{
					APIGroups: []string{r.Group}, Resources: []string{r.Resource}, Verbs: []string{r.Verb}})
			}
		}
		return true, rr, nil
	})
	e.cms = newOptimisticConfigMaps(e.kube)
	// The fake tracker does not implement generateName; the API server does.
	var evs atomic.Int64
	e.kube.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ev := a.(k8stesting.CreateAction).GetObject().(*corev1.Event)
		if ev.Name == "" {
			ev.Name = ev.GenerateName + strconv.FormatInt(evs.Add(1), 10)
		}
		return false, nil, nil
	})
	// Every group's namespace admits privileged runner pods.
	for _, rg := range groups {
		if rg.Namespace != ns {
			_ = e.kube.Tracker().Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rg.Namespace, Labels: map[string]string{tenancy.LabelEnforce: tenancy.LevelPrivileged}}})
		}
	}
	var objs []runtime.Object
	for _, rg := range groups {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rg) // newGroup sets apiVersion and kind
		require.NoError(t, err)
		objs = append(objs, &unstructured.Unstructured{Object: obj})
	}
	e.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource: "RunnerGroupList"}, objs...)
	return e
}

// tokenKeys are the annotations by which the owner of a token Secret of
// these tests declares its key "token" (tenancy.TokenKeyRefusal): a
// registration token in Secrets whose name starts with "reg", an API
// token that may mint in the others.
func tokenKeys(secret string) map[string]string {
	if strings.HasPrefix(secret, "reg") {
		return map[string]string{tenancy.AnnotationRegistrationKeys: "token"}
	}
	return map[string]string{tenancy.AnnotationAPIKeys: "token", tenancy.AnnotationMintKeys: "token"}
}

// setup changes what a test's scaler is built from.
type setup func(*Deps, *Config)

func (e *env) scaler(setups ...setup) *Scaler {
	e.t.Helper()
	deps, cfg := e.inputs()
	for _, set := range setups {
		set(&deps, &cfg)
	}
	sc, err := New(deps, cfg)
	require.NoError(e.t, err)
	return sc
}

// frozenGroups is the fixture's GroupClient: it hands out the objects it
// lists as a loop's watch cache does (ListShared), and fails the test when
// they changed by its end. A pass must never change a listed group: in a
// loop they are the cache's own.
type frozenGroups struct {
	runnergroups.Client
	mu     sync.Mutex
	handed []frozenGroup
}

type frozenGroup struct{ obj, was *v1alpha1.RunnerGroup }

func (e *env) frozenGroups() *frozenGroups {
	f := &frozenGroups{Client: runnergroups.Client{Dynamic: e.dyn}}
	e.t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, h := range f.handed {
			assert.Equal(e.t, h.was, h.obj, "a pass changed RunnerGroup %s/%s, which it listed: a loop's cache holds it", h.was.Namespace, h.was.Name)
		}
	})
	return f
}

func (f *frozenGroups) ListShared(ctx context.Context, namespace, selector string) ([]*v1alpha1.RunnerGroup, []runnergroups.Broken, error) {
	groups, broken, err := f.List(ctx, namespace, selector)
	out := make([]*v1alpha1.RunnerGroup, len(groups))
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range groups {
		out[i] = &groups[i]
		f.handed = append(f.handed, frozenGroup{obj: &groups[i], was: groups[i].DeepCopy()})
	}
	return out, broken, err
}

// inputs are what the test's scalers are built from, before any setup.
func (e *env) inputs() (Deps, Config) {
	deps := Deps{
		Kube: e.kube, Groups: e.frozenGroups(),
		Gitea: func(url, token string) (gitea.Client, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.tokens = append(e.tokens, token)
			return e.gitea, nil
		},
		Log: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Out: e.out,
		Now: e.now,
		NewJobName: func(group string) string {
			return fmt.Sprintf("%s-n%04d", group, e.names.Add(1))
		},
	}
	cfg := Config{
		SpawnTTL: 5 * time.Minute, Workers: 2,
		Runner: runnerjob.Options{Image: runnerjob.DefaultImage, DefaultLabels: []string{"ubuntu-latest:docker://x"}, TTLSecondsAfterFinished: 600, SelfRegistration: true},
	}
	return deps, cfg
}

func (e *env) pass(setups ...setup) passreport.Summary {
	e.t.Helper()
	sum, err := e.scaler(setups...).Pass(context.Background())
	require.NoError(e.t, err)
	return sum
}

func (e *env) jobs() []batchv1.Job {
	e.t.Helper()
	l, err := e.kube.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(e.t, err)
	return l.Items
}

// giteaJobsServed maps Gitea job IDs to how many runner Jobs serve them.
func (e *env) giteaJobsServed() map[int64]int {
	out := map[int64]int{}
	for _, j := range e.jobs() {
		id, err := strconv.ParseInt(j.Labels[v1alpha1.LabelGiteaJobID], 10, 64)
		require.NoError(e.t, err)
		out[id]++
	}
	return out
}

func (e *env) group(name string) *v1alpha1.RunnerGroup {
	e.t.Helper()
	u, err := e.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(e.t, err)
	var rg v1alpha1.RunnerGroup
	require.NoError(e.t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rg))
	return &rg
}

// editGroupSpec changes a group of ns as a user's update would: its spec
// through edit, and a new generation.
func (e *env) editGroupSpec(name string, edit func(*v1alpha1.RunnerGroup)) {
	e.t.Helper()
	rg := e.group(name)
	edit(rg)
	rg.Generation++
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rg)
	require.NoError(e.t, err)
	_, err = e.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Update(context.Background(), &unstructured.Unstructured{Object: u}, metav1.UpdateOptions{})
	require.NoError(e.t, err)
}

func (e *env) claims(group string) state.Claims {
	e.t.Helper()
	cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), state.ConfigMapName(group), metav1.GetOptions{})
	require.NoError(e.t, err)
	s, err := state.Decode(cm.Data)
	require.NoError(e.t, err)
	return s
}

// seedClaims stores claims in rg's state, as a racing pass would have.
func (e *env) seedClaims(rg *v1alpha1.RunnerGroup, c state.Claims) {
	e.t.Helper()
	st := state.Store{Client: e.kube}
	l, err := st.Load(context.Background(), stateOwner(rg))
	require.NoError(e.t, err)
	_, err = st.Save(context.Background(), stateOwner(rg), l, c)
	require.NoError(e.t, err)
}

// seedAtWork stores sightings of runners at work in rg's state, as an
// earlier pass would have.
func (e *env) seedAtWork(rg *v1alpha1.RunnerGroup, w state.AtWork) {
	e.t.Helper()
	st := state.Store{Client: e.kube}
	l, err := st.Load(context.Background(), stateOwner(rg))
	require.NoError(e.t, err)
	_, err = st.SaveAtWork(context.Background(), stateOwner(rg), l, w)
	require.NoError(e.t, err)
}

func (e *env) events() []corev1.Event {
	e.t.Helper()
	l, err := e.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(e.t, err)
	return l.Items
}

func (e *env) addJob(group *v1alpha1.RunnerGroup, name string, giteaJob int64, created time.Time, conds ...batchv1.JobConditionType) {
	e.t.Helper()
	j, err := runnerjob.Build(group, name, giteaJob, runnerjob.DefaultOptions())
	require.NoError(e.t, err)
	j.CreationTimestamp = metav1.NewTime(created)
	for _, c := range conds {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue})
	}
	_, err = e.kube.BatchV1().Jobs(group.Namespace).Create(context.Background(), j, metav1.CreateOptions{})
	require.NoError(e.t, err)
}

// optimisticConfigMaps gives the fake clientset the API server's optimistic
// concurrency for ConfigMaps: a create of an existing name fails with
// AlreadyExists and an update with a stale resourceVersion with Conflict.
// beforeUpdate, when set, runs before an update is judged, so a test can
// slip another pass's write in between a read and a write.
type optimisticConfigMaps struct {
	mu           sync.Mutex
	rv           int
	beforeUpdate func(cm *corev1.ConfigMap)
}

func newOptimisticConfigMaps(c *fake.Clientset) *optimisticConfigMaps {
	o := &optimisticConfigMaps{}
	tracker := c.Tracker()
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	c.PrependReactor("get", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := tracker.Get(gvr, a.GetNamespace(), a.(k8stesting.GetAction).GetName())
		return true, obj, err
	})
	c.PrependReactor("create", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		cm := a.(k8stesting.CreateAction).GetObject().(*corev1.ConfigMap).DeepCopy()
		o.rv++
		cm.ResourceVersion = strconv.Itoa(o.rv)
		if err := tracker.Create(gvr, cm, cm.Namespace); err != nil {
			return true, nil, err
		}
		return true, cm, nil
	})
	c.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		cm := a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap).DeepCopy()
		if hook := o.beforeUpdate; hook != nil {
			o.beforeUpdate = nil
			hook(cm)
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		cur, err := tracker.Get(gvr, cm.Namespace, cm.Name)
		if err != nil {
			return true, nil, err
		}
		if cur.(*corev1.ConfigMap).ResourceVersion != cm.ResourceVersion {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), cm.Name, fmt.Errorf("resourceVersion %s is stale", cm.ResourceVersion))
		}
		o.rv++
		cm.ResourceVersion = strconv.Itoa(o.rv)
		return true, cm, tracker.Update(gvr, cm, cm.Namespace)
	})
	return o
}

// write stores a ConfigMap as another pass would, bumping its version.
func (o *optimisticConfigMaps) write(t *testing.T, c *fake.Clientset, cm *corev1.ConfigMap) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rv++
	cm.ResourceVersion = strconv.Itoa(o.rv)
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	if _, err := c.Tracker().Get(gvr, cm.Namespace, cm.Name); apierrors.IsNotFound(err) {
		require.NoError(t, c.Tracker().Create(gvr, cm, cm.Namespace))
		return
	}
	require.NoError(t, c.Tracker().Update(gvr, cm, cm.Namespace))
}

// lockedBuffer is a bytes.Buffer that racing passes can log into.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// pointers points at each of groups.
func pointers(groups []v1alpha1.RunnerGroup) []*v1alpha1.RunnerGroup {
	out := make([]*v1alpha1.RunnerGroup, len(groups))
	for i := range groups {
		out[i] = &groups[i]
	}
	return out
}

// labelNamespace sets the test namespace's labels (nil for none).
func (e *env) labelNamespace(labels map[string]string) {
	e.t.Helper()
	nsObj, err := e.kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	require.NoError(e.t, err)
	nsObj.Labels = labels
	_, err = e.kube.CoreV1().Namespaces().Update(context.Background(), nsObj, metav1.UpdateOptions{})
	require.NoError(e.t, err)
}
