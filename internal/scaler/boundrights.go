package scaler

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// clusterReads is what a loop with Config.ClusterWideReads keeps across
// passes for the reads that replace one request per namespace: who it is
// (asked once, it does not change in a process), and the last problem it
// logged, so a missing grant is logged once and not every pass.
type clusterReads struct {
	mu     sync.Mutex
	who    *tenancy.Identity
	logged map[string]string
}

// passReads are a pass's cluster-wide reads, each done at most once.
type passReads struct {
	boundOnce sync.Once
	bound     tenancy.Bound
	boundOK   bool

	nsOnce sync.Once
	nss    map[string]*corev1.Namespace
	nsOK   bool
}

// bound is the pass's one read of the RoleBindings of the tenant
// ClusterRole (tenancy.ReadBound); ok is false when the pass cannot use
// it, and then every namespace is reviewed as without the flag. Each pass
// reads afresh, so a binding made or removed counts from the next pass on,
// in a loop as in a CronJob.
func (n *namespaces) boundRights(ctx context.Context, s *Scaler) (tenancy.Bound, bool) {
	if !s.cfg.ClusterWideReads || s.cfg.Tenancy.TenantClusterRole == "" {
		return tenancy.Bound{}, false
	}
	n.reads.boundOnce.Do(func() {
		n.reads.bound, n.reads.boundOK = s.readBound(ctx)
	})
	return n.reads.bound, n.reads.boundOK
}

func (s *Scaler) readBound(ctx context.Context) (tenancy.Bound, bool) {
	who, known := s.mem.identity()
	if !known {
		var err error
		if who, err = tenancy.WhoAmI(ctx, s.kube); err != nil {
			s.wideProblem("rights", "cannot tell who the scaler is; reviewing the rights in each namespace instead", err)
			return tenancy.Bound{}, false
		}
		s.mem.keepIdentity(who)
	}
	b, err := tenancy.ReadBound(ctx, s.kube, s.cfg.Tenancy.TenantClusterRole, who)
	if err != nil {
		s.wideProblem("rights", "cannot read the tenant ClusterRole's RoleBindings cluster-wide (does the chart grant them? scaler.clusterWideReads); reviewing the rights in each namespace instead", err)
		return tenancy.Bound{}, false
	}
	if len(b.Missing) > 0 {
		var shown []string
		for _, r := range b.Missing {
			shown = append(shown, r.String())
		}
		s.wideProblem("rights", "the tenant ClusterRole lacks rights the scaler needs, so its RoleBindings prove nothing; reviewing the rights in each namespace instead", nil,
			"clusterRole", s.cfg.Tenancy.TenantClusterRole, "missing", shown)
		return b, true
	}
	s.wideProblem("rights", "", nil)
	s.log.Debug("rights read cluster-wide", "clusterRole", s.cfg.Tenancy.TenantClusterRole, "user", who.User, "boundNamespaces", b.Len())
	return b, true
}

// namespaceObject is namespace's object from the pass's one list of
// Namespaces (with Config.ClusterWideReads, or when the pass serves many
// namespaces: listAll), or from a GET where that list is not granted.
func (n *namespaces) namespaceObject(ctx context.Context, s *Scaler, name string) (*corev1.Namespace, error) {
	if s.cfg.ClusterWideReads || n.listAll {
		n.reads.nsOnce.Do(func() {
			n.reads.nss, n.reads.nsOK = s.listNamespaces(ctx)
		})
		if n.reads.nsOK {
			if ns, ok := n.reads.nss[name]; ok {
				return ns, nil
			}
			// Listed after the namespace was deleted: as a GET would say.
			return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
		}
	}
	return s.kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
}

// listNamespaces lists every Namespace, a page at a time.
func (s *Scaler) listNamespaces(ctx context.Context) (map[string]*corev1.Namespace, bool) {
	out := map[string]*corev1.Namespace{}
	err := tenancy.EachListed(ctx, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return s.kube.CoreV1().Namespaces().List(ctx, opts)
	}, func(o runtime.Object) {
		ns := o.(*corev1.Namespace)
		ns.ManagedFields = nil
		out[ns.Name] = ns
	})
	if err != nil {
		s.wideProblem("namespaces", "cannot list Namespaces; reading each served one instead", err)
		return nil, false
	}
	s.wideProblem("namespaces", "", nil)
	return out, true
}

// wideProblem logs a problem of one of the cluster-wide reads (topic)
// once, until it changes or goes away (an empty msg): a loop would
// otherwise log the same missing grant every pass. The pass goes on
// without the read.
func (s *Scaler) wideProblem(topic, msg string, err error, attrs ...any) {
	key := msg + fmt.Sprint(attrs...)
	if err != nil {
		key += ": " + err.Error()
	}
	if !s.mem.news(topic, key) || msg == "" {
		return
	}
	if err != nil {
		attrs = append(attrs, "error", err)
	}
	s.log.Warn(msg, attrs...)
}
