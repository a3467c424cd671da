package scaler

import (
	"context"
	"log/slog"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
)

// Selection is what a pass with some configuration would serve.
type Selection struct {
	// Groups are the selected RunnerGroups, sorted by namespace and name.
	Groups []v1alpha1.RunnerGroup
	// Broken are selected objects that could not be read as RunnerGroups.
	Broken []runnergroups.Broken
	// FailedNamespaces could not be listed.
	FailedNamespaces []string
}

// Selected lists the RunnerGroups that a pass with cfg's namespaces and
// selectors serves, by the pass's own rule (listGroups), and writes
// nothing. The read-only commands (status, why) use it, so they show
// exactly the groups `run` with the same flags would serve.
func Selected(ctx context.Context, groups GroupClient, cfg Config) (Selection, error) {
	s := &Scaler{groups: groups, cfg: cfg, log: slog.New(slog.DiscardHandler)}
	if err := s.parseSelectors(); err != nil {
		return Selection{}, err
	}
	l, err := s.listGroups(ctx)
	served := make([]v1alpha1.RunnerGroup, len(l.served))
	for i, rg := range l.served {
		served[i] = *rg
	}
	return Selection{Groups: served, Broken: l.broken, FailedNamespaces: l.failedNS}, err
}
