package reaper

import (
	"context"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// FormerPlace is a place the group's runners registered in that no longer
// serves it: a group moved to another scope (org to repo, another org,
// ...) leaves its runners registered in the old one, where the new
// scope's listings never show them.
type FormerPlace struct {
	Target scope.Place
	// Regs is the place's runners listing.
	Regs []gitea.Runner
	// Jobs are the group's active runner Jobs whose runner registers
	// there; Silent names those registered nowhere long after they
	// started, where the scaler knew that they register there.
	Jobs   []*batchv1.Job
	Silent map[string]bool
	// Listed names the group's runner Jobs the pass listed.
	Listed map[string]bool
	// Why is why a runner there can take no work of the group.
	Why string
}

// ReapFormerPlace reaps the group's runners in a former place, as idle
// runners are reaped in its own:
//
//   - the runner of a runner Job of f.Jobs is disabled, then the
//     confirmation is read there, and the Job and the registration are
//     deleted unless it runs a job; one registered nowhere long after it
//     started (f.Silent) is reaped on the same confirmation;
//   - a registration of the group whose runner Job is gone is removed when
//     it is ephemeral, offline and runs no job (as orphans).
//
// done says nothing of the group is left there: no registration of its,
// and no runner Job of it that may still register there.
func (r Reaper) ReapFormerPlace(ctx context.Context, g Group, f FormerPlace) (done bool, errs []error) {
	t, all, regs := f.Target, f.Regs, ByRunnerName(f.Regs)
	// The runner Jobs to reap: registered there (disabled first), or
	// registered nowhere long after they started, where the scaler knew
	// that they register there.
	var reap []*batchv1.Job
	unregistered := map[string]bool{}
	for _, j := range f.Jobs {
		mine := regs[runnerjob.RunnerNameOf(j)]
		if len(mine) == 0 {
			if !f.Silent[j.Name] {
				continue
			}
			unregistered[j.Name] = true
		}
		if r.DryRun {
			fmt.Fprintf(r.Out, "  would reap runner Job %s: %s (%s)\n", j.Name, f.Why, t)
			continue
		}
		if err := r.Disable(ctx, t, mine); err != nil {
			errs = append(errs, fmt.Errorf("cannot disable the runner of %s in the group's former scope %s: %w", j.Name, t, err))
			continue
		}
		reap = append(reap, j)
	}
	// Registrations of the group whose runner Job is gone.
	var named []plan.Registration
	for _, reg := range all {
		if job, ok := runnerjob.JobOfRunner(g.RG, reg.Name); ok {
			named = append(named, plan.Registration{ID: reg.ID, Name: reg.Name, Job: job, Ephemeral: reg.Ephemeral, Online: reg.Online})
		}
	}
	orphans := plan.Orphans(named, f.Listed)
	var removed []int64
	kept := len(reap) < len(f.Jobs) // a Job not reaped may still register there
	if len(reap) > 0 || len(orphans) > 0 {
		c, err := r.Confirm(ctx, t)
		if err != nil {
			return false, append(errs, fmt.Errorf("cannot confirm that the runners in the group's former scope %s run no job, so none is deleted: %w", t, err))
		}
		for _, j := range reap {
			name := runnerjob.RunnerNameOf(j)
			if why := c.Keeps(name, unregistered[j.Name]); why != "" {
				g.Log.Info("a runner to reap in the group's former scope is left alone", "job", j.Name, "runner", name, "scope", t.String(), "why", why)
				kept = true
				continue
			}
			if gone, err := r.DeleteJob(ctx, j); err != nil || gone {
				if err != nil {
					errs = append(errs, fmt.Errorf("cannot delete runner Job %s: %w", j.Name, err))
					kept = true
				}
				continue
			}
			for _, reg := range regs[name] {
				if err := r.Runners.DeleteRunner(ctx, t, reg.ID); err != nil {
					errs = append(errs, fmt.Errorf("cannot remove runner %s from the group's former scope %s: %w", name, t, err))
					continue
				}
				removed = append(removed, reg.ID)
			}
			g.Tally.Reaped++
			g.Tally.DeletedJobs++
			g.Log.Info("reaped a runner of the group's former scope", "job", j.Name, "runner", name, "scope", t.String())
			g.Event(ctx, "Normal", v1alpha1.ReasonRunnerReaped, fmt.Sprintf("Reaped runner Job %s: %s (%s)", j.Name, f.Why, t))
		}
		for _, o := range orphans {
			if c.Keeps(o.Name, false) != "" {
				continue
			}
			if _, err := r.Kube.BatchV1().Jobs(g.RG.Namespace).Get(ctx, o.Job, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				if err != nil {
					errs = append(errs, fmt.Errorf("cannot check runner Job %s of registration %s: %w", o.Job, o.Name, err))
				}
				continue
			}
			if r.DryRun {
				fmt.Fprintf(r.Out, "  would remove runner %s (ID %d) from Gitea: its runner Job is gone (the group's former scope %s)\n", o.Name, o.ID, t)
				continue
			}
			if err := r.Runners.DeleteRunner(ctx, t, o.ID); err != nil {
				errs = append(errs, fmt.Errorf("cannot remove orphan runner %s from the group's former scope %s: %w", o.Name, t, err))
				continue
			}
			removed = append(removed, o.ID)
			g.Tally.Reaped++
			g.Tally.Orphans++
			g.Log.Info("removed an orphan runner registration from the group's former scope", "runner", o.Name, "id", o.ID, "scope", t.String())
			g.Event(ctx, "Normal", v1alpha1.ReasonRunnerReaped, fmt.Sprintf("Removed runner %s from Gitea (the group's former scope %s): its runner Job %s is gone and it ran no job", o.Name, t, o.Job))
		}
	}
	// Nothing of the group is left there: no registration of its, and no
	// runner Job of it that may still register there.
	left := slices.ContainsFunc(all, func(reg gitea.Runner) bool {
		_, ok := runnerjob.JobOfRunner(g.RG, reg.Name)
		return ok && !slices.Contains(removed, reg.ID)
	})
	return !left && !kept && len(errs) == 0, errs
}
