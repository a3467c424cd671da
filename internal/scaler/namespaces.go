package scaler

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// namespaces is what one pass learns of the namespaces its groups are in:
// whether each is enabled (the scaler holds tenancy.Rights there) and its
// Pod Security label. Each is asked once per pass, however many groups the
// namespace holds, and asked again next pass, so a RoleBinding made or
// removed counts from the next pass on. A loop with watch caches asks
// less often (see Scaler.review and RightsRecheck). With
// Config.ClusterWideReads a pass asks the cluster once for all of them
// instead (boundrights.go): the RoleBindings of the tenant ClusterRole and
// the Namespace objects.
type namespaces struct {
	mu   sync.Mutex
	seen map[string]*namespaceFacts
	// ledgers and groups are, per namespace, its ledger and the owner tag
	// of each of its RunnerGroups by name (every group, whichever listener
	// serves it), read at most once per pass for the sweep of deleted
	// groups' registrations (removeLeftBehind).
	ledgers shareOnce[string, ledger.Entries]
	groups  shareOnce[string, map[string]string]
	// freshGroups is groups as the API server lists them, when groups
	// came from a loop's watch cache and the sweep is about to remove or
	// forget something on its word.
	freshGroups shareOnce[string, map[string]string]
	// caches is each namespace's Cache condition (cachecheck.go), checked
	// at most once per pass.
	caches shareOnce[string, metav1.Condition]
	// reads are the pass's cluster-wide reads (boundrights.go).
	reads passReads
	// listAll says the pass reads the Namespace objects with one list of
	// every Namespace (as with Config.ClusterWideReads), not a GET each:
	// set when it serves namespaceListFrom namespaces or more.
	listAll bool
	// configMaps are, per namespace, the ConfigMaps with the RunnerGroup
	// label the pass listed with the state ConfigMaps (preloadStates):
	// the groups' runner configs among them (listedConfigMap). Under mu.
	configMaps map[string]state.Listed
}

// listConfigMaps keeps what the pass listed of namespace's ConfigMaps.
func (n *namespaces) listConfigMaps(namespace string, listed state.Listed) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.configMaps == nil {
		n.configMaps = map[string]state.Listed{}
	}
	n.configMaps[namespace] = listed
}

// listedConfigMap is the ConfigMap name of namespace as the pass listed
// it, nil when the list lacked it; ok is false when the pass did not list
// the namespace's ConfigMaps (a failed list, or a group served on its own).
func (n *namespaces) listedConfigMap(namespace, name string) (cm *corev1.ConfigMap, ok bool) {
	if n == nil {
		return nil, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	listed, ok := n.configMaps[namespace]
	if !ok {
		return nil, false
	}
	return listed[name], true
}

// namespaceFacts is one namespace's answers. once guards them: the groups
// of one namespace served at once wait for a single review.
type namespaceFacts struct {
	once sync.Once
	// missing are the rights the scaler lacks there; err is set when the
	// review itself failed.
	missing []tenancy.Right
	err     error
	// canWatch says a loop may keep the namespace in watch caches.
	canWatch bool
	// ns is the namespace object, read only once it is enabled.
	ns    *corev1.Namespace
	nsErr error
}

// namespaceListFrom is how many namespaces a pass serves from which it
// lists every Namespace once instead of reading each: a list pages
// tenancy.ListPage Namespaces at a time, so from here on it costs fewer
// requests than the GETs in all but clusters of thousands of namespaces
// (500 served namespaces: one or a few requests instead of 500). The
// chart's ClusterRole grants the list with the get.
const namespaceListFrom = 10

func newNamespaces() *namespaces { return &namespaces{seen: map[string]*namespaceFacts{}} }

// facts returns what the pass knows of namespace name, asking the API
// server the first time.
func (n *namespaces) facts(ctx context.Context, s *Scaler, name string) *namespaceFacts {
	n.mu.Lock()
	f, ok := n.seen[name]
	if !ok {
		f = &namespaceFacts{}
		n.seen[name] = f
	}
	n.mu.Unlock()
	f.once.Do(func() {
		f.missing, f.canWatch, f.err = s.review(ctx, n, name)
		if f.err != nil || len(f.missing) > 0 {
			return
		}
		var ok bool
		if f.ns, ok = s.namespaceObject(name); !ok {
			f.ns, f.nsErr = n.namespaceObject(ctx, s, name)
		}
	})
	return f
}
