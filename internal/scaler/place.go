package scaler

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/assign"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
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
func (g *groupRun) setPlace(t gitea.Target, known bool) {
	g.place, g.placeKnown = placeAt(g.rg.Spec.Gitea.URL, t), known
}

// registersIn is the place the group's new runners register in: set by
// validate, or the group's own place when validate did not get that far.
func (g *groupRun) registersIn() ledger.Place {
	if g.place == (ledger.Place{}) {
		return placeOf(&g.rg.Spec)
	}
	return g.place
}

// placeAt names a target on a Gitea as the ledger does, with the URL
// normalised (assign.Instance).
func placeAt(url string, t gitea.Target) ledger.Place {
	return ledger.Place{URL: assign.Instance(url), Scope: string(t.Scope), Owner: t.Owner, Repo: t.Repo}
}

// placeOfJob is where a runner Job's runner registers, and whether the
// scaler knew it when it made the Job. A Job made before the runner-scope
// annotation registered where its group's spec is now, as far as anyone
// knew: not known.
func placeOfJob(g *groupRun, j *batchv1.Job) (ledger.Place, bool) {
	url, scope, owner, repo, ok := runnerjob.ParseScope(runnerjob.ScopeOfJob(j))
	if !ok {
		return placeOf(&g.rg.Spec), false
	}
	return ledger.Place{URL: url, Scope: scope, Owner: owner, Repo: repo}, runnerjob.ScopeKnown(j)
}

// placeServes says whether runners registered in place p take jobs of
// the group's scope as its spec is now: p is on the group's Gitea and is
// its scope or one that contains it.
func placeServes(p ledger.Place, g *groupRun) bool {
	here := placeOf(&g.rg.Spec)
	return p.URL == here.URL && p.Target().Contains(here.Target())
}

// runnerPlace is where a runner Job's runner is registered, as far as the
// pass can tell, whether the scaler knew it, and whether that is a former
// place of the group's (one that does not serve its scope now). A runner
// whose Job names a former place but that the group's current place lists
// (its pod restarted with the group's new token) is judged where it is.
func (s *Scaler) runnerPlace(ctx context.Context, g *groupRun, j *batchv1.Job) (p ledger.Place, known, former bool) {
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
