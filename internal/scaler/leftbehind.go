package scaler

import (
	"context"
	"fmt"
	"slices"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reaper"
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
func (s *Scaler) removeLeftBehind(ctx context.Context, g *groupRun, runners gitea.Runners, all []gitea.Runner, rep *reaper.Tally) []error {
	named := reaper.NamedRegistrations(all, runnerjob.OwnerTag(g.rg.UID))
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
	sw, err := s.reaperWith(runners).SweepLeftBehind(ctx, here, plan.LeftBehindInput{Regs: named, Recorded: recorded, Live: live}, reaper.LeftBehindActions{
		DryRun: func(r plan.Registration, group string) string {
			return fmt.Sprintf("RunnerGroup %s/%s that registered it is gone", ns, group)
		},
		Removed: func(r plan.Registration, group string) {
			rep.Reaped++
			rep.Orphans++
			g.log.Info("removed a registration of a deleted group", "runner", r.Name, "id", r.ID, "deletedGroup", group)
			s.event(ctx, g.rg, "Normal", v1alpha1.ReasonRunnerReaped, fmt.Sprintf("Removed runner %s from Gitea: RunnerGroup %s/%s that registered it is gone, and it ran no job", r.Name, ns, group))
		},
		Failed: func(r plan.Registration, group string, err error) {
			errs = append(errs, fmt.Errorf("cannot remove runner %s of deleted RunnerGroup %s/%s from Gitea: %w", r.Name, ns, group, err))
		},
	})
	if err != nil {
		return []error{fmt.Errorf("cannot confirm that the registrations of deleted groups run no job, so none is removed: %w", err)}
	}
	if len(sw.Forget) > 0 {
		if err := (ledger.Store{Client: s.kube}).Forget(ctx, ns, here, sw.Forget); err != nil {
			errs = append(errs, fmt.Errorf("cannot update the registrations ledger: %w", err))
		}
	}
	return errs
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
