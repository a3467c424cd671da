package reaper

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// RemoveOrphans deletes the group's ephemeral registrations at t (all,
// the pass's listing) whose runner Job is gone (plan.Orphans: not among
// listed, the runner Jobs the pass listed; busy names those whose runner
// runs a job), each after asking Gitea's sound listing which runners run
// a job and the API server for the Job by name: a runner that runs a job,
// or whose Job exists now, whatever the pass's listings said, is kept.
func (r Reaper) RemoveOrphans(ctx context.Context, g Group, t scope.Place, all []gitea.Runner, listed, busy map[string]bool) []error {
	var regs []plan.Registration
	for _, reg := range all {
		job, _ := runnerjob.JobOfRunner(g.RG, reg.Name)
		regs = append(regs, plan.Registration{ID: reg.ID, Name: reg.Name, Job: job, Ephemeral: reg.Ephemeral, Online: reg.Online, Busy: busy[job]})
	}
	orphans := plan.Orphans(regs, listed)
	if len(orphans) == 0 {
		return nil
	}
	conf, err := r.Confirm(ctx, t)
	if err != nil {
		return []error{fmt.Errorf("cannot confirm that the orphan runners run no job, so none is removed: %w", err)}
	}
	var errs []error
	// The Jobs a pass is creating, read once, at the first registration
	// whose Job is gone: the listing that named the orphans came first,
	// so every claim behind one of its registrations is saved by then.
	var coming map[string]bool
	comingRead := g.Coming == nil
	for _, o := range orphans {
		if conf.Keeps(o.Name, false) != "" {
			continue
		}
		_, err := r.Kube.BatchV1().Jobs(g.RG.Namespace).Get(ctx, o.Job, metav1.GetOptions{})
		switch {
		case err == nil:
			continue
		case !apierrors.IsNotFound(err):
			errs = append(errs, fmt.Errorf("cannot check runner Job %s of registration %s: %w", o.Job, o.Name, err))
			continue
		}
		if !comingRead {
			if coming, err = g.Coming(ctx); err != nil {
				return append(errs, fmt.Errorf("cannot tell which runner Jobs a pass is creating, so no orphan registration is removed: %w", err))
			}
			comingRead = true
		}
		if coming[o.Job] {
			g.Log.Debug("kept a registration whose runner Job a pass is creating", "runner", o.Name, "job", o.Job)
			continue
		}
		if r.DryRun {
			fmt.Fprintf(r.Out, "  would remove runner %s (ID %d) from Gitea: its runner Job is gone\n", o.Name, o.ID)
			continue
		}
		if err := r.Runners.DeleteRunner(ctx, t, o.ID); err != nil {
			errs = append(errs, fmt.Errorf("cannot remove orphan runner %s from Gitea: %w", o.Name, err))
			continue
		}
		g.Tally.Reaped++
		g.Tally.Orphans++
		g.Log.Info("removed an orphan runner registration", "runner", o.Name, "id", o.ID)
		g.Event(ctx, "Normal", v1alpha1.ReasonRunnerReaped, fmt.Sprintf("Removed runner %s from Gitea: it registered, but its runner Job %s is gone and it ran no job", o.Name, o.Job))
	}
	return errs
}
