package scaler

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reaper"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// DeletedNamespaces turns on the sweep of the registrations deleted
// namespaces left in Gitea (Config.DeletedNamespaces). Deleting a
// namespace deletes its groups, runner Jobs, token Secrets and ledger: a
// runner that registered there and never ran a job stays in Gitea,
// offline, for ever, and nothing in the namespace is left to say whose it
// was or to hold a token that may delete it. So the platform team, which
// trusts itself and not the tenants, gives the install both: a place
// outside every tenant's reach for the copy of what each served namespace
// registered (a ConfigMap in the release namespace, the mirror), and a
// Gitea API token of its own that may list and delete runners in the
// scopes the install serves.
type DeletedNamespaces struct {
	// Namespace and ConfigMap name the mirror (ledger.Mirror): the
	// release namespace, where no tenant can write, so no tenant can make
	// the sweep delete another tenant's runners by writing a record.
	Namespace, ConfigMap string
	// GiteaURL is the Gitea the platform's token is for. The token is sent
	// there and nowhere else: a recorded place on another URL came from a
	// group's spec, which a tenant writes, and is left alone (and
	// reported), or a tenant could have the platform's token sent to a
	// server of its own.
	GiteaURL string
	// Token is the platform's API token. Empty: the mirror is kept and
	// nothing is deleted; each pass says how many recorded groups of
	// deleted namespaces may have left registrations (passreport.LeftNoToken).
	Token string
	// MaxPerPass bounds the deleted namespaces swept per pass (each costs
	// a runners listing per recorded place, and a running-jobs listing
	// where something is to be removed); 0 means
	// DefaultDeletedNamespacesPerPass.
	MaxPerPass int
}

// DefaultDeletedNamespacesPerPass is DeletedNamespaces.MaxPerPass's
// default: a few listings per pass, next to the live groups' many. A
// namespace left over waits for the next pass (passreport.LeftLater).
const DefaultDeletedNamespacesPerPass = 4

// maxNamespaceChecks bounds the namespaces a pass asks the API server
// about for the sweep (records of namespaces it did not serve): one GET
// each.
const maxNamespaceChecks = 64

// sweepDeletedNamespaces mirrors what the pass's namespaces registered,
// then removes the registrations of recorded namespaces that are gone.
// Nothing it meets fails the pass: the live groups have been served, and
// whatever was not swept waits for a later pass, counted in the report.
func (s *Scaler) sweepDeletedNamespaces(ctx context.Context, runs []*groupRun, turn int64) passreport.DeletedNamespacesReport {
	d := s.cfg.DeletedNamespaces
	rep := passreport.DeletedNamespacesReport{Left: map[string]int{}}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.GroupTimeout)
	defer cancel()
	m := ledger.Mirror{Client: s.kube, Namespace: d.Namespace, Name: d.ConfigMap}
	cur, err := m.Load(ctx)
	if err != nil {
		s.log.Error("cannot read the registrations mirror; the registrations of deleted namespaces are not swept in this pass", "error", err)
		return rep
	}
	served, current := s.mirrorServed(ctx, runs, cur)
	var edits []func(ledger.Copies) bool
	for _, c := range served {
		edits = append(edits, func(cs ledger.Copies) bool {
			key := ledger.MirrorKey(c.Namespace, c.UID)
			old, had := cs[key]
			switch {
			case len(c.Groups) == 0:
				delete(cs, key) // nothing of the namespace is left to sweep
				return had
			case had && reflect.DeepEqual(old, c):
				return false
			}
			cs[key] = c
			return true
		})
	}

	var keys []string
	for key := range cur {
		if !current[key] {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	if n := int64(len(keys)); n > 0 {
		i := (turn%n + n) % n // a record whose sweep keeps failing does not hold the others back
		keys = append(keys[i:], keys[:i]...)
	}
	limit := d.MaxPerPass
	if limit <= 0 {
		limit = DefaultDeletedNamespacesPerPass
	}
	checks, swept, noToken := 0, 0, 0
	for _, key := range keys {
		c := cur[key]
		if checks == maxNamespaceChecks {
			rep.Left[passreport.LeftLater] += len(c.Groups)
			continue
		}
		checks++
		state, err := s.reaperWith(nil).NamespaceState(ctx, c.Namespace, c.UID)
		switch {
		case err != nil:
			s.log.Warn("cannot tell whether a recorded namespace is gone; its registrations are looked at in a later pass", "namespace", c.Namespace, "error", err)
			rep.Left[passreport.LeftFailed] += len(c.Groups)
			continue
		case state == reaper.NamespaceTerminating:
			rep.Waiting++
			continue
		case state == reaper.NamespaceLive:
			continue // no longer served, or served by no group now: its runners may still run
		}
		switch {
		case d.Token == "":
			rep.Left[passreport.LeftNoToken] += len(c.Groups)
			noToken += len(c.Groups)
			continue
		case swept == limit:
			rep.Left[passreport.LeftLater] += len(c.Groups)
			continue
		}
		swept++
		if edit := s.sweepNamespace(ctx, key, c, &rep); edit != nil {
			edits = append(edits, edit)
		}
	}
	if noToken > 0 {
		s.log.Warn("no Gitea token for the sweep of deleted namespaces: their runners' registrations are not removed (see the chart's cleanup.deletedNamespaces)", "groups", noToken)
	}
	if len(edits) > 0 && !s.cfg.DryRun {
		left, err := m.Change(ctx, func(cs ledger.Copies) bool {
			changed := false
			for _, edit := range edits {
				changed = edit(cs) || changed
			}
			return changed
		})
		if err != nil {
			s.log.Error("cannot write the registrations mirror", "error", err)
		}
		for _, ns := range slices.Sorted(maps.Keys(left)) {
			s.log.Warn("the registrations mirror is full: the largest namespace records keep only their share; if this namespace is deleted, the registrations of the groups left out stay in Gitea",
				"namespace", ns, "groupsLeftOut", left[ns])
		}
	}
	if rep.Removed > 0 || len(rep.Left) > 0 || rep.Waiting > 0 {
		s.log.Info("swept the registrations of deleted namespaces", "removed", rep.Removed, "waiting", rep.Waiting, "left", rep.Left)
	}
	if !s.cfg.DryRun {
		// For status, which reads it there; written only when it changed.
		if err := m.RecordSweep(ctx, ledger.Sweep{Since: s.now(), Removed: rep.Removed, Waiting: rep.Waiting, Left: rep.Left}); err != nil {
			s.log.Error("cannot record the state of the sweep of deleted namespaces on the registrations mirror", "error", err)
		}
	}
	return rep
}

// mirrorServed is the mirror's record of each namespace the pass served
// (enabled, its UID read), and the keys of those records. A record holds
// the owner tags of the install's groups listed there now that the
// namespace's ledger names under the same group name (they registered
// runners), or that created runner Jobs in this pass; their places are the
// group's spec's, then the former ones the ledger keeps. A tag of the old
// record whose group is gone stays while the ledger keeps it (some
// registration of it may be left) and goes with it. A tag only the ledger
// names is never taken: the ledger is the tenant's to write, a group's UID
// is the API server's.
func (s *Scaler) mirrorServed(ctx context.Context, runs []*groupRun, cur ledger.Copies) ([]ledger.Copy, map[string]bool) {
	byNS := map[string][]*groupRun{}
	for _, g := range runs {
		if g != nil {
			byNS[g.rg.Namespace] = append(byNS[g.rg.Namespace], g)
		}
	}
	var out []ledger.Copy
	current := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(byNS)) {
		gs := byNS[name]
		f := gs[0].namespaces.facts(ctx, s, name)
		if f.err != nil || len(f.missing) > 0 || f.ns == nil || f.nsErr != nil || f.ns.UID == "" {
			continue
		}
		key := ledger.MirrorKey(name, f.ns.UID)
		current[key] = true
		books, err := s.ledger(ctx, gs[0])
		c := ledger.Copy{Namespace: name, UID: f.ns.UID, Groups: ledger.Entries{}}
		for _, g := range gs {
			tag := runnerjob.OwnerTag(g.rg.UID)
			e, ok := books[tag]
			if (!ok || e.Group != g.rg.Name) && g.stats.Created == 0 {
				continue
			}
			here := g.registersIn()
			formerly := slices.DeleteFunc(slices.Clone(e.Formerly), func(p scope.Place) bool { return p == here })
			if e.At != here && e.Group == g.rg.Name && e.At.URL() != "" {
				formerly = append([]scope.Place{e.At}, formerly...)
			}
			if len(formerly) == 0 {
				formerly = nil
			}
			formerly = formerly[:min(len(formerly), ledger.MaxFormerly)]
			c.Groups[tag] = ledger.Entry{Group: g.rg.Name, At: here, Formerly: formerly}
		}
		for tag, e := range cur[key].Groups {
			if _, ok := c.Groups[tag]; ok {
				continue
			}
			if _, kept := books[tag]; kept || err != nil {
				c.Groups[tag] = e
			}
		}
		if len(c.Groups) > 0 || len(cur[key].Groups) > 0 {
			out = append(out, c)
		}
	}
	return out, current
}

// sweepNamespace sweeps, with the platform's token, the registrations a
// gone namespace's recorded groups left (reaper.SweepNamespace), and
// returns the edit of its record in the mirror.
func (s *Scaler) sweepNamespace(ctx context.Context, key string, c ledger.Copy, rep *passreport.DeletedNamespacesReport) func(ledger.Copies) bool {
	d := s.cfg.DeletedNamespaces
	log := s.log.With("deletedNamespace", c.Namespace)
	fail := func(msg string, err error) func(ledger.Copies) bool {
		log.Error(msg, "error", err)
		rep.Left[passreport.LeftFailed] += len(c.Groups)
		return nil
	}
	client, err := s.gitea(d.GiteaURL, d.Token)
	if err != nil {
		return fail("cannot reach Gitea for the sweep of deleted namespaces", err)
	}
	runners, ok := client.(gitea.Runners)
	if !ok {
		return fail("cannot sweep deleted namespaces", errors.New("this Gitea client has no runners API"))
	}
	return s.reaperWith(runners).SweepNamespace(ctx, log, scope.Instance(d.GiteaURL), key, c, rep)
}
