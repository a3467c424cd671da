package reaper

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// NamespaceState is what the API server says of a recorded namespace.
type NamespaceState int

const (
	NamespaceLive        NamespaceState = iota // the same namespace, not being deleted
	NamespaceTerminating                       // being deleted: its pods may still run
	NamespaceGone                              // 404, or another UID: every pod of it is gone
)

// NamespaceState asks the API server (not a loop's cache, which may lag)
// about a recorded namespace. Only a 404, or the name holding another
// namespace (another UID: deleted and made again), means every pod of the
// recorded one is gone, so none of its runners can run again. A namespace
// being deleted may still have runner pods finishing their jobs; one that
// exists and is no longer served may have runners that run.
func (r Reaper) NamespaceState(ctx context.Context, name string, uid types.UID) (NamespaceState, error) {
	n, err := r.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return NamespaceGone, nil
	case err != nil:
		return NamespaceLive, err
	case n.UID != uid:
		return NamespaceGone, nil
	case n.DeletionTimestamp != nil:
		return NamespaceTerminating, nil
	}
	return NamespaceLive, nil
}

// SweepNamespace removes, with the platform's token (r.Runners, for the
// Gitea at home), the registrations a gone namespace's recorded groups
// left, place by place, as a deleted group's are removed
// (SweepLeftBehind, with no group living): ephemeral, offline, running no
// job (Gitea's in_progress jobs read soundly), named with a recorded owner
// tag under its recorded group's name. A place on another Gitea is left
// alone (and reported): the platform's token goes to home alone. It
// returns the edit of the mirror's record under key: the tags of which
// nothing is left at a place are forgotten there, and the record goes once
// no tag is left.
func (r Reaper) SweepNamespace(ctx context.Context, log *slog.Logger, home, key string, c ledger.Copy, rep *passreport.DeletedNamespacesReport) func(ledger.Copies) bool {
	var places []scope.Place
	for _, e := range c.Groups {
		for _, p := range e.Places() {
			if !slices.Contains(places, p) {
				places = append(places, p)
			}
		}
	}
	slices.SortFunc(places, scope.Compare)
	left := maps.Clone(c.Groups)
	why := map[string]string{}
	type forgotten struct {
		p    scope.Place
		tags []string
	}
	var forgets []forgotten
	for _, p := range places {
		recorded := map[string]string{}
		for tag, e := range c.Groups {
			if slices.Contains(e.Places(), p) {
				recorded[tag] = e.Group
			}
		}
		mark := func(reason string) {
			for tag := range recorded {
				why[tag] = reason
			}
		}
		if p.URL() != home {
			mark(passreport.LeftOtherGitea)
			continue
		}
		all, err := r.Runners.ListRunners(ctx, p)
		if err != nil {
			log.Error("cannot list the runners of a deleted namespace's groups", "scope", p.String(), "error", err)
			mark(passreport.LeftFailed)
			continue
		}
		sw, err := r.SweepLeftBehind(ctx, p, plan.LeftBehindInput{Regs: NamedRegistrations(all, ""), Recorded: recorded}, LeftBehindActions{
			DryRun: func(r plan.Registration, group string) string {
				return fmt.Sprintf("namespace %s of RunnerGroup %s that registered it is gone", c.Namespace, group)
			},
			Removed: func(r plan.Registration, group string) {
				rep.Removed++
				log.Info("removed a registration of a deleted namespace", "runner", r.Name, "id", r.ID, "deletedGroup", group, "scope", p.String())
			},
			Failed: func(r plan.Registration, _ string, err error) {
				log.Error("cannot remove a runner of a deleted namespace from Gitea", "runner", r.Name, "id", r.ID, "error", err)
			},
		})
		if err != nil {
			log.Error("cannot confirm that the runners of a deleted namespace run no job, so none is removed", "scope", p.String(), "error", err)
			mark(passreport.LeftFailed)
			continue
		}
		if r.DryRun {
			continue
		}
		left.Forget(p, sw.Forget)
		forgets = append(forgets, forgotten{p, sw.Forget})
		for tag := range recorded {
			switch {
			case sw.Failed[tag]:
				why[tag] = passreport.LeftFailed
			case !slices.Contains(sw.Forget, tag):
				why[tag] = passreport.LeftRunning
			}
		}
	}
	if r.DryRun {
		return nil
	}
	for tag := range left {
		rep.Left[why[tag]]++
	}
	return func(cs ledger.Copies) bool {
		cur, ok := cs[key]
		if !ok {
			return false
		}
		changed := false
		for _, f := range forgets {
			changed = cur.Groups.Forget(f.p, f.tags) || changed
		}
		if len(cur.Groups) == 0 {
			delete(cs, key)
			return true
		}
		return changed
	}
}
