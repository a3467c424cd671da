package scaler

import (
	"context"
	"errors"
	"sort"
	"sync"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/selection"
)

// errNotMadeByNew is what a zero Scaler says instead of panicking.
var errNotMadeByNew = errors.New("scaler: this Scaler was not made by scaler.New")

// Pass serves every selected RunnerGroup once. It returns an error only when
// it could not find the groups at all; a group that fails, or a namespace
// that cannot be listed, is reported in the Summary (and a group's failure
// on its conditions), and the others go on.
//
// Each group has Config.GroupTimeout for its steps. The groups are served
// in namespace/name order, started one group further on each pass (see
// turn), so groups that are slow and sort first do not leave the same tail
// unserved whenever a pass runs out of time.
func (s *Scaler) Pass(ctx context.Context) (passreport.Summary, error) {
	return s.passOf(ctx, nil)
}

// passOf is a pass over the listed groups that keep accepts (all when keep
// is nil): a webhook's pass serves only the groups that could serve its
// jobs. The assignment rule still hears of every listed group, so a
// partial pass gives a job to the same group a full one would.
func (s *Scaler) passOf(ctx context.Context, keep func(*v1alpha1.RunnerGroup) bool) (passreport.Summary, error) {
	if s.groups == nil {
		return passreport.Summary{}, errNotMadeByNew
	}
	lg, err := selection.List(ctx, s.groups, s.selection, s.log)
	if err != nil {
		return passreport.Summary{}, err
	}
	listed, broken, failedNS := lg.Served, lg.Broken, lg.FailedNamespaces
	groups := listed
	if keep != nil {
		groups, broken = nil, nil
		for _, rg := range listed {
			if keep(rg) {
				groups = append(groups, rg)
			}
		}
	}
	turn := s.turn()
	groups, deferred := s.admitNew(rotate(groups, turn))
	sum := passreport.Summary{Groups: len(groups) + len(broken), FailedNamespaces: failedNS, Partial: keep != nil || deferred > 0, Deferred: deferred}
	if deferred > 0 {
		s.log.Info("serving some new RunnerGroups in later passes, to keep this pass's writes bounded", "newGroupsPerPass", s.cfg.NewGroupsPerPass, "deferred", deferred)
	}
	for _, b := range broken {
		s.log.Error("cannot read RunnerGroup", "runnergroup", b.Namespace+"/"+b.Name, "error", b.Err)
		sum.Failed = append(sum.Failed, b.Namespace+"/"+b.Name)
	}

	// Validate every group first, so the assignment rule knows which of the
	// groups this pass serves can serve, before any of them plans.
	runs := make([]*groupRun, len(groups))
	fresh := s.newPass()
	fresh.namespaces.listAll = distinctNamespaces(groups) >= namespaceListFrom
	s.loadKeptChecks(ctx, fresh.checks)
	s.forEachGroup(len(groups), func(i int) {
		gctx, cancel := context.WithTimeout(ctx, s.cfg.GroupTimeout)
		defer cancel()
		runs[i] = s.prepare(gctx, groups[i], fresh)
	})
	rule := s.assignment(ctx, listed, lg.All, runs)
	shared := s.gather(ctx, runs)
	var mu sync.Mutex
	forEachOf(shared.servingOrder(runs), s.cfg.Workers, func(i int) {
		runs[i].rule, runs[i].shared = rule, shared
		created, err := s.serveGroup(ctx, runs[i])
		s.failed(runs[i], err)
		mu.Lock()
		defer mu.Unlock()
		sum.Created += created
		sum.GroupStats = append(sum.GroupStats, runs[i].stats)
		sum.QueuedToJob = append(sum.QueuedToJob, runs[i].queuedToJob...)
		if err != nil {
			sum.Failed = append(sum.Failed, runs[i].rg.Key())
		}
	})
	shared.wait.Wait()
	s.saveKeptChecks(ctx, fresh.checks)
	// A full pass only: a webhook's pass is for speed, and serves some
	// groups only.
	if keep == nil && s.cfg.DeletedNamespaces != nil {
		sum.DeletedNamespaces = s.sweepDeletedNamespaces(ctx, runs, turn)
	}
	sort.Strings(sum.Failed)
	return sum, nil
}

// onePass is what the groups of one pass share, and the next pass does
// not see: the Secrets read (groups of a namespace that name the same
// Secret read it once; nil reads each group's own), the answers on the
// groups' namespaces, and the registration token checks (a loop's, whose
// verdicts its memory keeps).
type onePass struct {
	secrets    *passSecrets
	namespaces *namespaces
	checks     *regChecks
}

// newPass starts a pass: the loop's memory turns, and the pass gets what
// its groups share.
func (s *Scaler) newPass() *onePass {
	s.mem.turn()
	return &onePass{secrets: &passSecrets{}, namespaces: newNamespaces(), checks: s.mem.checks()}
}

// distinctNamespaces is how many namespaces groups are in.
func distinctNamespaces(groups []*v1alpha1.RunnerGroup) int {
	seen := map[string]bool{}
	for _, rg := range groups {
		seen[rg.Namespace] = true
	}
	return len(seen)
}

// serveGroup takes one group through its steps within the group timeout.
func (s *Scaler) serveGroup(ctx context.Context, g *groupRun) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.GroupTimeout)
	defer cancel()
	return s.finish(ctx, g)
}

// admitNew keeps, in order, every group served before and the first
// Config.NewGroupsPerPass groups never served (no lastCheckTime), and says
// how many new ones it left out. The rotation of the order moves the
// groups left out to the front of a later pass in turn.
func (s *Scaler) admitNew(groups []*v1alpha1.RunnerGroup) ([]*v1alpha1.RunnerGroup, int) {
	if s.cfg.NewGroupsPerPass <= 0 {
		return groups, 0
	}
	out, admitted, deferred := groups[:0:0], 0, 0
	for _, rg := range groups {
		if rg.Status.LastCheckTime == nil {
			if admitted == s.cfg.NewGroupsPerPass {
				deferred++
				continue
			}
			admitted++
		}
		out = append(out, rg)
	}
	return out, deferred
}

// turn is how far this pass rotates the order of its groups. A CronJob
// starts a new scaler every minute, so the minute its first pass began
// turns the order; a loop keeps one scaler and turns it one group further
// each pass. Either way, over N passes each of N groups goes first once.
func (s *Scaler) turn() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turns == 0 {
		s.firstMinute = s.now().Unix() / 60
	}
	s.turns++
	return s.firstMinute + s.turns - 1
}

// rotate returns groups started at position turn (modulo their number),
// the order otherwise unchanged.
func rotate(groups []*v1alpha1.RunnerGroup, turn int64) []*v1alpha1.RunnerGroup {
	n := int64(len(groups))
	if n == 0 {
		return groups
	}
	i := (turn%n + n) % n
	return append(groups[i:len(groups):len(groups)], groups[:i]...)
}

// forEachOf calls fn for every index order delivers, on at most limit
// goroutines (at least one), until order is closed.
func forEachOf(order <-chan int, limit int, fn func(i int)) {
	var wg sync.WaitGroup
	for range max(limit, 1) {
		wg.Go(func() {
			for i := range order {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// forEachGroup calls fn for 0..n-1 on at most cfg.Workers goroutines.
func (s *Scaler) forEachGroup(n int, fn func(i int)) {
	forEach(n, s.cfg.Workers, fn)
}
