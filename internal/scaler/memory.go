package scaler

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// memory is everything a loop keeps from one pass to the next: its watch
// caches and the rights and Secrets it read beside them (watched.go), its
// verdicts on specs and runner pods (verdicts.go), the parts of its
// rendered runner configs (runnerconfig.go), its registration token
// checks (regcheck.go), what its cluster-wide reads learnt
// (boundrights.go) and the jobs its job histograms counted (jobtimes.go).
// A single pass remembers nothing: its Scaler's memory
// is nil, every method here is safe on nil, and every question is asked
// afresh.
type memory struct {
	cache     Cache
	memo      memo
	verdicts  verdicts
	configs   renderedConfigs
	regChecks regChecks
	wide      clusterReads
	jobs      jobTimes
}

// newMemory is a loop's memory around its watch caches; a single pass
// (no caches) has none.
func newMemory(cache Cache) *memory {
	if cache == nil {
		return nil
	}
	m := &memory{cache: cache}
	m.memo.rights, m.memo.secrets = map[string]rightsMemo{}, map[types.NamespacedName]secretMemo{}
	return m
}

// turn starts a pass: what no pass used since the last turn ages by one.
func (m *memory) turn() {
	if m == nil {
		return
	}
	m.verdicts.turn()
	m.configs.turn()
}

// checks are the registration token checks a pass shares among its groups:
// a loop's, which keep their verdicts for the next passes, or for a single
// pass a set of its own, which still asks Gitea once for groups that check
// the same token at the same time. Either finds the verdicts of earlier
// passes in Config.KeptRegistrationChecks (regcheckkept.go).
func (m *memory) checks() *regChecks {
	if m == nil {
		return &regChecks{}
	}
	return &m.regChecks
}

// renderedConfigs are the loop's kept runner config parts; nil for a
// single pass, which makes each part when asked.
func (m *memory) renderedConfigs() *renderedConfigs {
	if m == nil {
		return nil
	}
	return &m.configs
}

// identity is who the cluster-wide reads found the scaler to be, if a
// pass of this loop asked already.
func (m *memory) identity() (tenancy.Identity, bool) {
	if m == nil {
		return tenancy.Identity{}, false
	}
	m.wide.mu.Lock()
	defer m.wide.mu.Unlock()
	if m.wide.who == nil {
		return tenancy.Identity{}, false
	}
	return *m.wide.who, true
}

// keepIdentity remembers who the scaler is for the loop's later passes.
func (m *memory) keepIdentity(id tenancy.Identity) {
	if m == nil {
		return
	}
	m.wide.mu.Lock()
	defer m.wide.mu.Unlock()
	m.wide.who = &id
}

// news says whether what a cluster-wide read says about topic differs
// from what it said last in this loop, so a loop logs a lasting problem
// once and not every pass. A single pass logs what it finds.
func (m *memory) news(topic, said string) bool {
	if m == nil {
		return true
	}
	m.wide.mu.Lock()
	defer m.wide.mu.Unlock()
	if m.wide.logged == nil {
		m.wide.logged = map[string]string{}
	}
	same := m.wide.logged[topic] == said
	m.wide.logged[topic] = said
	return !same
}
