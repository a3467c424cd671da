// Package kubecache keeps, for a looping scaler (the chart's Deployment),
// what each pass reads in the namespaces it serves in client-go watch
// caches: every runner Job, runner pod and state ConfigMap (all carry the
// RunnerGroup label), per enabled namespace (the pods only while the
// namespace has runner Jobs: the pods only tell about those), and the
// Namespace objects
// cluster-wide where the scaler may watch them. A steady pass then reads
// them from memory and sends no list request.
//
// A cache may be behind the API server by the time a watch event takes.
// The scaler therefore answers from a cache only what stale data cannot
// make wrong: a pass that would create a runner, or distrusts a state,
// reads the API server afresh before it writes (scaler.claim), and every
// write is conditional as before.
//
// A single pass (the CronJob) starts no cache: the watches would cost more
// than the one list of each kind it reads.
package kubecache

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// Cache holds the watch caches of the namespaces a loop serves. Make one
// with New and Stop it when the loop ends. Its methods are safe for
// concurrent use.
type Cache struct {
	kube kubernetes.Interface
	log  *slog.Logger

	mu    sync.Mutex
	ns    map[string]*watched
	names cache.SharedIndexInformer // the Namespace objects; nil when not watched
	// wide are the cluster-wide caches (WatchClusterWide); nil when not
	// in use.
	wide *clusterWide
	stop chan struct{}
}

// watched is one namespace's watch caches: a bare client-go Reflector
// per kind, each feeding a plain store. An informer per kind (as
// informers.SharedInformerFactory makes) would add a DeltaFIFO, a
// processor and their goroutines for event handlers the scaler does not
// have: at 500 namespaces, 1,500 of each, 4,500 goroutines and their
// stacks fewer.
//
// The pods are watched only while the namespace has runner Jobs: in a
// large install most namespaces have none most of the time, and a watch
// each is a third of the loop's memory. pods and stopPodsWatch are nil
// meanwhile; both are set and cleared under Cache.mu.
type watched struct {
	stop          context.CancelFunc
	jobs, states  *reflected
	pods          *reflected
	stopPodsWatch context.CancelFunc
	refused       atomic.Bool
	startPods     func() *reflected
}

// close stops every watch of the namespace.
func (w *watched) close() {
	w.stopPods()
	w.stop()
}

// stopPods stops the pods' watch, if it runs.
func (w *watched) stopPods() {
	if w.stopPodsWatch != nil {
		w.stopPodsWatch()
		w.pods, w.stopPodsWatch = nil, nil
	}
}

// View is one namespace as its watch caches held it when asked: copies,
// which the caller may change.
type View struct {
	Jobs   []batchv1.Job
	Pods   []corev1.Pod
	States []*corev1.ConfigMap
}

// New returns an empty Cache; log hears of watches refused.
func New(kube kubernetes.Interface, log *slog.Logger) *Cache {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Cache{kube: kube, log: log, ns: map[string]*watched{}, stop: make(chan struct{})}
}

// Stop ends every watch.
func (c *Cache) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, w := range c.ns {
		w.close()
		delete(c.ns, name)
	}
	if c.wide != nil {
		c.wide.stop()
		c.wide = nil
	}
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
}

// WatchNamespaces starts the cluster-wide cache of Namespace objects
// (their Pod Security labels and grants), when the scaler may list and
// watch namespaces, and waits for it within ctx. It reports whether the
// cache is in use; without it each pass gets each namespace it serves.
func (c *Cache) WatchNamespaces(ctx context.Context) bool {
	if err := MayWatch(ctx, c.kube, "", "namespaces"); err != nil {
		c.log.Info("not watching namespaces; each pass reads those it serves", "error", err)
		return false
	}
	f := informers.NewSharedInformerFactory(c.kube, 0)
	inf := f.Core().V1().Namespaces().Informer()
	_ = inf.SetTransform(dropManagedFields)
	f.Start(c.stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		f.Shutdown()
		return false
	}
	c.mu.Lock()
	c.names = inf
	c.mu.Unlock()
	return true
}

// MayWatch says, with a SelfSubjectAccessReview per verb, whether the
// caller may list and watch resource in every namespace; nil when it may.
// It is asked once, when a loop starts, so a watch that would only be
// refused again and again is not started.
func MayWatch(ctx context.Context, kube kubernetes.Interface, group, resource string) error {
	for _, verb := range []string{"list", "watch"} {
		ar, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Group: group, Resource: resource, Verb: verb}},
		}, metav1.CreateOptions{})
		switch {
		case err != nil:
			return fmt.Errorf("cannot review the right to %s %s: %w", verb, resource, err)
		case !ar.Status.Allowed:
			return fmt.Errorf("the scaler may not %s %s in all namespaces", verb, resource)
		}
	}
	return nil
}

// Namespace is the cached Namespace object of name; ok is false when
// namespaces are not watched or the cache has none of that name (the
// caller then gets it from the API server).
func (c *Cache) Namespace(name string) (*corev1.Namespace, bool) {
	c.mu.Lock()
	inf := c.names
	c.mu.Unlock()
	if inf == nil {
		return nil, false
	}
	obj, ok, err := inf.GetStore().GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	return obj.(*corev1.Namespace).DeepCopy(), true
}

// Watch returns namespace's view, first starting its watch caches and
// waiting for them within ctx. ok is false until they hold a full list:
// the pass reads the API server meanwhile. With the cluster-wide caches
// (WatchClusterWide) the view is taken from them and no watch is started.
//
// The view's pods are taken after its Jobs, as a pass's lists are read:
// when the Jobs it took are none, no pod is wanted and the pods' watch
// stops; when there are some, the pods' watch starts if it was stopped,
// and the view waits for its first list.
func (c *Cache) Watch(ctx context.Context, namespace string) (View, bool) {
	if wide := c.clusterWide(); wide != nil {
		return wide.view(namespace), true
	}
	c.mu.Lock()
	w, started := c.ns[namespace]
	if !started {
		w = c.start(namespace)
		c.ns[namespace] = w
	}
	c.mu.Unlock()
	if !cache.WaitForCacheSync(ctx.Done(), w.jobs.synced.Load, w.states.synced.Load) {
		return View{}, false
	}
	var v View
	for _, o := range w.states.store.List() {
		v.States = append(v.States, o.(*corev1.ConfigMap).DeepCopy())
	}
	for _, o := range w.jobs.store.List() {
		v.Jobs = append(v.Jobs, *o.(*batchv1.Job).DeepCopy())
	}
	c.mu.Lock()
	if c.ns[namespace] != w {
		c.mu.Unlock()
		return View{}, false // forgotten meanwhile
	}
	if len(v.Jobs) == 0 {
		w.stopPods()
		c.mu.Unlock()
		return v, true
	}
	if w.pods == nil {
		w.pods = w.startPods()
	}
	pods := w.pods
	c.mu.Unlock()
	if !cache.WaitForCacheSync(ctx.Done(), pods.synced.Load) {
		return View{}, false
	}
	for _, o := range pods.store.List() {
		v.Pods = append(v.Pods, *o.(*corev1.Pod).DeepCopy())
	}
	return v, true
}

// Forget stops namespace's watch caches: it is no longer enabled, or its
// RunnerGroups are gone. A later Watch starts them again.
func (c *Cache) Forget(namespace string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.ns[namespace]; ok {
		w.close()
		delete(c.ns, namespace)
	}
}

// Watching lists the namespaces whose caches run.
func (c *Cache) Watching() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.ns))
	for n := range c.ns {
		out = append(out, n)
	}
	return out
}

// Refused reports whether the API server refused a list or watch in
// namespace since its caches started: the scaler's rights there changed,
// and the caller reviews them again.
func (c *Cache) Refused(namespace string) bool {
	c.mu.Lock()
	w, ok := c.ns[namespace]
	c.mu.Unlock()
	return ok && w.refused.Load()
}

// start makes and starts namespace's reflectors; c.mu is held.
func (c *Cache) start(namespace string) *watched {
	ctx, stop := context.WithCancel(context.Background())
	w := &watched{stop: stop}
	// A list or watch the API server refuses means the scaler's rights in
	// the namespace changed: the caller reviews them again. The reflector
	// itself retries with a back-off.
	refused := func(err error) {
		if apierrors.IsForbidden(err) && !w.refused.Swap(true) {
			c.log.Warn("the API server refused a watch; reviewing the scaler's rights in the namespace again", "namespace", namespace, "error", err)
		}
	}
	batch, core := c.kube.BatchV1(), c.kube.CoreV1()
	w.jobs = startReflector(ctx, &batchv1.Job{}, refused, ofAnyGroup(batch.Jobs(namespace).List, batch.Jobs(namespace).Watch), nil)
	w.startPods = func() *reflected {
		var podsCtx context.Context
		podsCtx, w.stopPodsWatch = context.WithCancel(ctx)
		return startReflector(podsCtx, &corev1.Pod{}, refused, ofAnyGroup(core.Pods(namespace).List, core.Pods(namespace).Watch), nil)
	}
	w.states = startReflector(ctx, &corev1.ConfigMap{}, refused, ofAnyGroup(core.ConfigMaps(namespace).List, core.ConfigMaps(namespace).Watch), nil)
	return w
}

// reflected is one kind's cache: the store a Reflector keeps, which says
// when it has held a full list.
type reflected struct {
	store  cache.Indexer
	synced atomic.Bool
}

// startReflector starts a Reflector of lw's objects into a new store with
// indexers until ctx is cancelled, telling refused of every list or watch
// that failed. ctx is a plain cancellable context, never one made from a
// stop channel: each context the Reflector derives for its lists and
// watches would then need a goroutine of its own to hear of the stop (at
// 500 namespaces, thousands of goroutines and their stacks).
func startReflector(ctx context.Context, expected runtime.Object, refused func(error), lw *cache.ListWatch, indexers cache.Indexers) *reflected {
	r := &reflected{store: cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers)}
	list, watchFn := lw.ListWithContextFunc, lw.WatchFuncWithContext
	lw.ListWithContextFunc = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		obj, err := list(ctx, o)
		if err != nil {
			refused(err)
		}
		return obj, err
	}
	lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		w, err := watchFn(ctx, o)
		if err != nil {
			refused(err)
		}
		return w, err
	}
	go cache.NewReflectorWithOptions(lw, expected, (*trimmingStore)(r), cache.ReflectorOptions{}).RunWithContext(ctx)
	return r
}

// trimmingStore is the store a Reflector writes to: each object trimmed
// (trim) on its way in, and a full list marks the cache synced.
type trimmingStore reflected

func (t *trimmingStore) Add(obj any) error    { return t.store.Add(trim(obj)) }
func (t *trimmingStore) Update(obj any) error { return t.store.Update(trim(obj)) }
func (t *trimmingStore) Delete(obj any) error { return t.store.Delete(obj) }
func (t *trimmingStore) Resync() error        { return nil }
func (t *trimmingStore) Replace(list []any, rv string) error {
	for i := range list {
		list[i] = trim(list[i])
	}
	err := t.store.Replace(list, rv)
	if err == nil {
		t.synced.Store(true)
	}
	return err
}

// trim drops what a pass never reads from a cached object.
func trim(obj any) any {
	o, _ := dropManagedFields(obj)
	return o
}

// dropManagedFields keeps the caches small: the scaler never reads them.
func dropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// SyncTimeout bounds the wait for a namespace's first lists in a pass.
const SyncTimeout = 20 * time.Second

// ofAnyGroup lists and watches one kind's objects that belong to a
// RunnerGroup (they carry its name label): a namespace's other Jobs, pods
// and ConfigMaps are none of a pass's business, nor of its memory.
func ofAnyGroup[L runtime.Object](
	list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
) *cache.ListWatch {
	anyGroup := func(o metav1.ListOptions) metav1.ListOptions {
		o.LabelSelector = v1alpha1.LabelRunnerGroupName
		return o
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := list(ctx, anyGroup(o))
			if err != nil {
				return nil, err // not a typed nil in a non-nil interface
			}
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return watchFn(ctx, anyGroup(o))
		},
	}
}
