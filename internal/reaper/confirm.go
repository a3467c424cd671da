package reaper

import (
	"context"
	"fmt"
	"slices"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// Confirmation is the one rule that every deletion of a runner Job whose
// runner may be registered, and every removal of a registration, goes
// through: it is read afresh in the place the runner registers
// in, just before the deletion and after any disable, and says which
// runners are left alone. Any doubt keeps the runner.
//
// It reads two things, in this order:
//
//   - Gitea's in_progress jobs of the place, read soundly (InProgress): a
//     runner named by one runs a job;
//   - the place's registrations: a runner Gitea calls busy may still be
//     at work on a job no listing shows (cleaning up after a cancelled job,
//     Gitea 1.27's cancelling state), and one that has a registration
//     after all is not unregistered. This reading is the second of the
//     pass: a runner taken for unregistered is missing from both the pass's
//     listing and this one, so one listing that missed a live runner (the
//     listing is paged by offset and reorders as runners report) deletes
//     nothing.
type Confirmation struct {
	place   scope.Place
	running map[string]bool
	regs    map[string][]gitea.Runner
}

// Confirm reads the confirmation of one place. An error means nothing
// there may be deleted.
func (r Reaper) Confirm(ctx context.Context, t scope.Place) (*Confirmation, error) {
	jobs, err := r.Runners.InProgress(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("cannot read the running jobs of %s: %w", t, err)
	}
	all, err := r.Runners.ListRunners(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("cannot read the runners of %s again: %w", t, err)
	}
	c := &Confirmation{place: t, running: make(map[string]bool, len(jobs)), regs: ByRunnerName(all)}
	for _, j := range jobs {
		c.running[j.RunnerName] = true
	}
	return c, nil
}

// Keeps says why the runner of that name must be left alone, or "" when
// it may go. unregistered says the runner is to go for having no
// registration: one that has one now is kept.
func (c *Confirmation) Keeps(name string, unregistered bool) string {
	regs := c.regs[name]
	switch {
	case c.running[name]:
		return "it runs a job"
	case slices.ContainsFunc(regs, func(r gitea.Runner) bool { return r.Busy }):
		return "Gitea calls it busy (it may be cleaning up after a cancelled job)"
	case unregistered && len(regs) > 0:
		return "it is registered after all"
	}
	return ""
}

// ByRunnerName groups registrations by runner name.
func ByRunnerName(all []gitea.Runner) map[string][]gitea.Runner {
	out := map[string][]gitea.Runner{}
	for _, r := range all {
		out[r.Name] = append(out[r.Name], r)
	}
	return out
}
