package scaler

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/assign"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reason"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/selection"
)

// assignment builds the pass's one answer to "which group serves this job"
// (package assign) from every RunnerGroup in the cluster, not only those this
// pass serves: another listener, another selector or another namespace must
// reach the same answer, or two groups would both start a runner for a job.
// Without the right to list every namespace's groups it falls back to the
// groups this pass serves and says so, since exactly-one across listeners
// then holds only among those.
//
// Every group is judged alike, by its spec and what its own last pass
// recorded (see assign.Eligible), so that every listener and the why command give
// one answer. A pass differs only where it knows better than the record
// about a group it serves: a failure no retry fixes (ineligible; outside
// its namespace's grant: no part at all), or that the group validated and
// is served now, whatever its lastCheckTime says. Such a group is judged
// by its spec and recorded reason alone (assign.CanServe): served for the first
// time it can serve; a group whose earlier pass failed for a reason no
// retry fixes, before it ever observed (so without a lastCheckTime), is no
// new group and cannot, until a pass records otherwise or its spec
// changes; and passes further apart than assign.ServedWithin, or a
// listing that has failed for longer, do not make the pass's own groups
// look unserved to it. A transient failure changes nothing, so it moves
// no job.
func (s *Scaler) assignment(ctx context.Context, served, every []*v1alpha1.RunnerGroup, runs []*groupRun) *assign.Rule {
	all := served
	switch {
	case every != nil:
		all = append(every, missingFrom(every, served)...)
	case !s.selection.ServesEverything():
		listed, _, err := selection.ListShared(ctx, s.groups, metav1.NamespaceAll, "")
		if err != nil {
			s.log.Warn("cannot list the RunnerGroups of every namespace; a job that several groups could run is assigned among the groups this pass serves only", "error", err)
		} else {
			all = append(listed, missingFrom(listed, served)...)
		}
	}
	// What this pass's validate step found about the groups it serves,
	// where it is news that their record will carry at the end of the pass.
	excluded, judged := map[string]bool{}, map[string]bool{}
	for _, g := range runs {
		key, why := g.rg.Key(), reason.Of(g.invalid)
		switch {
		case why == v1alpha1.ReasonNotGranted:
			excluded[key] = true
		case assign.CannotServe(why):
			judged[key] = false
		case g.invalid == nil:
			// Served now, by this pass.
			judged[key] = assign.CanServe(g.rg)
		}
	}
	kept := make([]*v1alpha1.RunnerGroup, 0, len(all))
	for _, rg := range all {
		if !excluded[rg.Key()] {
			kept = append(kept, rg)
		}
	}
	opts := assign.Options{DefaultLabels: s.cfg.Runner.DefaultLabels, Hold: s.cfg.AssignmentHold, Now: s.now}
	return assign.FromGroups(kept, opts, judged)
}

// missingFrom returns the served groups the cluster-wide listing did not
// have (created between the two listings), so each served group has a say.
func missingFrom(listed, served []*v1alpha1.RunnerGroup) []*v1alpha1.RunnerGroup {
	seen := make(map[string]bool, len(listed))
	for _, rg := range listed {
		seen[rg.Key()] = true
	}
	var out []*v1alpha1.RunnerGroup
	for _, rg := range served {
		if !seen[rg.Key()] {
			out = append(out, rg)
		}
	}
	return out
}
