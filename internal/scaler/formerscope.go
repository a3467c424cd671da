package scaler

import (
	"context"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// whyFormerScope says why a runner Job whose runner registered in the
// group's former Gitea scope can take no work of the group's new scope.
const whyFormerScope = "its runner is registered in the group's former Gitea scope"

// inFormerScope says whether a runner Job's runner registers somewhere
// the group no longer is: its Job's runner-scope annotation names another
// Gitea URL or target than the group's spec now. A Job made before the
// annotation registered where its group is.
func inFormerScope(g *groupRun, j *batchv1.Job) bool {
	where := runnerjob.ScopeOfJob(j)
	return where != "" && where != runnerjob.ScopeOf(&g.rg.Spec)
}

// scopeOfPlace names a ledger place as the runner-scope annotation does.
func scopeOfPlace(p ledger.Place) string { return runnerjob.Scope(p.URL, p.Scope, p.Owner, p.Repo) }

// reapFormerScopes looks for the group's runners where its spec no longer
// puts it (issue 25.8): a group moved to another scope (org to repo, another
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
func (s *Scaler) reapFormerScopes(ctx context.Context, g *groupRun, runners gitea.Runners, formerJobs []*batchv1.Job, obs *observation, rep *lifecycleReport) []error {
	ns := g.rg.Namespace
	own := runnerjob.OwnerTag(g.rg.UID)
	here := placeOf(&g.rg.Spec)
	entries, err := s.ledger(ctx, g)
	if err != nil {
		if len(formerJobs) == 0 {
			return nil
		}
		return []error{fmt.Errorf("cannot read the registrations ledger, so the runners of the group's former scopes are not looked for: %w", err)}
	}
	e, recorded := entries[own]
	if recorded && !e.Has(g.rg.Name, here) {
		s.recordOwner(ctx, g) // keeps the places it had among its former ones
	}
	byScope := map[string][]*batchv1.Job{}
	for _, j := range formerJobs {
		w := runnerjob.ScopeOfJob(j)
		byScope[w] = append(byScope[w], j)
	}
	var errs []error
	var places []ledger.Place
	if recorded && e.Group == g.rg.Name {
		for _, p := range e.Places() {
			if p != here && p.URL == here.URL {
				places = append(places, p)
			}
		}
	}
	for _, p := range places {
		where := scopeOfPlace(p)
		jobs := byScope[where]
		delete(byScope, where)
		done, pErrs := s.reapFormerScope(ctx, g, runners, p, jobs, obs, rep)
		errs = append(errs, pErrs...)
		if done && !s.cfg.DryRun {
			if err := (ledger.Store{Client: s.kube}).Forget(ctx, ns, p, []string{own}); err != nil {
				errs = append(errs, fmt.Errorf("cannot update the registrations ledger: %w", err))
			}
		}
	}
	for where, jobs := range byScope {
		for _, j := range jobs {
			g.log.Warn("a runner Job registered in a Gitea scope the group can no longer reach is left to end by itself", "job", j.Name, "scope", where)
		}
	}
	return errs
}

// reapFormerScope does reapFormerScopes' work in one former place; done
// says nothing of the group is left there.
func (s *Scaler) reapFormerScope(ctx context.Context, g *groupRun, runners gitea.Runners, p ledger.Place, jobs []*batchv1.Job, obs *observation, rep *lifecycleReport) (done bool, errs []error) {
	t := gitea.Target{Scope: gitea.Scope(p.Scope), Owner: p.Owner, Repo: p.Repo}
	all, err := runners.ListRunners(ctx, t)
	if err != nil {
		return false, []error{fmt.Errorf("cannot list the runners of the group's former scope %s, so none of its runners there is reaped: %w", t, err)}
	}
	regs := byRunnerName(all)
	// The runner Jobs to reap: registered there (disabled first), or
	// registered nowhere long after they started.
	var reap []*batchv1.Job
	for _, j := range jobs {
		mine := regs[runnerjob.RunnerNameOf(j)]
		if len(mine) == 0 && !s.neverRegistered(j, obs.pods[j.UID]) {
			continue
		}
		if s.cfg.DryRun {
			fmt.Fprintf(s.out, "  would reap runner Job %s: %s (%s)\n", j.Name, whyFormerScope, t)
			continue
		}
		if err := s.disable(ctx, runners, t, mine); err != nil {
			errs = append(errs, fmt.Errorf("cannot disable the runner of %s in the group's former scope %s: %w", j.Name, t, err))
			continue
		}
		reap = append(reap, j)
	}
	// Registrations of the group whose runner Job is gone.
	listed := make(map[string]bool, len(obs.jobs))
	for i := range obs.jobs {
		listed[obs.jobs[i].Name] = true
	}
	var named []plan.Registration
	for _, r := range all {
		if job, ok := runnerjob.JobOfRunner(g.rg, r.Name); ok {
			named = append(named, plan.Registration{ID: r.ID, Name: r.Name, Job: job, Ephemeral: r.Ephemeral, Online: r.Online})
		}
	}
	orphans := plan.Orphans(named, listed)
	var removed []int64
	kept := len(reap) < len(jobs) // a Job not reaped may still register there
	if len(reap) > 0 || len(orphans) > 0 {
		busy, err := s.runningRunners(ctx, runners, t)
		if err != nil {
			return false, append(errs, fmt.Errorf("cannot confirm that the runners in the group's former scope %s run no job, so none is deleted: %w", t, err))
		}
		for _, j := range reap {
			name := runnerjob.RunnerNameOf(j)
			if busy[name] {
				g.log.Info("a runner in the group's former scope runs a job; leaving it alone", "job", j.Name, "runner", name, "scope", t.String())
				kept = true
				continue
			}
			if err := s.deleteJob(ctx, j); err != nil {
				errs = append(errs, fmt.Errorf("cannot delete runner Job %s: %w", j.Name, err))
				kept = true
				continue
			}
			for _, r := range regs[name] {
				if err := runners.DeleteRunner(ctx, t, r.ID); err != nil {
					errs = append(errs, fmt.Errorf("cannot remove runner %s from the group's former scope %s: %w", name, t, err))
					continue
				}
				removed = append(removed, r.ID)
			}
			rep.reaped++
			rep.deletedJobs++
			g.log.Info("reaped a runner of the group's former scope", "job", j.Name, "runner", name, "scope", t.String())
			s.event(ctx, g.rg, "Normal", ReasonRunnerReaped, fmt.Sprintf("Reaped runner Job %s: %s (%s)", j.Name, whyFormerScope, t))
		}
		for _, o := range orphans {
			if busy[o.Name] {
				continue
			}
			if _, err := s.kube.BatchV1().Jobs(g.rg.Namespace).Get(ctx, o.Job, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				if err != nil {
					errs = append(errs, fmt.Errorf("cannot check runner Job %s of registration %s: %w", o.Job, o.Name, err))
				}
				continue
			}
			if s.cfg.DryRun {
				fmt.Fprintf(s.out, "  would remove runner %s (ID %d) from Gitea: its runner Job is gone (the group's former scope %s)\n", o.Name, o.ID, t)
				continue
			}
			if err := runners.DeleteRunner(ctx, t, o.ID); err != nil {
				errs = append(errs, fmt.Errorf("cannot remove orphan runner %s from the group's former scope %s: %w", o.Name, t, err))
				continue
			}
			removed = append(removed, o.ID)
			rep.reaped++
			rep.orphans++
			g.log.Info("removed an orphan runner registration from the group's former scope", "runner", o.Name, "id", o.ID, "scope", t.String())
			s.event(ctx, g.rg, "Normal", ReasonRunnerReaped, fmt.Sprintf("Removed runner %s from Gitea (the group's former scope %s): its runner Job %s is gone and it ran no job", o.Name, t, o.Job))
		}
	}
	// Nothing of the group is left there: no registration of its, and no
	// runner Job of it that may still register there.
	left := slices.ContainsFunc(all, func(r gitea.Runner) bool {
		_, ok := runnerjob.JobOfRunner(g.rg, r.Name)
		return ok && !slices.Contains(removed, r.ID)
	})
	return !left && !kept && len(errs) == 0, errs
}
