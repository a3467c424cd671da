package scaler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
)

// errNotMadeByNew is what a zero Scaler says instead of panicking.
var errNotMadeByNew = errors.New("scaler: this Scaler was not made by scaler.New")

// Summary says how a pass went.
type Summary struct {
	// Groups counts the RunnerGroups served.
	Groups int
	// Failed names the groups that failed ("namespace/name").
	Failed []string
	// Created counts the runner Jobs created.
	Created int
}

// Err is non-nil when any group failed, so the pass's Job fails visibly in
// the CronJob's history.
func (s Summary) Err() error {
	if len(s.Failed) == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d RunnerGroups failed: %s", len(s.Failed), s.Groups, strings.Join(s.Failed, ", "))
}

// Pass serves every selected RunnerGroup once. It returns an error only when
// it could not find the groups at all; a group that fails is reported in the
// Summary and on the group's conditions, and the others go on.
func (s *Scaler) Pass(ctx context.Context) (Summary, error) {
	if s.groups == nil {
		return Summary{}, errNotMadeByNew
	}
	groups, broken, err := s.listGroups(ctx)
	if err != nil {
		return Summary{}, err
	}
	sum := Summary{Groups: len(groups) + len(broken)}
	for _, b := range broken {
		s.log.Error("cannot read RunnerGroup", "runnergroup", b.Namespace+"/"+b.Name, "error", b.Err)
		sum.Failed = append(sum.Failed, b.Namespace+"/"+b.Name)
	}

	// Validate every group first, so the assignment rule knows which of the
	// groups this pass serves can serve, before any of them plans.
	runs := make([]*groupRun, len(groups))
	s.forEachGroup(len(groups), func(i int) { runs[i] = s.prepare(ctx, &groups[i]) })
	rule := s.assignment(ctx, groups, runs)
	var mu sync.Mutex
	s.forEachGroup(len(groups), func(i int) {
		runs[i].rule = rule
		created, err := s.finish(ctx, runs[i])
		mu.Lock()
		defer mu.Unlock()
		sum.Created += created
		if err != nil {
			sum.Failed = append(sum.Failed, groupKey(runs[i].rg))
		}
	})
	sort.Strings(sum.Failed)
	return sum, nil
}

// listGroups returns the selected RunnerGroups of the served namespaces,
// sorted by namespace and name, and those that could not be read.
func (s *Scaler) listGroups(ctx context.Context) ([]v1alpha1.RunnerGroup, []runnergroups.Broken, error) {
	namespaces := s.cfg.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	var (
		out    []v1alpha1.RunnerGroup
		broken []runnergroups.Broken
	)
	for _, ns := range namespaces {
		groups, b, err := s.groups.List(ctx, ns, s.include.String())
		if err != nil {
			return nil, nil, err
		}
		broken = append(broken, b...)
		for _, rg := range groups {
			if s.excluded(rg.Labels) {
				continue
			}
			out = append(out, rg)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, broken, nil
}

// excluded reports whether another listener takes a group with these labels.
func (s *Scaler) excluded(l map[string]string) bool {
	for _, sel := range s.excludes {
		if sel.Matches(labels.Set(l)) {
			return true
		}
	}
	return false
}

// forEachGroup calls fn for 0..n-1 on at most cfg.Workers goroutines.
func (s *Scaler) forEachGroup(n int, fn func(i int)) {
	var wg sync.WaitGroup
	work := make(chan int)
	for range min(s.cfg.Workers, max(n, 1)) {
		wg.Go(func() {
			for i := range work {
				fn(i)
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}
