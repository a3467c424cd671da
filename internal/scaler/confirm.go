package scaler

import (
	"context"
	"fmt"
	"io"
	"slices"

	"k8s.io/client-go/kubernetes"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
)

// confirmation is the one rule that every deletion of a runner Job whose
// runner may be registered, and every removal of a registration, goes
// through (issue 32): it is read afresh in the place the runner registers
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
type confirmation struct {
	place   gitea.Target
	running map[string]bool
	regs    map[string][]gitea.Runner
}

// confirm reads the confirmation of one place. An error means nothing
// there may be deleted.
func (r reaper) confirm(ctx context.Context, t gitea.Target) (*confirmation, error) {
	jobs, err := r.runners.InProgress(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("cannot read the running jobs of %s: %w", t, err)
	}
	all, err := r.runners.ListRunners(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("cannot read the runners of %s again: %w", t, err)
	}
	c := &confirmation{place: t, running: make(map[string]bool, len(jobs)), regs: byRunnerName(all)}
	for _, j := range jobs {
		c.running[j.RunnerName] = true
	}
	return c, nil
}

// keeps says why the runner of that name must be left alone, or "" when
// it may go. unregistered says the runner is to go for having no
// registration: one that has one now is kept.
func (c *confirmation) keeps(name string, unregistered bool) string {
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

// reaper deletes runner Jobs and removes registrations through one Gitea
// runners client (a group's API token, or the platform's for the sweep of
// deleted namespaces); a dry run only says what it would delete.
type reaper struct {
	runners gitea.Runners
	kube    kubernetes.Interface
	dryRun  bool
	out     io.Writer
}

// reaperWith is the pass's reaper through runners.
func (s *Scaler) reaperWith(runners gitea.Runners) reaper {
	return reaper{runners: runners, kube: s.kube, dryRun: s.cfg.DryRun, out: s.out}
}

// reaperOf is the pass's reaper through the group's Gitea client.
func (s *Scaler) reaperOf(g *groupRun) reaper {
	runners, _ := g.gitea.(gitea.Runners)
	return s.reaperWith(runners)
}
