package scaler

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/assign"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerlabels"
)

// cannotServe are the Ready reasons of a group that no retry will fix until
// someone changes the group, its Secret or its namespace. Such a group comes
// after every group that can serve in the assignment rule. Transient reasons
// (timeouts, conflicts) are not here: a group that flaps must not move jobs
// back and forth.
var cannotServe = map[string]bool{
	ReasonInvalidSpec:               true,
	ReasonInvalidTemplate:           true,
	ReasonSecretNotFound:            true,
	ReasonSecretKeyMissing:          true,
	ReasonGiteaUnauthorized:         true,
	ReasonGiteaForbidden:            true,
	ReasonGiteaNotFound:             true,
	ReasonStateNotOwned:             true,
	ReasonRegistrationTokenNotOwned: true,
	// Fixed by the platform or the namespace's owner, not by a retry.
	ReasonNamespaceNotEnabled:      true,
	ReasonGiteaURLNotAllowed:       true,
	ReasonPodSecurityForbidsRunner: true,
	ReasonSecretNotLabelled:        true,
	ReasonSecretKeyNotDeclared:     true,
}

// assignment builds the pass's one answer to "which group serves this job"
// (package assign) from every RunnerGroup in the cluster, not only those this
// pass serves: another listener, another selector or another namespace must
// reach the same answer, or two groups would both start a runner for a job.
// Without the right to list every namespace's groups it falls back to the
// groups this pass serves and says so, since exactly-one across listeners
// then holds only among those.
//
// A group this pass serves is judged by its validate step in this very pass
// (runs, in the order of served); any other by what its last pass recorded.
func (s *Scaler) assignment(ctx context.Context, served []v1alpha1.RunnerGroup, runs []*groupRun) *assign.Rule {
	all := served
	if !s.servesEverything() {
		listed, _, err := s.groups.List(ctx, metav1.NamespaceAll, "")
		if err != nil {
			s.log.Warn("cannot list the RunnerGroups of every namespace; a job that several groups could run is assigned among the groups this pass serves only", "error", err)
		} else {
			all = append(listed, missingFrom(listed, served)...)
		}
	}
	validated := make(map[string]bool, len(runs))
	for _, g := range runs {
		validated[GroupKey(g.rg)] = g.invalid == nil
	}
	groups := make([]assign.Group, 0, len(all))
	for i := range all {
		g := AssignGroup(&all[i], s.cfg.Runner.DefaultLabels)
		if ok, here := validated[g.Key]; here {
			g.Eligible = ok && all[i].Spec.MaxActiveRunners > 0
		}
		groups = append(groups, g)
	}
	return assign.New(groups)
}

// servesEverything is true when the pass's own listing is every group.
func (s *Scaler) servesEverything() bool {
	return len(s.cfg.Namespaces) == 0 && s.include.Empty() && len(s.excludes) == 0
}

// missingFrom returns the served groups the cluster-wide listing did not
// have (created between the two listings), so each served group has a say.
func missingFrom(listed, served []v1alpha1.RunnerGroup) []v1alpha1.RunnerGroup {
	seen := make(map[string]bool, len(listed))
	for _, rg := range listed {
		seen[GroupKey(&rg)] = true
	}
	var out []v1alpha1.RunnerGroup
	for _, rg := range served {
		if !seen[GroupKey(&rg)] {
			out = append(out, rg)
		}
	}
	return out
}

// AssignmentRule is the rule as every listener computes it for groups it
// does not serve itself: each group judged by its spec and its last
// recorded pass. The why command uses it to give the answer the passes give.
func AssignmentRule(all []v1alpha1.RunnerGroup, defaultLabels []string) *assign.Rule {
	groups := make([]assign.Group, 0, len(all))
	for i := range all {
		groups = append(groups, AssignGroup(&all[i], defaultLabels))
	}
	return assign.New(groups)
}

// AssignGroup is what the assignment rule knows of a group, with the
// scaler's default runner labels.
func AssignGroup(rg *v1alpha1.RunnerGroup, defaultLabels []string) assign.Group {
	g := assign.Group{
		Key:      GroupKey(rg),
		URL:      rg.Spec.Gitea.URL,
		Scope:    rg.Spec.Scope,
		Labels:   runnerlabels.ForGroup(&rg.Spec, defaultLabels),
		Eligible: Eligible(rg),
	}
	if rg.Spec.Scope != v1alpha1.ScopeGlobal {
		g.Owner = rg.Spec.Owner()
	}
	if rg.Spec.Scope == v1alpha1.ScopeRepo {
		g.Repo = rg.Spec.Repo
	}
	return g
}

// Eligible says whether a group can serve, judged only by what every
// listener sees alike: its spec and what its own last pass recorded. A spec
// changed since that pass (a fix, maybe) makes it eligible again at once.
func Eligible(rg *v1alpha1.RunnerGroup) bool {
	if rg.Spec.MaxActiveRunners == 0 || rg.Spec.Validate() != nil {
		return false
	}
	ready := meta.FindStatusCondition(rg.Status.Conditions, ConditionReady)
	stale := rg.Status.ObservedGeneration != rg.Generation
	return ready == nil || ready.Status != metav1.ConditionFalse || stale || !cannotServe[ready.Reason]
}

// GroupKey is "namespace/name", the key of a group in the assignment rule.
func GroupKey(rg *v1alpha1.RunnerGroup) string { return rg.Namespace + "/" + rg.Name }
