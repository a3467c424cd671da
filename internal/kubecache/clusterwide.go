package kubecache

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// The cluster-wide reads (the chart's scaler.clusterWideReads): where the
// platform team grants the scaler list and watch on Jobs, pods and
// ConfigMaps in every namespace, a loop keeps one watch cache per kind for
// the whole cluster, indexed by namespace, instead of three per enabled
// namespace: three watches however many namespaces it serves (the
// registrations ledgers carry the RunnerGroup label, so the ConfigMaps'
// watch holds them too). The grant widens what the scaler may read,
// not what it serves: a pass still takes a namespace's view only once its
// rights review found the namespace enabled, and writes, Secrets and
// Events still need the namespace's own binding.

// Reads are the kinds the cluster-wide reads need, each with list and
// watch in every namespace (a single pass only lists, and asks nothing
// first: its list's answer tells).
var Reads = []struct{ Group, Resource string }{
	{"batch", "jobs"}, {"", "pods"}, {"", "configmaps"},
}

// mayReadClusterWide says whether the caller may list and watch every
// kind of Reads in every namespace; nil when it may.
func mayReadClusterWide(ctx context.Context, kube kubernetes.Interface) error {
	for _, r := range Reads {
		if err := MayWatch(ctx, kube, r.Group, r.Resource); err != nil {
			return err
		}
	}
	return nil
}

// clusterWide is the cluster-wide caches: the runner Jobs, runner pods and
// state ConfigMaps (with the registrations ledgers) of every namespace, by
// the RunnerGroup label, each indexed by namespace.
type clusterWide struct {
	stop               context.CancelFunc
	jobs, pods, states *reflected
	refused            atomic.Bool
}

// WatchClusterWide starts the cluster-wide caches, when the scaler may
// list and watch Jobs, pods and ConfigMaps in every namespace, and waits
// within ctx for their first lists. From then on Watch serves each
// namespace from them and starts no watch of its own.
// On an error (not allowed, or not synced in time) nothing is kept, and
// each namespace gets watches of its own as before.
func (c *Cache) WatchClusterWide(ctx context.Context) error {
	if err := mayReadClusterWide(ctx, c.kube); err != nil {
		return err
	}
	wctx, stop := context.WithCancel(context.Background())
	w := &clusterWide{stop: stop}
	// A refused list or watch means the cluster-wide grant went: the
	// caches would only get older, so the loop goes back to watches per
	// namespace (Watch), whose own rights review still holds.
	refused := func(err error) {
		if apierrors.IsForbidden(err) && !w.refused.Swap(true) {
			c.log.Warn("the API server refused a cluster-wide watch; watching each namespace on its own from now on", "error", err)
		}
	}
	byNamespace := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	batch, core := c.kube.BatchV1(), c.kube.CoreV1()
	w.jobs = startReflector(wctx, &batchv1.Job{}, refused, ofAnyGroup(batch.Jobs("").List, batch.Jobs("").Watch), byNamespace)
	w.pods = startReflector(wctx, &corev1.Pod{}, refused, ofAnyGroup(core.Pods("").List, core.Pods("").Watch), byNamespace)
	w.states = startReflector(wctx, &corev1.ConfigMap{}, refused, ofAnyGroup(core.ConfigMaps("").List, core.ConfigMaps("").Watch), byNamespace)
	// Synced, or refused: a refusal is not waited out.
	done := func() bool {
		return w.refused.Load() || w.jobs.synced.Load() && w.pods.synced.Load() && w.states.synced.Load()
	}
	if !cache.WaitForCacheSync(ctx.Done(), done) || w.refused.Load() {
		w.stop()
		if w.refused.Load() {
			return errors.New("the API server refused a cluster-wide list")
		}
		return fmt.Errorf("the cluster-wide lists did not finish: %w", ctx.Err())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.stop:
		w.stop()
		return errors.New("the cache was stopped")
	default:
	}
	c.wide = w
	return nil
}

// clusterWide is the cluster-wide caches while they may be used; nil
// when there are none or the API server refused them (they are then
// stopped).
func (c *Cache) clusterWide() *clusterWide {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wide != nil && c.wide.refused.Load() {
		c.wide.stop()
		c.wide = nil
	}
	return c.wide
}

// view copies namespace's objects from the cluster-wide caches.
func (w *clusterWide) view(namespace string) View {
	var v View
	for _, o := range byNamespace(w.jobs, namespace) {
		v.Jobs = append(v.Jobs, *o.(*batchv1.Job).DeepCopy())
	}
	for _, o := range byNamespace(w.pods, namespace) {
		v.Pods = append(v.Pods, *o.(*corev1.Pod).DeepCopy())
	}
	for _, o := range byNamespace(w.states, namespace) {
		v.States = append(v.States, o.(*corev1.ConfigMap).DeepCopy())
	}
	return v
}

// byNamespace are r's objects in namespace.
func byNamespace(r *reflected, namespace string) []any {
	objs, _ := r.store.ByIndex(cache.NamespaceIndex, namespace)
	return objs
}
