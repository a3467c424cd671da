// Package assign decides which RunnerGroup serves a queued Gitea job when
// more than one could.
//
// Two groups can often run the same job: a `[gpu]` group and a plain group in
// one org both carry the default `ubuntu-*` labels, and a `global` group
// contains every org's repositories. Each group keeps its claims in its own
// ConfigMap, so without one rule both would start a runner for the job and
// one of the two would sit idle. Every pass, in every listener, computes the
// same answer from the RunnerGroups it lists, so the rule is a pure function
// of the groups' specs and of what their own passes last recorded:
//
//  1. Only groups on the same Gitea instance (scheme, host, port and path
//     compared after normalising) whose scope contains the job's repository
//     and whose label names cover the job's runs-on labels are candidates.
//  2. A group that cannot serve comes after every group that can: it is
//     paused (maxActiveRunners 0), or its last pass recorded a
//     configuration failure that no retry will fix (see Group.Eligible). It
//     is chosen only when no group that can serve would run the job, so the
//     job still has exactly one owner, who will serve it once fixed. A group
//     with a transient failure (Gitea timed out) stays eligible, so an
//     outage does not move jobs back and forth between groups.
//  3. Among candidates, the most specific scope wins (repo, then org or
//     user, then global), then the group with the fewest label names (the
//     plain group before the `[gpu]` one for an `ubuntu-latest` job), then
//     the smallest "namespace/name".
//  4. That preference holds across namespaces for one hold only (see
//     Rule.Holding): a job still queued a hold after Gitea created it goes
//     to the best group of the next namespace that can run it, and so on in
//     turn. A group can look able to serve and still never take the job
//     (its runners register in another owner with a registration token
//     the scaler cannot check), and the most specific scope is the one any
//     tenant can write: without the turn, a repo-scope group of one tenant
//     would keep another tenant's job for ever. Groups of one namespace
//     never turn: they are one tenant's, and their order is its own.
//
// A group at capacity keeps the jobs it was assigned within its hold:
// moving them to another group would race with its own runners taking them
// once a slot frees.
package assign

import (
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerlabels"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// Group is what the rule needs to know of one RunnerGroup.
type Group struct {
	// Key is "namespace/name".
	Key string
	// Where is the group's Gitea and scope: the repositories it contains.
	Where scope.Place
	// Labels are the group's effective runner labels.
	Labels []string
	// Eligible is false when the group cannot serve (see the package doc).
	Eligible bool
}

// Job is what the rule needs to know of one queued Gitea job.
type Job struct {
	// Repo is the job's repository as "owner/name".
	Repo string
	// Labels are its runs-on labels.
	Labels []string
	// Created is when Gitea created the job; the zero time never turns
	// (see Rule.Holding).
	Created time.Time
}

// Rule answers which group serves a job. It is safe for concurrent use: the
// workers of a pass share one Rule, and its answers are cached per distinct
// repository and label set, because a burst of jobs repeats a few of them.
type Rule struct {
	ranked []candidate
	// hold and now are set by Holding.
	hold time.Duration
	now  func() time.Time

	mu    sync.Mutex
	cache map[string]string
}

type candidate struct {
	eligible      bool
	key, instance string
	namespace     string
	specificity   int
	where         scope.Place
	names         runnerlabels.Set
}

// New ranks the groups once.
func New(groups []Group) *Rule {
	r := &Rule{cache: map[string]string{}}
	for _, g := range groups {
		r.ranked = append(r.ranked, candidate{
			eligible:    g.Eligible,
			key:         g.Key,
			namespace:   namespaceOf(g.Key),
			instance:    g.Where.URL(),
			specificity: specificity(g.Where.Scope()),
			where:       g.Where,
			names:       runnerlabels.NewSet(g.Labels),
		})
	}
	sort.SliceStable(r.ranked, func(i, j int) bool {
		a, b := r.ranked[i], r.ranked[j]
		if a.eligible != b.eligible {
			return a.eligible
		}
		if a.specificity != b.specificity {
			return a.specificity > b.specificity
		}
		if len(a.names) != len(b.names) {
			return len(a.names) < len(b.names)
		}
		return a.key < b.key
	})
	return r
}

// Holding makes the rule turn between namespaces (rule 4 of the package
// doc): a job queued for k holds (k >= 1) since Gitea created it goes to
// the best group of the k-th next namespace, modulo the namespaces whose
// groups can serve it. The job's age, not a claim's, counts, so that every
// listener and the why command reach the same answer from what Gitea
// lists. hold 0 never turns. It returns r, and must be called before the
// rule is used.
func (r *Rule) Holding(hold time.Duration, now func() time.Time) *Rule {
	r.hold, r.now = hold, now
	return r
}

// turn is how many holds the job has waited: 0 within the first.
func (r *Rule) turn(job Job) int64 {
	if r.hold <= 0 || r.now == nil || job.Created.IsZero() {
		return 0
	}
	waited := r.now().Sub(job.Created)
	if waited < r.hold {
		return 0
	}
	return int64(waited / r.hold)
}

// Owner returns the key of the group that serves the job on the Gitea at
// url, or "" when no group can.
func (r *Rule) Owner(url string, job Job) string {
	instance := scope.Instance(url)
	turn := r.turn(job)
	sortedLabels := append([]string(nil), job.Labels...)
	sort.Strings(sortedLabels)
	cacheKey := instance + "\x00" + strconv.FormatInt(turn, 10) + "\x00" + strings.ToLower(job.Repo) + "\x00" + strings.Join(sortedLabels, "\x00")

	r.mu.Lock()
	defer r.mu.Unlock()
	if key, ok := r.cache[cacheKey]; ok {
		return key
	}
	key := ""
	for _, v := range r.verdicts(instance, job, turn) {
		if v.Owner {
			key = v.Key
			break
		}
	}
	r.cache[cacheKey] = key
	return key
}

// Verdict is how one group stands towards one job, for explaining an
// answer of Owner (the why command).
type Verdict struct {
	Key string
	// SameInstance: the group is on the job's Gitea.
	SameInstance bool
	// InScope: the group's scope contains the job's repository.
	InScope bool
	// Missing are the job's labels the group does not offer; CanRun says
	// whether it can run the job at all.
	Missing []string
	CanRun  bool
	// Labels are the label names the group offers, sorted.
	Labels []string
	// Eligible is false when the group cannot serve (paused, or a failure
	// no retry fixes); such a group is chosen only when no eligible one can.
	Eligible bool
	// Owner marks the one group Owner gives the job to.
	Owner bool
}

// Explain returns every group's verdict on the job on the Gitea at url, in
// the rule's order: the first that is on the instance, contains the
// repository and can run the job is the owner.
func (r *Rule) Explain(url string, job Job) []Verdict {
	out := r.verdicts(scope.Instance(url), job, r.turn(job))
	for i := range out {
		out[i].Labels = r.ranked[i].names.Names()
	}
	return out
}

// verdicts is the rule itself, which Owner and Explain share; Owner, on
// the pass's hot path, needs no label lists. turn is how many holds the
// job has waited.
func (r *Rule) verdicts(instance string, job Job, turn int64) []Verdict {
	out := make([]Verdict, 0, len(r.ranked))
	// The candidates' namespaces in rule order, each with its best
	// candidate: the eligible ones only, when there is one.
	var namespaces []string
	best := map[string]int{}
	eligible := false
	for i, c := range r.ranked {
		v := Verdict{
			Key:          c.key,
			SameInstance: c.instance == instance,
			InScope:      c.where.HoldsRepo(job.Repo),
			Missing:      c.names.Missing(job.Labels),
			CanRun:       c.names.CanRun(job.Labels),
			Eligible:     c.eligible,
		}
		out = append(out, v)
		if !v.SameInstance || !v.InScope || !v.CanRun || (eligible && !c.eligible) {
			continue
		}
		eligible = eligible || c.eligible
		if _, ok := best[c.namespace]; !ok {
			best[c.namespace] = i
			namespaces = append(namespaces, c.namespace)
		}
	}
	if !eligible {
		// Only groups that cannot serve: the first keeps the job, so that
		// it has one owner once fixed, and no turn moves it meanwhile.
		turn = 0
	}
	if len(namespaces) > 0 {
		out[best[namespaces[turn%int64(len(namespaces))]]].Owner = true
	}
	return out
}

// namespaceOf is the namespace of a "namespace/name" key.
func namespaceOf(key string) string {
	ns, _, _ := strings.Cut(key, "/")
	return ns
}

const (
	scopeGlobal = iota
	scopeOwner
	scopeRepo
)

func specificity(s v1alpha1.Scope) int {
	switch s {
	case v1alpha1.ScopeRepo:
		return scopeRepo
	case v1alpha1.ScopeOrg, v1alpha1.ScopeUser:
		return scopeOwner
	default:
		return scopeGlobal
	}
}
