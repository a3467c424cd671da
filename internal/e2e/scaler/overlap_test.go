//go:build e2e

package scaler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
)

// TestOverlappingGroupsAcrossListenersServeEachJobOnce: two releases, each
// with its own looping listener serving its own namespace, and in each
// namespace a RunnerGroup for the same organisation with the same labels.
// Both groups could run every job; exactly one group, the same one in both
// listeners' eyes (the smaller namespace/name), gets runners for them. The
// other starts nothing and counts the jobs it left to the first in its
// status.
func TestOverlappingGroupsAcrossListenersServeEachJobOnce(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 6*time.Minute)
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "overlap", Max: 1})
	otherNS := b.Namespace(ctx, t, "e2e-overlap-other", nil)
	values := e2e.DeploymentValues()
	values["watchNamespaces"] = []string{otherNS}
	b.HelmInstall(ctx, t, otherNS, "gro", values)
	// Both capped at one runner, so that jobs stay queued while the test
	// looks, whichever of the two the rule prefers.
	b.CreateScopedGroup(ctx, t, otherNS, s.Group, s.Fx, 1, s.Label)
	dump := func() string { return b.DumpNamespaces(s.NS, otherNS) + b.Gitea.JobsLine(s.Fx.Repo) }

	winner, loser := s.NS, otherNS
	if otherNS+"/"+s.Group < s.NS+"/"+s.Group {
		winner, loser = loser, winner
	}
	t.Logf("both groups are %s; %s/%s is preferred to %s/%s", s.Group, winner, s.Group, loser, s.Group)

	// Both served first: a group no listener has served yet keeps no job.
	b.WaitServed(ctx, t, s.NS, s.Group, dump)
	b.WaitServed(ctx, t, otherNS, s.Group, dump)

	keys, wf := e2e.NumberedJobs("overlap", 3, s.Label)
	e2e.PushJobs(ctx, t, b, s.Fx, "ci.yml", keys, wf...)
	b.Gitea.WaitJobs(ctx, t, s.Fx.Repo, len(keys))

	// One job runs on the preferred group's one runner; the other two wait
	// for its slot, and the other group, though it has slots, leaves them.
	noLoserRunner := func(ctx context.Context) error {
		all, err := b.RunnerJobs(ctx, loser, s.Group)
		if err != nil {
			return nil
		}
		if len(all) > 0 {
			return fmt.Errorf("the group in %s, which the rule does not prefer, created runner Jobs %v", loser, e2e.JobNames(all))
		}
		return nil
	}
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the other group leaves the two waiting jobs to the preferred one", dump, func(ctx context.Context) (bool, string, error) {
		if err := noLoserRunner(ctx); err != nil {
			return false, "", err
		}
		rg, err := b.Group(ctx, loser, s.Group)
		if err != nil {
			return false, err.Error(), nil
		}
		return rg.Status.JobsLeftToOtherGroups == 2 && rg.Status.QueuedJobs == 0, e2e.StatusLine(rg), nil
	})
	b.WaitPasses(ctx, t, loser, s.Group, 2, dump, noLoserRunner)

	b.Release(t, keys...)
	done := b.ExpectCompleted(ctx, t, winner, s.Group, s.Fx.Repo, e2e.IDsOf(b.Gitea.WaitJobs(ctx, t, s.Fx.Repo, len(keys)), keys...), dump)
	require.Len(t, done, len(keys))
	all, err := b.RunnerJobs(ctx, winner, s.Group)
	require.NoError(t, err)
	require.Len(t, all, len(keys), "one runner Job per Gitea job: %v", e2e.JobNames(all))
	require.NoError(t, noLoserRunner(ctx))
}
