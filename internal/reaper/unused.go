package reaper

import (
	"context"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// RemoveUnused reports the completed runner Jobs whose runner never took
// a job, and removes the registrations they left. Gitea deletes an
// ephemeral runner's registration as soon as its task is done (and before
// the runner can exit), so the registration of a runner whose Job
// completed, when no running job names it and Gitea does not call it
// busy, says that the runner exited by itself without a job: a pod that
// cannot run the runner's work (in the DinD images, s6 ends the pod with
// exit code 0 when the Docker daemon dies). Each such Job gets a Warning
// event and a place in the tally, whose condition tells the group; with
// its registration removed it is told once, and Gitea keeps no runner
// that will never ask for work. A failed Job is left alone: Kubernetes
// already says it failed, and a drain ends a runner that way too.
func (r Reaper) RemoveUnused(ctx context.Context, g Group, ended []*batchv1.Job) []error {
	byPlace := map[scope.Place][]*batchv1.Job{}
	regs := map[string][]gitea.Runner{}
	for _, j := range ended {
		if !runnerjob.Completed(j) {
			continue
		}
		p, mine := g.Where(ctx, j)
		if len(mine) == 0 || slices.ContainsFunc(mine, func(reg gitea.Runner) bool { return reg.Busy || !reg.Ephemeral }) {
			continue
		}
		byPlace[p] = append(byPlace[p], j)
		regs[j.Name] = mine
	}
	var errs []error
	for p, jobs := range byPlace {
		conf, err := r.Confirm(ctx, p)
		if err != nil {
			errs = append(errs, fmt.Errorf("cannot confirm that the runners of completed runner Jobs run no job, so none is reported: %w", err))
			continue
		}
		for _, j := range jobs {
			name := runnerjob.RunnerNameOf(j)
			if conf.Keeps(name, false) != "" {
				continue
			}
			if r.DryRun {
				fmt.Fprintf(r.Out, "  would remove runner %s from Gitea: its runner Job %s completed without its runner taking a job\n", name, j.Name)
				g.Tally.Unused = append(g.Tally.Unused, j.Name)
				continue
			}
			if err := r.removeAll(ctx, p, regs[j.Name]); err != nil {
				errs = append(errs, fmt.Errorf("cannot remove runner %s of completed runner Job %s from Gitea: %w", name, j.Name, err))
				continue
			}
			g.Tally.Unused = append(g.Tally.Unused, j.Name)
			g.Log.Warn("a runner Job completed without its runner taking a job; its registration was removed", "job", j.Name, "runner", name)
			g.Event(ctx, "Warning", v1alpha1.ReasonRunnerEndedWithoutJob, fmt.Sprintf(
				"runner Job %s completed without its runner taking a job (Gitea still listed its registration, which it removes once a runner has run its job); its pod's log says why: kubectl logs job/%s", j.Name, j.Name))
		}
	}
	return errs
}

// removeAll removes every registration of one runner.
func (r Reaper) removeAll(ctx context.Context, p scope.Place, regs []gitea.Runner) error {
	for _, reg := range regs {
		if err := r.Runners.DeleteRunner(ctx, p, reg.ID); err != nil {
			return err
		}
	}
	return nil
}
