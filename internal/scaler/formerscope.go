package scaler

import (
	"context"
	"errors"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reaper"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// whyFormerScope says why a runner Job whose runner registered in the
// group's former Gitea scope can take no work of the group's new scope.
const whyFormerScope = "its runner is registered in the group's former Gitea scope"

// whyStranded begins the reason of a runner Job registered where the group
// no longer is, in a place no pass can reach (unreachable): no pass can
// confirm that it runs no job, so none reaps it, and it holds no slot of
// maxActiveRunners, or it would keep the group from serving for ever.
// Its ephemeral runner ends after the one job it may still
// get there; one that never gets one stays until someone deletes its Job.
const whyStranded = "its runner is registered where the group no longer is, and the scaler cannot reach that place: "

// stranded says whether an unavailable reason is whyStranded's.
func stranded(why string) bool { return strings.HasPrefix(why, whyStranded) }

// unreachable says why no pass can reap a runner of the group in place p,
// or "" when one can: p is on another Gitea (the group's token is for its
// own), the runners API is off (--runner-idle-timeout 0), or the group's
// token may not list p's runners. A listing that failed otherwise (Gitea
// slow or down) is no reason: the next pass tries again.
func (s *Scaler) unreachable(ctx context.Context, g *groupRun, p scope.Place) string {
	if p.URL() != scope.Of(&g.rg.Spec).URL() {
		return fmt.Sprintf("it is on another Gitea (%s)", p.URL())
	}
	if _, ok := g.gitea.(gitea.Runners); !ok || s.cfg.RunnerIdleTimeout <= 0 {
		return "the runners API is off (--runner-idle-timeout 0)"
	}
	_, _, err := s.registrationsAt(ctx, g, p)
	if errors.Is(err, gitea.ErrForbidden) || errors.Is(err, gitea.ErrUnauthorized) || errors.Is(err, gitea.ErrNotFound) {
		return fmt.Sprintf("spec.authToken may not list the runners of %s (%v)", p, err)
	}
	return ""
}

// reapFormerScopes looks for the group's runners where its spec no longer
// puts it: a group moved to another scope (org to repo, another
// org, ...) leaves its runners registered in the old one, where the new
// scope's listings never show them. The places are the former ones the
// namespace's ledger records for the group's owner tag on the group's own
// Gitea URL (its token is for that Gitea alone). In each, as the idle
// reaper does in the group's own scope:
//
//   - the runner of an active runner Job of the group (formerJobs) is
//     disabled, then Gitea's running jobs of that scope are read soundly,
//     and the Job and the registration are deleted unless it runs a job;
//     one registered nowhere long after it started is reaped on the same
//     confirmation;
//   - a registration of the group whose runner Job is gone is removed when
//     it is ephemeral, offline and runs no job (as orphans);
//   - the place is forgotten once the listing shows nothing of the group
//     and no runner Job of the group registers there.
//
// A scope that cannot be listed or confirmed deletes nothing there. Runner
// Jobs of a place the group cannot reach (another Gitea URL, or a place
// the ledger does not name) are left to end by themselves.
func (s *Scaler) reapFormerScopes(ctx context.Context, g *groupRun, runners gitea.Runners, formerJobs []*batchv1.Job, obs *observation, rep *reaper.Tally) []error {
	ns := g.rg.Namespace
	own := runnerjob.OwnerTag(g.rg.UID)
	here := g.registersIn()
	var errs []error
	// The runner Jobs say where they registered themselves: they are
	// looked for there whatever the ledger holds (it keeps only the last
	// few places).
	byPlace := map[scope.Place][]*batchv1.Job{}
	var places []scope.Place
	for _, j := range formerJobs {
		p, _ := placeOfJob(g, j)
		if _, seen := byPlace[p]; !seen {
			places = append(places, p)
		}
		byPlace[p] = append(byPlace[p], j)
	}
	inLedger := map[scope.Place]bool{}
	entries, err := s.ledger(ctx, g)
	if err != nil {
		errs = append(errs, fmt.Errorf("cannot read the registrations ledger, so the registrations the group left in its former scopes without a runner Job are not looked for: %w", err))
	} else if e, recorded := entries[own]; recorded {
		if !e.Has(g.rg.Name, here) {
			s.recordOwner(ctx, g) // keeps the places it had among its former ones
		}
		if e.Group == g.rg.Name {
			for _, p := range e.Places() {
				if p == here || p.URL() != here.URL() {
					continue
				}
				inLedger[p] = true
				if _, seen := byPlace[p]; !seen {
					places = append(places, p)
					byPlace[p] = nil
				}
			}
		}
	}
	for _, p := range places {
		done, pErrs := s.reapFormerScope(ctx, g, runners, p, byPlace[p], obs, rep)
		errs = append(errs, pErrs...)
		if done && inLedger[p] && !s.cfg.DryRun {
			if err := (ledger.Store{Client: s.kube}).Forget(ctx, ns, p, []string{own}); err != nil {
				errs = append(errs, fmt.Errorf("cannot update the registrations ledger: %w", err))
			}
		}
	}
	return errs
}

// reapFormerScope does reapFormerScopes' work in one former place
// (reaper.ReapFormerPlace); done says nothing of the group is left there.
func (s *Scaler) reapFormerScope(ctx context.Context, g *groupRun, runners gitea.Runners, p scope.Place, jobs []*batchv1.Job, obs *observation, rep *reaper.Tally) (done bool, errs []error) {
	all, _, err := s.registrationsAt(ctx, g, p)
	if err != nil {
		return false, []error{fmt.Errorf("cannot list the runners of the group's former scope %s, so none of its runners there is reaped: %w", p, err)}
	}
	// Only a Job with no registration there can be silent.
	silent := map[string]bool{}
	for _, j := range jobs {
		if len(g.regs[p].byName[runnerjob.RunnerNameOf(j)]) > 0 {
			continue
		}
		if _, known := placeOfJob(g, j); known && s.neverRegistered(j, obs.pods[j.UID]) {
			silent[j.Name] = true
		}
	}
	return s.reaperWith(runners).ReapFormerPlace(ctx, s.reapGroup(g, rep), reaper.FormerPlace{
		Target: p, Regs: all, Jobs: jobs, Silent: silent, Listed: obs.listedJobs(), Why: whyFormerScope})
}
