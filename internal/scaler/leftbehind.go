package scaler

import (
	"context"
	"fmt"
	"slices"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// recordOwner writes the group's owner tag in its namespace's ledger
// before it creates runner Jobs, so that once the group is deleted (or
// deleted and made again) the registrations its runners leave can be told
// apart from another namespace's or another install's, and removed. A
// ledger that cannot be written does not stop the runners: the group's
// registrations are then only never swept after it is deleted.
func (s *Scaler) recordOwner(ctx context.Context, g *groupRun) {
	p := g.registersIn()
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
	named := namedRegistrations(all, runnerjob.OwnerTag(g.rg.UID))
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
	here := g.registersIn()
	t := targetOf(here)
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
		return s.groupTags(ctx, ns, s.groups.List)
	})
	if err != nil {
		return []error{fmt.Errorf("cannot list the RunnerGroups of namespace %s: %w", ns, err)}
	}
	// A loop's groups come from a watch cache, which may not hold yet a
	// group made a moment ago: its tag, recorded before its first runner,
	// would read as a deleted group's, and its runners' registrations
	// (offline until they first poll) be removed. So before anything is
	// removed or forgotten, the API server is asked (once per namespace
	// and pass), and only what is gone there too is swept.
	if fresh, ok := s.groups.(freshLister); ok {
		if remove, forget := plan.LeftBehind(plan.LeftBehindInput{Regs: named, Recorded: recorded, Live: live}); len(remove) > 0 || len(forget) > 0 {
			live, err = g.namespaces.freshGroups.get(ctx, ns, func(ctx context.Context) (map[string]string, error) {
				return s.groupTags(ctx, ns, fresh.ListFresh)
			})
			if err != nil {
				return []error{fmt.Errorf("cannot confirm with the API server which RunnerGroups of namespace %s are gone, so no registration of a deleted group is removed: %w", ns, err)}
			}
		}
	}
	var errs []error
	sw, err := s.reaperWith(runners).sweepLeftBehind(ctx, t, plan.LeftBehindInput{Regs: named, Recorded: recorded, Live: live}, leftBehindActions{
		dryRun: func(r plan.Registration, group string) string {
			return fmt.Sprintf("RunnerGroup %s/%s that registered it is gone", ns, group)
		},
		removed: func(r plan.Registration, group string) {
			rep.reaped++
			rep.orphans++
			g.log.Info("removed a registration of a deleted group", "runner", r.Name, "id", r.ID, "deletedGroup", group)
			s.event(ctx, g.rg, "Normal", v1alpha1.ReasonRunnerReaped, fmt.Sprintf("Removed runner %s from Gitea: RunnerGroup %s/%s that registered it is gone, and it ran no job", r.Name, ns, group))
		},
		failed: func(r plan.Registration, group string, err error) {
			errs = append(errs, fmt.Errorf("cannot remove runner %s of deleted RunnerGroup %s/%s from Gitea: %w", r.Name, ns, group, err))
		},
	})
	if err != nil {
		return []error{fmt.Errorf("cannot confirm that the registrations of deleted groups run no job, so none is removed: %w", err)}
	}
	if len(sw.forget) > 0 {
		if err := (ledger.Store{Client: s.kube}).Forget(ctx, ns, here, sw.forget); err != nil {
			errs = append(errs, fmt.Errorf("cannot update the registrations ledger: %w", err))
		}
	}
	return errs
}

// placeOf is the runners listing a group's runners register in now, with
// the Gitea URL normalised as runnerjob.ScopeOf does.
func placeOf(spec *v1alpha1.RunnerGroupSpec) ledger.Place {
	return placeAt(spec.Gitea.URL, TargetOf(spec))
}

// ledger is the pass's reading of the group's namespace's ledger: from the
// pass's list of the namespace's state ConfigMaps (preloadLedger) when it
// holds it, or else with a read of its own. A ledger the list could not
// hold (none yet, or one written before it had the RunnerGroup label) is
// then made one it holds, once, so that no later pass reads it on its own
// (one request per namespace and pass saved; not in a dry run).
func (s *Scaler) ledger(ctx context.Context, g *groupRun) (ledger.Entries, error) {
	ns := g.rg.Namespace
	return g.namespaces.ledgers.get(ctx, ns, func(ctx context.Context) (ledger.Entries, error) {
		store := ledger.Store{Client: s.kube}
		entries, listable, err := store.Load(ctx, ns)
		if err == nil && !listable && !s.cfg.DryRun {
			if err := store.MakeListable(ctx, ns); err != nil {
				g.log.Debug("cannot label the registrations ledger; passes read it on their own", "error", err)
			}
		}
		return entries, err
	})
}

// preloadLedger gives the pass its reading of a namespace's ledger from
// the list (or watch cache) of its state ConfigMaps, which holds the
// ledger by its labels. A list without it leaves the reading to ledger.
func preloadLedger(ctx context.Context, groups []*groupRun, listed state.Listed) {
	entries, ok := ledger.FromList(listed)
	if !ok || len(groups) == 0 {
		return
	}
	_, _ = groups[0].namespaces.ledgers.get(ctx, groups[0].rg.Namespace, func(context.Context) (ledger.Entries, error) {
		return entries, nil
	})
}

// namedRegistrations is the registrations of a runners listing whose
// names the scaler made (group, suffix, owner tag), but those of the tag
// skip (a living group's own).
func namedRegistrations(all []gitea.Runner, skip string) []plan.Named {
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

// leftBehindActions is what a caller of sweepLeftBehind says and counts:
// the reason a dry run prints for a registration it would remove, and
// what to do once one is removed or its removal failed.
type leftBehindActions struct {
	dryRun  func(r plan.Registration, group string) string
	removed func(r plan.Registration, group string)
	failed  func(r plan.Registration, group string, err error)
}

// leftBehindSweep is what sweepLeftBehind did at one place: the tags of
// which a removal failed, and those of which nothing is left there (to
// forget; none in a dry run).
type leftBehindSweep struct {
	failed map[string]bool
	forget []string
}

// sweepLeftBehind removes at t the registrations plan.LeftBehind picks
// from in, once Gitea's in_progress jobs, read soundly, confirm that none
// of them runs a job: the one mechanism for the registrations of deleted
// groups and of deleted namespaces. An error means the confirmation
// failed and nothing was removed.
func (rp reaper) sweepLeftBehind(ctx context.Context, t gitea.Target, in plan.LeftBehindInput, do leftBehindActions) (leftBehindSweep, error) {
	sw := leftBehindSweep{failed: map[string]bool{}}
	remove, _ := plan.LeftBehind(in)
	if len(remove) > 0 {
		conf, err := rp.confirm(ctx, t)
		if err != nil {
			return sw, err
		}
		for i := range in.Regs {
			in.Regs[i].Busy = conf.keeps(in.Regs[i].Name, false) != ""
		}
		remove, _ = plan.LeftBehind(in)
	}
	for _, r := range remove {
		group, _, tag, _ := runnerjob.SplitRunnerName(r.Name)
		if rp.dryRun {
			fmt.Fprintf(rp.out, "  would remove runner %s (ID %d) from Gitea: %s\n", r.Name, r.ID, do.dryRun(r, group))
			continue
		}
		if err := rp.runners.DeleteRunner(ctx, t, r.ID); err != nil {
			do.failed(r, group, err)
			sw.failed[tag] = true
			continue
		}
		do.removed(r, group)
	}
	if rp.dryRun {
		return sw, nil
	}
	// What is left after the removals decides which tags to forget.
	var kept []plan.Named
	for _, r := range in.Regs {
		if !removed(remove, r.ID) || sw.failed[r.Tag] {
			r.Online = true // what is left is not removed again here
			kept = append(kept, r)
		}
	}
	_, sw.forget = plan.LeftBehind(plan.LeftBehindInput{Regs: kept, Recorded: in.Recorded, Live: in.Live})
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

// freshLister is a GroupClient whose List may serve from a watch cache
// (runnergroups.Watched): ListFresh asks the API server.
type freshLister interface {
	ListFresh(ctx context.Context, namespace, selector string) ([]v1alpha1.RunnerGroup, []runnergroups.Broken, error)
}

// A loop's GroupClient reads the API server when the sweep asks.
var _ freshLister = (*runnergroups.Watched)(nil)

// groupTags maps the name of every RunnerGroup of the namespace, whichever
// listener serves it, to its owner tag, as list reads them. A group that
// cannot be read maps to "": it lives, with a tag not known, so no tag
// recorded under its name is taken for a deleted group's.
func (s *Scaler) groupTags(ctx context.Context, namespace string, list func(ctx context.Context, namespace, selector string) ([]v1alpha1.RunnerGroup, []runnergroups.Broken, error)) (map[string]string, error) {
	groups, broken, err := list(ctx, namespace, "")
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
