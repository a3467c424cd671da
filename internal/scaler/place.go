package scaler

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// Where a group's runners register. A registration token of a
// scope that contains the group's (its org's, its owner user's, the
// instance's) registers the runner in that scope: Gitea lists it there, not
// in the group's own scope, and hands it any queued job of that scope whose
// labels it offers. So the place a runner registers in is recorded on its
// runner Job (runnerjob.MarkScope), and everything that asks Gitea about a
// runner (its registration, whether it runs a job) asks there.
//
// The place is known when the scaler minted the token (the group's own
// scope) or Gitea said whose token it is (the registration token check). It
// is not known when the check could not be made (the API token may not ask,
// Gitea failed, a dry run): the runner Job then names the group's own place
// and says it is not known, and a runner missing from that listing is never
// taken for unregistered: it may be registered in a scope that contains it.

// setPlace records where the group's runners register from now on.
func (g *groupRun) setPlace(p scope.Place, known bool) {
	g.place, g.placeKnown = p, known
}

// registersIn is the place the group's new runners register in: set by
// validate, or the group's own place when validate did not get that far.
func (g *groupRun) registersIn() scope.Place {
	if g.place.IsZero() {
		return scope.Of(&g.rg.Spec)
	}
	return g.place
}

// placeOfJob is where a runner Job's runner registers, and whether the
// scaler knew it when it made the Job. A Job made before the runner-scope
// annotation registered where its group's spec is now, as far as anyone
// knew: not known.
func placeOfJob(g *groupRun, j *batchv1.Job) (scope.Place, bool) {
	p, ok := runnerjob.PlaceOfJob(j)
	if !ok {
		return scope.Of(&g.rg.Spec), false
	}
	return p, runnerjob.ScopeKnown(j)
}

// placeServes says whether runners registered in place p take jobs of
// the group's scope as its spec is now: p is on the group's Gitea and is
// its scope or one that contains it.
func placeServes(p scope.Place, g *groupRun) bool { return p.Contains(scope.Of(&g.rg.Spec)) }

// runnerPlace is where a runner Job's runner is registered, as far as the
// pass can tell, whether the scaler knew it, and whether that is a former
// place of the group's (one that does not serve its scope now). A runner
// whose Job names a former place but that the group's current place lists
// (its pod restarted with the group's new token) is judged where it is.
func (s *Scaler) runnerPlace(ctx context.Context, g *groupRun, j *batchv1.Job) (p scope.Place, known, former bool) {
	p, known = placeOfJob(g, j)
	if placeServes(p, g) {
		return p, known, false
	}
	here := g.registersIn()
	if mine, _ := s.registrationsOf(ctx, g, here, j); len(mine) > 0 {
		return here, true, false
	}
	return p, known, true
}
