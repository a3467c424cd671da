package reaper

import (
	"context"
	"fmt"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// NamedRegistrations is the registrations of a runners listing whose
// names the scaler made (group, suffix, owner tag), but those of the tag
// skip (a living group's own).
func NamedRegistrations(all []gitea.Runner, skip string) []plan.Named {
	var named []plan.Named
	for _, r := range all {
		group, _, tag, ok := runnerjob.SplitRunnerName(r.Name)
		if !ok || tag == skip {
			continue
		}
		named = append(named, plan.Named{Group: group, Tag: tag,
			Registration: plan.Registration{ID: r.ID, Name: r.Name, Ephemeral: r.Ephemeral, Online: r.Online}})
	}
	return named
}

// LeftBehindActions is what a caller of SweepLeftBehind says and counts:
// the reason a dry run prints for a registration it would remove, and
// what to do once one is removed or its removal failed.
type LeftBehindActions struct {
	DryRun  func(r plan.Registration, group string) string
	Removed func(r plan.Registration, group string)
	Failed  func(r plan.Registration, group string, err error)
}

// LeftBehindSweep is what SweepLeftBehind did at one place: the tags of
// which a removal failed, and those of which nothing is left there (to
// forget; none in a dry run).
type LeftBehindSweep struct {
	Failed map[string]bool
	Forget []string
}

// SweepLeftBehind removes at t the registrations plan.LeftBehind picks
// from in, once Gitea's in_progress jobs, read soundly, confirm that none
// of them runs a job: the one mechanism for the registrations of deleted
// groups and of deleted namespaces. An error means the confirmation
// failed and nothing was removed.
func (r Reaper) SweepLeftBehind(ctx context.Context, t scope.Place, in plan.LeftBehindInput, do LeftBehindActions) (LeftBehindSweep, error) {
	sw := LeftBehindSweep{Failed: map[string]bool{}}
	remove, _ := plan.LeftBehind(in)
	if len(remove) > 0 {
		conf, err := r.Confirm(ctx, t)
		if err != nil {
			return sw, err
		}
		for i := range in.Regs {
			in.Regs[i].Busy = conf.Keeps(in.Regs[i].Name, false) != ""
		}
		remove, _ = plan.LeftBehind(in)
	}
	for _, reg := range remove {
		group, _, tag, _ := runnerjob.SplitRunnerName(reg.Name)
		if r.DryRun {
			fmt.Fprintf(r.Out, "  would remove runner %s (ID %d) from Gitea: %s\n", reg.Name, reg.ID, do.DryRun(reg, group))
			continue
		}
		if err := r.Runners.DeleteRunner(ctx, t, reg.ID); err != nil {
			do.Failed(reg, group, err)
			sw.Failed[tag] = true
			continue
		}
		do.Removed(reg, group)
	}
	if r.DryRun {
		return sw, nil
	}
	// What is left after the removals decides which tags to forget.
	var kept []plan.Named
	for _, reg := range in.Regs {
		if !removed(remove, reg.ID) || sw.Failed[reg.Tag] {
			reg.Online = true // what is left is not removed again here
			kept = append(kept, reg)
		}
	}
	_, sw.Forget = plan.LeftBehind(plan.LeftBehindInput{Regs: kept, Recorded: in.Recorded, Live: in.Live})
	return sw, nil
}

func removed(regs []plan.Registration, id int64) bool {
	for _, r := range regs {
		if r.ID == id {
			return true
		}
	}
	return false
}
