package assign

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerlabels"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// The rule's input from RunnerGroups: what every listener and the why
// command read alike from a group's spec and from what its own last pass
// recorded in its status.

// StatusHeartbeat is how old status.lastCheckTime may grow while nothing
// else in the status changes. A steady pass (nothing changed) writes no
// status: at 500 groups a patch each per pass was half of a pass's
// Kubernetes requests. So lastCheckTime says when a pass last asked Gitea
// for the group and something changed, or at most StatusHeartbeat (plus a
// pass interval) ago when nothing did: a lastCheckTime much older than
// that means the group is not being served.
const StatusHeartbeat = 5 * time.Minute

// DefaultHold is the listeners' default --assignment-hold: longer than a
// runner takes to start and take its job (image pull included), so a
// group that can serve is never cut off; short enough that a group that
// cannot (its runners register where the job cannot run) delays another
// tenant's job by minutes, not for ever.
const DefaultHold = 10 * time.Minute

// cannotServe are the Ready reasons of a group that no retry will fix until
// someone changes the group, its Secret or its namespace. Such a group comes
// after every group that can serve in the assignment rule. Transient reasons
// (timeouts, conflicts) are not here: a group that flaps must not move jobs
// back and forth. CannotServe reads it.
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
	v1alpha1.ReasonFlavourNotSetUp:          true,
	v1alpha1.ReasonNodesLackUserNamespaces:  true,
	v1alpha1.ReasonSecretNotLabelled:        true,
	v1alpha1.ReasonSecretKeyNotDeclared:     true,
	v1alpha1.ReasonNotGranted:               true,
}

// Options are what the rule needs besides the groups: the scaler's
// default runner labels, the hold (the listeners' --assignment-hold; 0
// never turns) and the clock.
type Options struct {
	DefaultLabels []string
	Hold          time.Duration
	Now           func() time.Time
}

// FromGroups is the rule as every listener computes it: each group judged
// by its spec and its last recorded pass (Eligible), a group whose last
// pass found it outside its namespace's grant left out. judged are the
// groups whose eligibility the caller knows better than their record, by
// key (a pass: the groups it serves); the why command has none, and gives
// the answer the passes give.
func FromGroups(all []*v1alpha1.RunnerGroup, o Options, judged map[string]bool) *Rule {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	at := now()
	groups := make([]Group, 0, len(all))
	for _, rg := range all {
		if recordedReason(rg) == v1alpha1.ReasonNotGranted {
			continue
		}
		g := GroupOf(rg, o.DefaultLabels)
		g.Eligible = Eligible(rg, at)
		if ok, known := judged[g.Key]; known {
			g.Eligible = ok
		}
		groups = append(groups, g)
	}
	return New(groups).Holding(o.Hold, now)
}

// GroupOf is what the rule knows of a group's spec, with the scaler's
// default runner labels; Eligible is left false (see Eligible).
func GroupOf(rg *v1alpha1.RunnerGroup, defaultLabels []string) Group {
	return Group{
		Key:    rg.Key(),
		Where:  scope.Of(&rg.Spec),
		Labels: runnerlabels.ForGroup(&rg.Spec, defaultLabels),
	}
}

// ServedWithin is how recent a group's status.lastCheckTime must be for
// the group to count as served: a steady group's lastCheckTime is at most
// StatusHeartbeat plus one pass interval old, so twice the heartbeat
// tells a listener that stopped (uninstalled, its selector changed, its
// CronJob suspended) from one that had nothing to change. That holds only
// for listeners that pass at least every StatusHeartbeat: a group served
// less often, or whose listing has failed for longer (a failure keeps the
// last lastCheckTime), looks unserved to the other listeners and to why.
// Its own listener knows better (FromGroups' judged).
const ServedWithin = 2 * StatusHeartbeat

// Eligible says whether a group can serve at time now, judged only by
// what every listener sees alike: its spec and what its own last pass
// recorded. It cannot when it is paused or its spec is invalid; when no
// listener has served it within ServedWithin (never, or not lately); or when its last pass, at its current generation, failed for a
// reason no retry fixes (CannotServe), wherever in the pass it failed. A
// spec changed since that pass (a fix, maybe) makes it eligible again at
// once; a transient failure (a timeout) never makes it ineligible, so an
// outage shorter than ServedWithin does not move jobs.
func Eligible(rg *v1alpha1.RunnerGroup, now time.Time) bool {
	if last := rg.Status.LastCheckTime; last == nil || now.Sub(last.Time) > ServedWithin {
		return false
	}
	return CanServe(rg)
}

// CanServe is Eligible for a group that is known to be served now (a
// pass serving it knows): it cannot serve when it is paused or its spec is
// invalid, or when its last pass, at its current generation, recorded a
// reason no retry fixes; a group never recorded can. It is the one place
// that reads the recorded reason, so that a failure recorded without a
// lastCheckTime (the pass failed before it observed) counts as much as
// one recorded with it.
func CanServe(rg *v1alpha1.RunnerGroup) bool {
	if rg.Spec.Paused() || rg.Spec.Validate() != nil {
		return false
	}
	stale := rg.Status.ObservedGeneration != rg.Generation
	return stale || !CannotServe(recordedReason(rg))
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

// CannotServe says whether a group whose last pass recorded reason cannot
// serve until someone changes the group, its Secret or its namespace.
func CannotServe(reason string) bool { return cannotServe[reason] }
