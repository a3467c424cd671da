// Package selection is which RunnerGroups a listener serves: its
// namespaces and its selectors (package selector reads one selector), and
// the one listing that the scaler's pass and the read-only commands
// (status, why) share, so that they show exactly the groups `run` with the
// same flags serves.
package selection

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/selector"
)

// Rule is a listener's choice of RunnerGroups: those of its namespaces
// (none: every namespace) that its selector takes and no exclude selector
// leaves to another listener. Make it with New.
type Rule struct {
	namespaces []string
	include    labels.Selector
	excludes   []labels.Selector
}

// New parses a listener's selectors, in either form package selector
// reads.
func New(namespaces []string, include string, excludes []string) (Rule, error) {
	r := Rule{namespaces: namespaces}
	var err error
	if r.include, err = selector.Parse(include); err != nil {
		return Rule{}, fmt.Errorf("invalid selector %q: %w", include, err)
	}
	for _, raw := range excludes {
		sel, err := selector.ParseExclude(raw)
		if err != nil {
			return Rule{}, fmt.Errorf("invalid exclude selector %q: %w", raw, err)
		}
		r.excludes = append(r.excludes, sel)
	}
	return r, nil
}

// Serves says whether the listener serves a group in namespace with
// labels l.
func (r Rule) Serves(namespace string, l map[string]string) bool {
	if len(r.namespaces) > 0 && !slices.Contains(r.namespaces, namespace) {
		return false
	}
	return r.include.Matches(labels.Set(l)) && !r.excluded(l)
}

// ServesEverything is true when the listener serves every group of the
// cluster.
func (r Rule) ServesEverything() bool {
	return len(r.namespaces) == 0 && r.include.Empty() && len(r.excludes) == 0
}

// excluded says whether an exclude selector leaves a group with labels l
// to another listener.
func (r Rule) excluded(l map[string]string) bool {
	for _, sel := range r.excludes {
		if sel.Matches(labels.Set(l)) {
			return true
		}
	}
	return false
}

// Lister lists RunnerGroups: runnergroups.Client, or a loop's watch cache.
type Lister interface {
	List(ctx context.Context, namespace, selector string) ([]v1alpha1.RunnerGroup, []runnergroups.Broken, error)
}

// sharedLister is a Lister that lists without copying: a loop's watch
// cache (runnergroups.Watched).
type sharedLister interface {
	ListShared(ctx context.Context, namespace, selector string) ([]*v1alpha1.RunnerGroup, []runnergroups.Broken, error)
}

// ListShared lists RunnerGroups by pointer, and without a copy where the
// Lister can. Whoever holds them never changes them (a pass writes a
// group's status on a copy), so the objects of a loop's cache are safe in
// its hands.
func ListShared(ctx context.Context, groups Lister, namespace, selector string) ([]*v1alpha1.RunnerGroup, []runnergroups.Broken, error) {
	if l, ok := groups.(sharedLister); ok {
		return l.ListShared(ctx, namespace, selector)
	}
	listed, broken, err := groups.List(ctx, namespace, selector)
	return pointers(listed), broken, err
}

// Listed are the groups a listener serves, as List read them. A pass
// holds them by pointer into the one listing: at 5,000 groups each copy
// of the list was 11 MB of a pass's garbage.
type Listed struct {
	// Served are the selected RunnerGroups of the served namespaces,
	// sorted by namespace and name; Broken those that could not be read;
	// FailedNamespaces the namespaces that could not be listed.
	Served           []*v1alpha1.RunnerGroup
	Broken           []runnergroups.Broken
	FailedNamespaces []string
	// All is every RunnerGroup of the cluster when one list read them
	// (the assignment rule's), nil when only the served namespaces were
	// listed, or when Served is every group.
	All []*v1alpha1.RunnerGroup
}

// List lists the RunnerGroups r serves, and writes nothing. It reads every
// group of the cluster with one list, which the assignment rule needs
// anyway, and keeps those r serves: one request instead of one per served
// namespace and one more. Where that list is refused (a read-only
// command's user may list only some namespaces) it lists each served
// namespace, and a namespace that cannot be listed (its Role was deleted)
// does not stop the others. When all namespaces are served, the refused
// list is the error: nothing can be served. log hears of the fallback.
func List(ctx context.Context, groups Lister, r Rule, log *slog.Logger) (Listed, error) {
	all, broken, err := ListShared(ctx, groups, metav1.NamespaceAll, "")
	switch {
	case err == nil && r.ServesEverything():
		return Listed{Served: sorted(all), Broken: broken}, nil
	case err == nil:
		out := Listed{All: all}
		for _, rg := range all {
			if r.Serves(rg.Namespace, rg.Labels) {
				out.Served = append(out.Served, rg)
			}
		}
		for _, b := range broken {
			if r.Serves(b.Namespace, b.Labels) {
				out.Broken = append(out.Broken, b)
			}
		}
		out.Served = sorted(out.Served)
		return out, nil
	case len(r.namespaces) == 0:
		return Listed{}, err
	}
	log.Debug("cannot list every RunnerGroup; listing those of each served namespace", "error", err)
	var out Listed
	for _, ns := range r.namespaces {
		listed, b, err := ListShared(ctx, groups, ns, r.include.String())
		if err != nil {
			log.Error("cannot list RunnerGroups; serving the other namespaces", "namespace", ns, "error", err)
			out.FailedNamespaces = append(out.FailedNamespaces, ns)
			continue
		}
		for _, rg := range b {
			if !r.excluded(rg.Labels) {
				out.Broken = append(out.Broken, rg)
			}
		}
		for _, rg := range listed {
			if !r.excluded(rg.Labels) {
				out.Served = append(out.Served, rg)
			}
		}
	}
	out.Served = sorted(out.Served)
	return out, nil
}

// pointers points at each of groups; never nil, so that an empty listing
// still says it was listed.
func pointers(groups []v1alpha1.RunnerGroup) []*v1alpha1.RunnerGroup {
	out := make([]*v1alpha1.RunnerGroup, len(groups))
	for i := range groups {
		out[i] = &groups[i]
	}
	return out
}

// sorted sorts groups by namespace and name.
func sorted(groups []*v1alpha1.RunnerGroup) []*v1alpha1.RunnerGroup {
	sort.Slice(groups, func(i, j int) bool {
		if groups[i].Namespace != groups[j].Namespace {
			return groups[i].Namespace < groups[j].Namespace
		}
		return groups[i].Name < groups[j].Name
	})
	return groups
}
