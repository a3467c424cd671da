package scaler

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// ReadingClusterWide is what a scaler logs when it reads runner Jobs,
// pods and state ConfigMaps cluster-wide (a loop once, a single pass each
// pass).
const ReadingClusterWide = "reading runner Jobs, runner pods, state ConfigMaps and registrations ledgers cluster-wide"

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
// no namespace to read, or when a list fails (the grant is missing); the
// failure is logged. The list's own answer is the check of the grant: a
// single pass asks nothing before it.
func (s *Scaler) readClusterWide(ctx context.Context, namespaces int) *clusterWideRead {
	if !s.cfg.ClusterWideReads || s.mem != nil || namespaces == 0 {
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
	s.log.Info(ReadingClusterWide)
	return out
}
