package scaler

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/assign"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerlabels"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/selection"
)

// cannotServe are the Ready reasons of a group that no retry will fix until
// someone changes the group, its Secret or its namespace. Such a group comes
// after every group that can serve in the assignment rule. Transient reasons
// (timeouts, conflicts) are not here: a group that flaps must not move jobs
// back and forth.
var cannotServe = map[string]bool{
	v1alpha1.ReasonInvalidSpec:               true,
	v1alpha1.ReasonInvalidTemplate:           true,
	v1alpha1.ReasonSecretNotFound:            true,
	v1alpha1.ReasonSecretKeyMissing:          true,
	v1alpha1.ReasonGiteaUnauthorized:         true,
	v1alpha1.ReasonGiteaForbidden:            true,
	v1alpha1.ReasonGiteaNotFound:             true,
	v1alpha1.ReasonGiteaVersionUnsupported:   true,
	v1alpha1.ReasonStateNotOwned:             true,
	v1alpha1.ReasonRegistrationTokenNotOwned: true,
	v1alpha1.ReasonInvalidRunnerConfig:       true,
	v1alpha1.ReasonRunnerConfigNotOwned:      true,
	// Its runners would register in another scope, or not at all.
	v1alpha1.ReasonRegistrationTokenNotForScope: true,
	// Fixed by the platform or the namespace's owner, not by a retry.
	v1alpha1.ReasonNamespaceNotEnabled:      true,
	v1alpha1.ReasonGiteaURLNotAllowed:       true,
	v1alpha1.ReasonPodSecurityForbidsRunner: true,
	v1alpha1.ReasonSecretNotLabelled:        true,
	v1alpha1.ReasonSecretKeyNotDeclared:     true,
	v1alpha1.ReasonNotGranted:               true,
}

// assignment builds the pass's one answer to "which group serves this job"
// (package assign) from every RunnerGroup in the cluster, not only those this
// pass serves: another listener, another selector or another namespace must
// reach the same answer, or two groups would both start a runner for a job.
// Without the right to list every namespace's groups it falls back to the
// groups this pass serves and says so, since exactly-one across listeners
// then holds only among those.
//
// Every group is judged alike, by its spec and what its own last pass
// recorded (see Eligible), so that every listener and the why command give
// one answer. A pass differs only where it knows better than the record
// about a group it serves: a failure no retry fixes (ineligible; outside
// its namespace's grant: no part at all), or that the group validated and
// is served now, whatever its lastCheckTime says. Such a group is judged
// by its spec and recorded reason alone (canServe): served for the first
// time it can serve; a group whose earlier pass failed for a reason no
// retry fixes, before it ever observed (so without a lastCheckTime), is no
// new group and cannot, until a pass records otherwise or its spec
// changes (issue 32.2); and passes further apart than ServedWithin, or a
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
		key, reason := g.rg.Key(), reasonOf(g.invalid)
		switch {
		case reason == v1alpha1.ReasonNotGranted:
			excluded[key] = true
		case cannotServe[reason]:
			judged[key] = false
		case g.invalid == nil:
			// Served now, by this pass.
			judged[key] = canServe(g.rg)
		}
	}
	kept := make([]*v1alpha1.RunnerGroup, 0, len(all))
	for _, rg := range all {
		if !excluded[rg.Key()] {
			kept = append(kept, rg)
		}
	}
	return assignmentRule(kept, s.RuleOptions(), judged)
}

// RuleOptions are the scaler's inputs to the assignment rule besides the
// groups.
func (s *Scaler) RuleOptions() RuleOptions {
	return RuleOptions{DefaultLabels: s.cfg.Runner.DefaultLabels, Hold: s.cfg.AssignmentHold, Now: s.now}
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

// RuleOptions are what the assignment rule needs besides the groups: the
// scaler's default runner labels, the hold (Config.AssignmentHold; 0 never
// turns) and the clock.
type RuleOptions struct {
	DefaultLabels []string
	Hold          time.Duration
	Now           func() time.Time
}

// AssignmentRule is the rule as every listener computes it: each group
// judged by its spec and its last recorded pass (Eligible), a group whose
// last pass found it outside its namespace's grant left out. The why
// command uses it to give the answer the passes give.
func AssignmentRule(all []v1alpha1.RunnerGroup, o RuleOptions) *assign.Rule {
	return assignmentRule(pointers(all), o, nil)
}

// assignmentRule is AssignmentRule with the groups whose eligibility the
// pass knows better than their record (judged).
func assignmentRule(all []*v1alpha1.RunnerGroup, o RuleOptions, judged map[string]bool) *assign.Rule {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	at := now()
	groups := make([]assign.Group, 0, len(all))
	for _, rg := range all {
		if recordedReason(rg) == v1alpha1.ReasonNotGranted {
			continue
		}
		g := AssignGroup(rg, o.DefaultLabels)
		g.Eligible = Eligible(rg, at)
		if ok, known := judged[g.Key]; known {
			g.Eligible = ok
		}
		groups = append(groups, g)
	}
	return assign.New(groups).Holding(o.Hold, now)
}

// AssignGroup is what the assignment rule knows of a group's spec, with
// the scaler's default runner labels; Eligible is left false (see
// Eligible).
func AssignGroup(rg *v1alpha1.RunnerGroup, defaultLabels []string) assign.Group {
	g := assign.Group{
		Key:    rg.Key(),
		URL:    rg.Spec.Gitea.URL,
		Scope:  rg.Spec.Scope,
		Labels: runnerlabels.ForGroup(&rg.Spec, defaultLabels),
	}
	if rg.Spec.Scope != v1alpha1.ScopeGlobal {
		g.Owner = rg.Spec.Owner()
	}
	if rg.Spec.Scope == v1alpha1.ScopeRepo {
		g.Repo = rg.Spec.Repo
	}
	return g
}

// ServedWithin is how recent a group's status.lastCheckTime must be for
// the group to count as served: a steady group's lastCheckTime is at most
// StatusHeartbeat plus one pass interval old, so twice the heartbeat
// tells a listener that stopped (uninstalled, its selector changed, its
// CronJob suspended) from one that had nothing to change. That holds only
// for listeners that pass at least every StatusHeartbeat: a group served
// less often, or whose listing has failed for longer (a failure keeps the
// last lastCheckTime), looks unserved to the other listeners and to why.
// Its own listener knows better (see assignment).
const ServedWithin = 2 * StatusHeartbeat

// Eligible says whether a group can serve at time now, judged only by
// what every listener sees alike: its spec and what its own last pass
// recorded. It cannot when it is paused or its spec is invalid; when no
// listener has served it within ServedWithin (never, or not lately: issue
// 25.3); or when its last pass, at its current generation, failed for a
// reason no retry fixes (cannotServe), wherever in the pass it failed. A
// spec changed since that pass (a fix, maybe) makes it eligible again at
// once; a transient failure (a timeout) never makes it ineligible, so an
// outage shorter than ServedWithin does not move jobs.
func Eligible(rg *v1alpha1.RunnerGroup, now time.Time) bool {
	if last := rg.Status.LastCheckTime; last == nil || now.Sub(last.Time) > ServedWithin {
		return false
	}
	return canServe(rg)
}

// canServe is Eligible for a group that is known to be served now (a
// pass serving it knows): it cannot serve when it is paused or its spec is
// invalid, or when its last pass, at its current generation, recorded a
// reason no retry fixes; a group never recorded can. It is the one place
// that reads the recorded reason, so that a failure recorded without a
// lastCheckTime (the pass failed before it observed) counts as much as
// one recorded with it.
func canServe(rg *v1alpha1.RunnerGroup) bool {
	if rg.Spec.Paused() || rg.Spec.Validate() != nil {
		return false
	}
	stale := rg.Status.ObservedGeneration != rg.Generation
	return stale || !cannotServe[recordedReason(rg)]
}

// recordedReason is the reason of the group's Ready=False condition, or ""
// when it is Ready or has none.
func recordedReason(rg *v1alpha1.RunnerGroup) string {
	ready := meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse {
		return ""
	}
	return ready.Reason
}

// pointers points at each of groups.
func pointers(groups []v1alpha1.RunnerGroup) []*v1alpha1.RunnerGroup {
	out := make([]*v1alpha1.RunnerGroup, len(groups))
	for i := range groups {
		out[i] = &groups[i]
	}
	return out
}
