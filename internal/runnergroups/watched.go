package runnergroups

import (
	"context"
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// Watched lists RunnerGroups from a cluster-wide watch cache, for a
// looping scaler: a steady pass then sends no list request for them. Each
// object is converted once, when it changes, not on every pass. Status
// patches go to the API server, as with Client; so does a List before the
// cache is synced.
type Watched struct {
	Client
	informer cache.SharedIndexInformer
	stop     chan struct{}
}

// broken is what the cache holds for an object that could not be
// converted, so List reports it as Client.List would.
type broken struct {
	*unstructured.Unstructured
	err error
}

// Watch starts the cache of every RunnerGroup in the cluster and waits
// for its first list within timeout; Stop ends it. It fails when the list
// does not come (the scaler may not list or watch RunnerGroups
// cluster-wide): the caller then uses Client.
func Watch(c Client, timeout time.Duration) (*Watched, error) {
	var inf cache.SharedIndexInformer
	if c.REST != nil {
		inf = cache.NewSharedIndexInformer(typedListWatch(c), &unstructured.Unstructured{}, 0, cache.Indexers{})
	} else {
		inf = dynamicinformer.NewFilteredDynamicInformer(c.Dynamic, v1alpha1.GroupVersionResource, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	}
	_ = inf.SetTransform(toGroup)
	w := &Watched{Client: c, informer: inf, stop: make(chan struct{})}
	go inf.Run(w.stop)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		w.Stop()
		return nil, fmt.Errorf("cannot watch RunnerGroups in all namespaces within %s", timeout)
	}
	return w, nil
}

// Stop ends the watch.
func (w *Watched) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
}

// typedListWatch lists through c.REST into the types (see listPages),
// so the cache's first list never holds every RunnerGroup of the cluster
// as nested maps at once, and watches through the dynamic client, whose
// events come one object at a time and toGroup converts. An item the
// types cannot hold is listed as it came, and toGroup marks it broken.
func typedListWatch(c Client) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list := &mixedList{}
			rv, err := c.eachListed(ctx, metav1.NamespaceAll, o.LabelSelector, o.ResourceVersion, func(rg *v1alpha1.RunnerGroup, raw []byte, _ error) {
				if rg != nil {
					list.Items = append(list.Items, rg)
					return
				}
				u := &unstructured.Unstructured{}
				if err := u.UnmarshalJSON(raw); err == nil {
					list.Items = append(list.Items, u)
				}
			})
			list.ResourceVersion = rv
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(metav1.NamespaceAll).Watch(ctx, o)
		},
	}
}

// mixedList is a list of RunnerGroups, some already in the types.
type mixedList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []runtime.Object
}

func (l *mixedList) DeepCopyObject() runtime.Object {
	out := &mixedList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	for _, o := range l.Items {
		out.Items = append(out.Items, o.DeepCopyObject())
	}
	return out
}

// toGroup converts a RunnerGroup once as it enters the cache.
func toGroup(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // a tombstone, or converted already
	}
	var rg v1alpha1.RunnerGroup
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rg); err != nil {
		return &broken{Unstructured: u, err: err}, nil
	}
	rg.ManagedFields = nil
	return &rg, nil
}

// List is Client.List from the cache: the RunnerGroups of one namespace
// ("" for all) that match the label selector, sorted by namespace and
// name. The caller may change what it returns.
func (w *Watched) List(ctx context.Context, namespace, selector string) ([]v1alpha1.RunnerGroup, []Broken, error) {
	shared, bad, err := w.ListShared(ctx, namespace, selector)
	if err != nil {
		return nil, nil, err
	}
	groups := make([]v1alpha1.RunnerGroup, len(shared))
	for i, rg := range shared {
		rg.DeepCopyInto(&groups[i])
	}
	return groups, bad, nil
}

// ListFresh lists from the API server, not the cache: for a decision that
// a group made a moment ago, which the cache may not hold yet, must not
// get wrong (the sweep of deleted groups' registrations).
func (w *Watched) ListFresh(ctx context.Context, namespace, selector string) ([]v1alpha1.RunnerGroup, []Broken, error) {
	return w.Client.List(ctx, namespace, selector)
}

// ListShared is List without the copies: the groups are the cache's own
// objects, which the caller must not change, nor anything they point to.
// A loop's pass reads every group of the cluster and changes none, and
// copying 5,000 of them was a fifth of what it allocated.
func (w *Watched) ListShared(ctx context.Context, namespace, selector string) ([]*v1alpha1.RunnerGroup, []Broken, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot list RunnerGroups: selector %q: %w", selector, err)
	}
	if !w.informer.HasSynced() {
		groups, bad, err := w.Client.List(ctx, namespace, selector)
		out := make([]*v1alpha1.RunnerGroup, len(groups))
		for i := range groups {
			out[i] = &groups[i]
		}
		return out, bad, err
	}
	groups := []*v1alpha1.RunnerGroup{}
	var bad []Broken
	for _, o := range w.informer.GetStore().List() {
		m, err := meta(o)
		if err != nil || (namespace != metav1.NamespaceAll && m.GetNamespace() != namespace) || !sel.Matches(labels.Set(m.GetLabels())) {
			continue
		}
		switch o := o.(type) {
		case *v1alpha1.RunnerGroup:
			groups = append(groups, o)
		case *broken:
			bad = append(bad, Broken{Namespace: o.GetNamespace(), Name: o.GetName(), Labels: o.GetLabels(), Err: o.err})
		}
	}
	sort.Slice(groups, func(i, j int) bool {
		if groups[i].Namespace != groups[j].Namespace {
			return groups[i].Namespace < groups[j].Namespace
		}
		return groups[i].Name < groups[j].Name
	})
	return groups, bad, nil
}

func meta(o any) (metav1.Object, error) {
	if b, ok := o.(*broken); ok {
		return b.Unstructured, nil
	}
	m, ok := o.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("not an object: %T", o)
	}
	return m, nil
}
