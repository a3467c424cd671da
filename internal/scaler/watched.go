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

// memo is what a loop's Scaler remembers across passes. It is only used
// with a Cache.
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
			if s.cache != nil {
				s.memo.mu.Lock()
				defer s.memo.mu.Unlock()
				s.enabledLocked(namespace, canWatch, s.now())
			}
			return nil, canWatch, nil
		}
	}
	if s.cache == nil {
		return tenancy.Review(ctx, s.kube, namespace)
	}
	now := s.now()
	s.memo.mu.Lock()
	m, ok := s.memo.rights[namespace]
	s.memo.mu.Unlock()
	if ok && now.Before(m.until) && !s.cache.Refused(namespace) {
		return nil, m.canWatch, nil
	}
	missing, canWatch, err := tenancy.Review(ctx, s.kube, namespace)
	s.memo.mu.Lock()
	defer s.memo.mu.Unlock()
	switch {
	case err != nil || len(missing) > 0:
		delete(s.memo.rights, namespace)
		s.forgetSecretsLocked(namespace)
		if err == nil {
			// Not enabled (any more): nothing of it is kept.
			s.cache.Forget(namespace)
		}
	default:
		until := now
		if s.cfg.RightsRecheck > 0 {
			until = spread(now, s.cfg.RightsRecheck)
		}
		s.enabledLocked(namespace, canWatch, until)
	}
	return missing, canWatch, err
}

// enabledLocked remembers that namespace is enabled, trusted until until;
// s.memo.mu is held.
func (s *Scaler) enabledLocked(namespace string, canWatch bool, until time.Time) {
	s.memo.rights[namespace] = rightsMemo{canWatch: canWatch, until: until}
	if !canWatch || s.cache.Refused(namespace) {
		// Enabled, but the watches may not run, or one was refused
		// before the rights came back: start them again if allowed.
		s.cache.Forget(namespace)
	}
}

// namespaceObject is the Namespace from the loop's cache, when it has it.
func (s *Scaler) namespaceObject(name string) (*corev1.Namespace, bool) {
	if s.cache == nil {
		return nil, false
	}
	return s.cache.Namespace(name)
}

// watchedView is namespace's view from the loop's watch caches, when the
// scaler may watch there and they are synced.
func (s *Scaler) watchedView(ctx context.Context, namespace string, canWatch bool) (kubecache.View, bool) {
	if s.cache == nil || !canWatch {
		return kubecache.View{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, min(s.cfg.GroupTimeout, kubecache.SyncTimeout))
	defer cancel()
	return s.cache.Watch(ctx, namespace)
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
func (s *Scaler) rememberedSecret(key types.NamespacedName) (*corev1.Secret, bool) {
	if s.cache == nil {
		return nil, false
	}
	s.memo.mu.Lock()
	defer s.memo.mu.Unlock()
	m, ok := s.memo.secrets[key]
	if !ok || !s.now().Before(m.until) {
		return nil, false
	}
	return m.secret, true
}

// rememberSecret keeps a Secret a loop read. It is used as a fresh read
// would be: its label and declared keys are checked on every use.
func (s *Scaler) rememberSecret(sec *corev1.Secret) {
	if s.cache == nil {
		return
	}
	s.memo.mu.Lock()
	defer s.memo.mu.Unlock()
	s.memo.secrets[types.NamespacedName{Namespace: sec.Namespace, Name: sec.Name}] = secretMemo{secret: sec, until: spread(s.now(), SecretRecheck)}
}

// failed forgets what the loop remembers for a group that failed: its
// Secrets (a rotated token) and, when the API server refused a request,
// its namespace's review.
func (s *Scaler) failed(g *groupRun, err error) {
	if s.cache == nil || err == nil {
		return
	}
	s.memo.mu.Lock()
	defer s.memo.mu.Unlock()
	for _, name := range []string{g.rg.Spec.AuthToken.SecretRef.Name, g.rg.RegistrationTokenRef().Name} {
		delete(s.memo.secrets, types.NamespacedName{Namespace: g.rg.Namespace, Name: name})
	}
	if apierrors.IsForbidden(err) {
		delete(s.memo.rights, g.rg.Namespace)
	}
}

// forgetSecret drops one Secret, which the scaler is about to write.
func (s *Scaler) forgetSecret(namespace, name string) {
	s.memo.mu.Lock()
	defer s.memo.mu.Unlock()
	delete(s.memo.secrets, types.NamespacedName{Namespace: namespace, Name: name})
}

// forgetSecretsLocked drops namespace's Secrets; s.memo.mu is held.
func (s *Scaler) forgetSecretsLocked(namespace string) {
	for k := range s.memo.secrets {
		if k.Namespace == namespace {
			delete(s.memo.secrets, k)
		}
	}
}
