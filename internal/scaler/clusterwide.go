package scaler

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/kubecache"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// clusterWideRead is what a single pass with Config.ClusterWideReads
// listed once for every namespace, by namespace. A pass takes from it
// only the namespaces it gathers, which its rights reviews found enabled.
type clusterWideRead struct {
	states map[string]state.Listed
	jobs   map[string][]batchv1.Job
	pods   map[string][]corev1.Pod
}

// readClusterWide lists the state ConfigMaps, then the runner Jobs, then
// the runner pods of every namespace, one request each, in the order a
// namespace's own reads keep (gather: a state read before the Jobs). It
// returns nil, and the pass reads each namespace on its own as without
// the option, for a loop (its Cache serves it), without the option, with
// no namespace to read, or when a list fails; the failure is logged.
func (s *Scaler) readClusterWide(ctx context.Context, namespaces int) *clusterWideRead {
	if !s.cfg.ClusterWideReads || s.cache != nil || namespaces == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.GroupTimeout)
	defer cancel()
	anyGroup := metav1.ListOptions{LabelSelector: v1alpha1.LabelRunnerGroupName}
	out := &clusterWideRead{states: map[string]state.Listed{}, jobs: map[string][]batchv1.Job{}, pods: map[string][]corev1.Pod{}}
	fail := func(what string, err error) *clusterWideRead {
		s.log.Warn("cannot list "+what+" cluster-wide; reading each namespace on its own", "error", err)
		return nil
	}
	cms, err := s.kube.CoreV1().ConfigMaps("").List(ctx, anyGroup)
	if err != nil {
		return fail("the state ConfigMaps", err)
	}
	for i := range cms.Items {
		cm := &cms.Items[i]
		if out.states[cm.Namespace] == nil {
			out.states[cm.Namespace] = state.Listed{}
		}
		out.states[cm.Namespace][cm.Name] = cm
	}
	jobs, err := s.kube.BatchV1().Jobs("").List(ctx, anyGroup)
	if err != nil {
		return fail("the runner Jobs", err)
	}
	for _, j := range jobs.Items {
		out.jobs[j.Namespace] = append(out.jobs[j.Namespace], j)
	}
	pods, err := s.kube.CoreV1().Pods("").List(ctx, anyGroup)
	if err != nil {
		return fail("the runner pods", err)
	}
	for _, p := range pods.Items {
		out.pods[p.Namespace] = append(out.pods[p.Namespace], p)
	}
	return out
}

// ledgerCache is what a loop's Cache has when it reads cluster-wide
// (kubecache.Cache.Ledger).
type ledgerCache interface {
	Ledger(namespace string) (*corev1.ConfigMap, bool)
}

// cachedLedger is the group's namespace's registrations ledger from a
// cluster-wide read: a loop's cluster-wide cache, or a single pass's one
// list of every ledger (Config.ClusterWideReads). ok is false when there
// is none, and the caller reads the namespace's own. A ledger that is
// behind only delays a sweep: a group recorded since is swept at a later
// pass, and one forgotten since is checked again against Gitea, which
// finds nothing left of it.
func (s *Scaler) cachedLedger(ctx context.Context, g *groupRun) (ledger.Entries, bool) {
	ns := g.rg.Namespace
	if c, isWide := s.cache.(ledgerCache); isWide {
		cm, ok := c.Ledger(ns)
		return ledger.Of(cm), ok
	}
	if !s.cfg.ClusterWideReads || s.cache != nil || g.shared == nil {
		return nil, false
	}
	// A failed list is logged once and leaves all nil: every namespace
	// then reads its own, and no group lists again.
	all, _ := g.shared.ledgers.get(ctx, struct{}{}, func(ctx context.Context) (map[string]ledger.Entries, error) {
		list, err := s.kube.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{
			LabelSelector: kubecache.LedgerSelector.Labels, FieldSelector: kubecache.LedgerSelector.Fields})
		if err != nil {
			s.log.Warn("cannot list the registrations ledgers cluster-wide; reading each namespace's own", "error", err)
			return nil, nil
		}
		out := map[string]ledger.Entries{}
		for i := range list.Items {
			if cm := &list.Items[i]; cm.Name == ledger.ConfigMapName {
				out[cm.Namespace] = ledger.Of(cm)
			}
		}
		return out, nil
	})
	if all == nil {
		return nil, false
	}
	if e, found := all[ns]; found {
		return e, true
	}
	return ledger.Entries{}, true
}
