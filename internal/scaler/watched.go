package scaler

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/kubecache"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// Cache is what a loop keeps between passes (package kubecache): the
// Namespace objects, and each enabled namespace's runner Jobs, runner pods
// and state ConfigMaps in watch caches. With a Cache, a Scaler also keeps
// each namespace's rights review and the token Secrets it read across
// passes (see memo). A single pass has none.
type Cache interface {
	Namespace(name string) (*corev1.Namespace, bool)
	Watch(ctx context.Context, namespace string) (kubecache.View, bool)
	Forget(namespace string)
	Refused(namespace string) bool
}

// SecretRecheck is how long a loop uses a token Secret it read (one with
// the runner-token label) before it reads it again, at most, spread the
// same way. A group that fails reads its Secrets again at its next pass,
// so a rotated token costs one failed pass.
const SecretRecheck = 5 * time.Minute

// memo is the rights reviews and token Secrets a loop trusts between
// passes (part of its memory).
type memo struct {
	mu      sync.Mutex
	rights  map[string]rightsMemo
	secrets map[types.NamespacedName]secretMemo
}

type rightsMemo struct {
	canWatch bool
	until    time.Time
}

type secretMemo struct {
	secret *corev1.Secret
	until  time.Time
}

// spread is a random point between half of d and d from now.
func spread(now time.Time, d time.Duration) time.Time {
	return now.Add(d/2 + rand.N(d/2+1))
}

// review says which Rights the scaler lacks in namespace and whether it
// may watch there, from the memo when a loop's earlier review found the
// namespace enabled and is still trusted: for Config.RightsRecheck at
// most, each review for a random half to all of it, so the reviews of many
// namespaces spread over the passes instead of falling due together. A
// namespace found not enabled is reviewed again every pass, and one where
// the API server refused a watch or a request at the next pass. Trusting
// a review is what a removed RoleBinding waits for: until the next review
// the loop's established watches there keep running (the API server
// authorizes a watch when it starts), and its status says nothing.
//
// With Config.ClusterWideReads, a namespace the pass's one read of the
// tenant ClusterRole's RoleBindings enables is enabled without a review
// and without a trust window (the read is fresh every pass), so
// RightsRecheck only spares the reviews of namespaces enabled some other
// way.
func (s *Scaler) review(ctx context.Context, n *namespaces, namespace string) ([]tenancy.Right, bool, error) {
	if b, ok := n.boundRights(ctx, s); ok {
		if enabled, canWatch := b.Enables(namespace); enabled {
			s.mem.enabled(namespace, canWatch, s.now())
			return nil, canWatch, nil
		}
	}
	now := s.now()
	if canWatch, ok := s.mem.trustedRights(namespace, now); ok {
		return nil, canWatch, nil
	}
	missing, canWatch, err := tenancy.Review(ctx, s.kube, namespace)
	switch {
	case err != nil || len(missing) > 0:
		// Not enabled (any more), or not known to be: nothing of it is
		// kept, and without a doubt (no error) not its watches either.
		s.mem.forgetNamespace(namespace, err == nil)
	default:
		until := now
		if s.cfg.RightsRecheck > 0 {
			until = spread(now, s.cfg.RightsRecheck)
		}
		s.mem.enabled(namespace, canWatch, until)
	}
	return missing, canWatch, err
}

// trustedRights is the loop's review of namespace while it is trusted:
// until its time, and while the API server refused nothing there.
func (m *memory) trustedRights(namespace string, now time.Time) (canWatch, ok bool) {
	if m == nil {
		return false, false
	}
	m.memo.mu.Lock()
	r, ok := m.memo.rights[namespace]
	m.memo.mu.Unlock()
	if !ok || !now.Before(r.until) || m.cache.Refused(namespace) {
		return false, false
	}
	return r.canWatch, true
}

// enabled remembers that namespace is enabled, trusted until until.
func (m *memory) enabled(namespace string, canWatch bool, until time.Time) {
	if m == nil {
		return
	}
	m.memo.mu.Lock()
	defer m.memo.mu.Unlock()
	m.memo.rights[namespace] = rightsMemo{canWatch: canWatch, until: until}
	if !canWatch || m.cache.Refused(namespace) {
		// Enabled, but the watches may not run, or one was refused
		// before the rights came back: start them again if allowed.
		m.cache.Forget(namespace)
	}
}

// forgetNamespace drops the loop's review of namespace and its Secrets,
// and with watches its watch caches too.
func (m *memory) forgetNamespace(namespace string, watches bool) {
	if m == nil {
		return
	}
	m.memo.mu.Lock()
	defer m.memo.mu.Unlock()
	delete(m.memo.rights, namespace)
	for k := range m.memo.secrets {
		if k.Namespace == namespace {
			delete(m.memo.secrets, k)
		}
	}
	if watches {
		m.cache.Forget(namespace)
	}
}

// namespaceObject is the Namespace from the loop's cache, when it has it.
func (s *Scaler) namespaceObject(name string) (*corev1.Namespace, bool) {
	if s.mem == nil {
		return nil, false
	}
	return s.mem.cache.Namespace(name)
}

// watchedView is namespace's view from the loop's watch caches, when the
// scaler may watch there and they are synced.
func (s *Scaler) watchedView(ctx context.Context, namespace string, canWatch bool) (kubecache.View, bool) {
	if s.mem == nil || !canWatch {
		return kubecache.View{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, min(s.cfg.GroupTimeout, kubecache.SyncTimeout))
	defer cancel()
	return s.mem.cache.Watch(ctx, namespace)
}

// listedStates are a view's state ConfigMaps as state.Store.List gives them.
func listedStates(v kubecache.View) state.Listed {
	out := state.Listed{}
	for _, cm := range v.States {
		out[cm.Name] = cm
	}
	return out
}

// rememberedSecret is a token Secret a loop read before and still trusts.
func (m *memory) rememberedSecret(key types.NamespacedName, now time.Time) (*corev1.Secret, bool) {
	if m == nil {
		return nil, false
	}
	m.memo.mu.Lock()
	defer m.memo.mu.Unlock()
	r, ok := m.memo.secrets[key]
	if !ok || !now.Before(r.until) {
		return nil, false
	}
	return r.secret, true
}

// rememberSecret keeps a Secret a loop read, trusted for SecretRecheck at
// most. It is used as a fresh read would be: its label and declared keys
// are checked on every use.
func (m *memory) rememberSecret(sec *corev1.Secret, now time.Time) {
	if m == nil {
		return
	}
	m.memo.mu.Lock()
	defer m.memo.mu.Unlock()
	m.memo.secrets[types.NamespacedName{Namespace: sec.Namespace, Name: sec.Name}] = secretMemo{secret: sec, until: spread(now, SecretRecheck)}
}

// failed forgets what the loop remembers for a group that failed: its
// Secrets (a rotated token) and, when the API server refused a request,
// its namespace's review.
func (s *Scaler) failed(g *groupRun, err error) {
	if err == nil {
		return
	}
	for _, name := range []string{g.rg.Spec.AuthToken.SecretRef.Name, g.rg.RegistrationTokenRef().Name} {
		s.mem.forgetSecret(g.rg.Namespace, name)
	}
	if apierrors.IsForbidden(err) {
		s.mem.forgetRights(g.rg.Namespace)
	}
}

// forgetSecret drops one Secret: one the scaler is about to write, or a
// failed group's.
func (m *memory) forgetSecret(namespace, name string) {
	if m == nil {
		return
	}
	m.memo.mu.Lock()
	defer m.memo.mu.Unlock()
	delete(m.memo.secrets, types.NamespacedName{Namespace: namespace, Name: name})
}

// forgetRights drops the loop's review of namespace, so the next pass
// reviews it again.
func (m *memory) forgetRights(namespace string) {
	if m == nil {
		return
	}
	m.memo.mu.Lock()
	defer m.memo.mu.Unlock()
	delete(m.memo.rights, namespace)
}
