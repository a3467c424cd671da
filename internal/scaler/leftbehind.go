package scaler

import (
	"context"
	"fmt"
	"slices"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/assign"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// recordOwner writes the group's owner tag in its namespace's ledger
// before it creates runner Jobs, so that once the group is deleted (or
// deleted and made again) the registrations its runners leave can be told
// apart from another namespace's or another install's, and removed. A
// ledger that cannot be written does not stop the runners: the group's
// registrations are then only never swept after it is deleted.
func (s *Scaler) recordOwner(ctx context.Context, g *groupRun) {
	p := placeOf(&g.rg.Spec)
	tag := runnerjob.OwnerTag(g.rg.UID)
	// The pass's reading of the ledger (one per namespace) usually has it.
	if read, err := s.ledger(ctx, g); err == nil && read[tag].Has(g.rg.Name, p) {
		return
	}
	if err := (ledger.Store{Client: s.kube}).Record(ctx, g.rg.Namespace, tag, g.rg.Name, p); err != nil {
		g.log.Warn("cannot record the group in the namespace's ledger; if it is deleted, its registrations are not removed from Gitea", "error", err)
	}
}

// removeLeftBehind removes the registrations that deleted groups of the
// group's namespace left in the group's Gitea scope (plan.LeftBehind): a
// runner that registered and never got a job stays in Gitea, offline, for
// ever once its group and its runner Job are gone. The ledger says which
// owner tags were this namespace's groups', the namespace's groups which
// of those are gone, and Gitea's sound in_progress listing that none of
// them runs a job. Tags with no registration left are forgotten.
func (s *Scaler) removeLeftBehind(ctx context.Context, g *groupRun, runners gitea.Runners, all []gitea.Runner, rep *lifecycleReport) []error {
	own := runnerjob.OwnerTag(g.rg.UID)
	var named []plan.Named
	for _, r := range all {
		group, _, tag, ok := runnerjob.SplitRunnerName(r.Name)
		if !ok || tag == own {
			continue
		}
		named = append(named, plan.Named{Group: group, Tag: tag,
			Registration: plan.Registration{ID: r.ID, Name: r.Name, Ephemeral: r.Ephemeral, Online: r.Online}})
	}
	if len(named) == 0 {
		return nil
	}
	ns := g.rg.Namespace
	// The ledger before the groups: a group recorded after the ledger was
	// read is not looked at, and one recorded before is listed if it lives.
	entries, err := s.ledger(ctx, g)
	if err != nil {
		return []error{fmt.Errorf("cannot read the registrations ledger: %w", err)}
	}
	here := placeOf(&g.rg.Spec)
	t := TargetOf(&g.rg.Spec)
	recorded := map[string]string{}
	for tag, e := range entries {
		if slices.Contains(e.Places(), here) {
			recorded[tag] = e.Group
		}
	}
	if len(recorded) == 0 {
		return nil
	}
	live, err := g.namespaces.groups.get(ctx, ns, func(ctx context.Context) (map[string]string, error) {
		return s.groupTags(ctx, ns)
	})
	if err != nil {
		return []error{fmt.Errorf("cannot list the RunnerGroups of namespace %s: %w", ns, err)}
	}
	in := plan.LeftBehindInput{Regs: named, Recorded: recorded, Live: live}
	remove, _ := plan.LeftBehind(in)
	if len(remove) > 0 {
		busy, err := s.runningRunners(ctx, runners, t)
		if err != nil {
			return []error{fmt.Errorf("cannot confirm that the registrations of deleted groups run no job, so none is removed: %w", err)}
		}
		for i := range in.Regs {
			in.Regs[i].Busy = busy[in.Regs[i].Name]
		}
		remove, _ = plan.LeftBehind(in)
	}
	var errs []error
	failed := map[string]bool{}
	for _, r := range remove {
		group, _, tag, _ := runnerjob.SplitRunnerName(r.Name)
		if s.cfg.DryRun {
			fmt.Fprintf(s.out, "  would remove runner %s (ID %d) from Gitea: RunnerGroup %s/%s that registered it is gone\n", r.Name, r.ID, ns, group)
			continue
		}
		if err := runners.DeleteRunner(ctx, t, r.ID); err != nil {
			errs = append(errs, fmt.Errorf("cannot remove runner %s of deleted RunnerGroup %s/%s from Gitea: %w", r.Name, ns, group, err))
			failed[tag] = true
			continue
		}
		rep.reaped++
		rep.orphans++
		g.log.Info("removed a registration of a deleted group", "runner", r.Name, "id", r.ID, "deletedGroup", group)
		s.event(ctx, g.rg, "Normal", ReasonRunnerReaped, fmt.Sprintf("Removed runner %s from Gitea: RunnerGroup %s/%s that registered it is gone, and it ran no job", r.Name, ns, group))
	}
	if s.cfg.DryRun {
		return errs
	}
	// What is left after the removals decides which tags to forget.
	var kept []plan.Named
	for _, r := range in.Regs {
		if !removed(remove, r.ID) || failed[r.Tag] {
			kept = append(kept, r)
		}
	}
	for i := range kept {
		kept[i].Online = true // what is left is not removed again here
	}
	_, forget := plan.LeftBehind(plan.LeftBehindInput{Regs: kept, Recorded: recorded, Live: live})
	if len(forget) > 0 {
		if err := (ledger.Store{Client: s.kube}).Forget(ctx, ns, here, forget); err != nil {
			errs = append(errs, fmt.Errorf("cannot update the registrations ledger: %w", err))
		}
	}
	return errs
}

// placeOf is the runners listing a group's runners register in now, with
// the Gitea URL normalised as runnerjob.ScopeOf does.
func placeOf(spec *v1alpha1.RunnerGroupSpec) ledger.Place {
	t := TargetOf(spec)
	return ledger.Place{URL: assign.Instance(spec.Gitea.URL), Scope: string(t.Scope), Owner: t.Owner, Repo: t.Repo}
}

// ledger is the pass's reading of the group's namespace's ledger.
func (s *Scaler) ledger(ctx context.Context, g *groupRun) (ledger.Entries, error) {
	ns := g.rg.Namespace
	return g.namespaces.ledgers.get(ctx, ns, func(ctx context.Context) (ledger.Entries, error) {
		return ledger.Store{Client: s.kube}.Load(ctx, ns)
	})
}

func removed(regs []plan.Registration, id int64) bool {
	for _, r := range regs {
		if r.ID == id {
			return true
		}
	}
	return false
}

// groupTags maps the name of every RunnerGroup of the namespace, whichever
// listener serves it, to its owner tag. A group that cannot be read maps to
// "": it lives, with a tag not known, so no tag recorded under its name is
// taken for a deleted group's.
func (s *Scaler) groupTags(ctx context.Context, namespace string) (map[string]string, error) {
	groups, broken, err := s.groups.List(ctx, namespace, "")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i := range groups {
		out[groups[i].Name] = runnerjob.OwnerTag(groups[i].UID)
	}
	for _, b := range broken {
		out[b.Name] = ""
	}
	return out, nil
}
