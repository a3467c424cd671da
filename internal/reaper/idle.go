package reaper

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// Unable is a runner Job whose runner can take no work, and why.
type Unable struct {
	Job *batchv1.Job
	Why string
	// Unregistered says it goes for having no registration: one that has
	// one when the confirmation is read is kept.
	Unregistered bool
}

// ReapRunners reaps, safely, the idle surplus runners (idle, idle for at
// least idleFor) and the runners that can take no work (unable: disabled
// by a reap that stopped after the disable, or unregistered). In each
// place the runners register in, it first makes each idle one unable to
// take work in Gitea (disabled, or deleted where Gitea cannot disable),
// then reads the confirmation, and deletes the runner Job, and then the
// registration, of each it does not keep. A runner that took a job in
// between is left alone: ephemeral, it exits after that job, and being
// disabled it takes no other. When the confirmation cannot be read,
// nothing there is deleted; a runner left disabled is no supply, and the
// next pass reaps it.
func (r Reaper) ReapRunners(ctx context.Context, g Group, idleFor time.Duration, idle []*batchv1.Job, unable []Unable) []error {
	if len(idle) == 0 && len(unable) == 0 {
		return nil
	}
	if r.DryRun {
		for _, j := range idle {
			fmt.Fprintf(r.Out, "  would reap idle runner Job %s (idle for at least %s beyond the demand)\n", j.Name, idleFor)
		}
		for _, u := range unable {
			fmt.Fprintf(r.Out, "  would reap runner Job %s: %s\n", u.Job.Name, u.Why)
		}
		return nil
	}
	type candidate struct {
		Unable
		idle bool
		regs []gitea.Runner
	}
	var errs []error
	var places []scope.Place
	cands := map[scope.Place][]candidate{}
	add := func(p scope.Place, c candidate) {
		if _, seen := cands[p]; !seen {
			places = append(places, p)
		}
		cands[p] = append(cands[p], c)
	}
	for _, j := range idle {
		p, regs := g.Where(ctx, j)
		if err := r.Disable(ctx, p, regs); err != nil {
			errs = append(errs, fmt.Errorf("cannot disable the runner of %s in Gitea: %w", j.Name, err))
			continue
		}
		add(p, candidate{Unable: Unable{Job: j}, idle: true, regs: regs})
	}
	for _, u := range unable {
		p, regs := g.Where(ctx, u.Job)
		add(p, candidate{Unable: u, regs: regs})
	}
	for _, p := range places {
		todo := cands[p]
		conf, err := r.Confirm(ctx, p)
		if err != nil {
			errs = append(errs, fmt.Errorf("cannot confirm that the runners to reap run no job, so none is deleted: %w", err))
			continue
		}
		for _, c := range todo {
			j := c.Job
			runnerName := runnerjob.RunnerNameOf(j)
			if why := conf.Keeps(runnerName, c.Unregistered); why != "" {
				g.Log.Info("a runner to reap is left alone", "job", j.Name, "runner", runnerName, "why", why)
				continue
			}
			if gone, err := r.DeleteJob(ctx, j); err != nil || gone {
				if err != nil {
					errs = append(errs, fmt.Errorf("cannot delete runner Job %s: %w", j.Name, err))
				}
				continue
			}
			for _, reg := range c.regs {
				if err := r.Runners.DeleteRunner(ctx, p, reg.ID); err != nil {
					errs = append(errs, fmt.Errorf("cannot remove runner %s from Gitea: %w", runnerName, err))
				}
			}
			g.Tally.Reaped++
			g.Tally.DeletedJobs++
			if c.idle {
				g.Tally.Idle--
				g.Log.Info("reaped an idle runner", "job", j.Name, "runner", runnerName)
				g.Event(ctx, "Normal", v1alpha1.ReasonRunnerReaped, fmt.Sprintf("Reaped idle runner Job %s: idle for at least %s while the group had more runners than queued jobs", j.Name, idleFor))
				continue
			}
			g.Log.Info("reaped a runner that can take no work", "job", j.Name, "runner", runnerName, "why", c.Why)
			g.Event(ctx, "Normal", v1alpha1.ReasonRunnerReaped, fmt.Sprintf("Reaped runner Job %s: %s", j.Name, c.Why))
		}
	}
	return errs
}
