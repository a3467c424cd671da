//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

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
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 6*time.Minute)
	s := b.servedGroup(ctx, t, sceneOpts{name: "overlap", max: 1})
	otherNS := b.namespace(ctx, t, "e2e-overlap-other", nil)
	values := deploymentValues()
	values["watchNamespaces"] = []string{otherNS}
	b.helmInstall(ctx, t, otherNS, "gro", values)
	// Both capped at one runner, so that jobs stay queued while the test
	// looks, whichever of the two the rule prefers.
	b.createScopedGroup(ctx, t, otherNS, s.group, s.fx, 1, s.label)
	dump := func() string { return b.dumpNamespaces(s.ns, otherNS) + b.gitea.jobsLine(s.fx.repo) }

	winner, loser := s.ns, otherNS
	if otherNS+"/"+s.group < s.ns+"/"+s.group {
		winner, loser = loser, winner
	}
	t.Logf("both groups are %s; %s/%s is preferred to %s/%s", s.group, winner, s.group, loser, s.group)

	// Both served first: a group no listener has served yet keeps no job.
	b.waitServed(ctx, t, s.ns, s.group, dump)
	b.waitServed(ctx, t, otherNS, s.group, dump)

	keys, wf := numberedJobs("overlap", 3, s.label)
	pushJobs(ctx, t, b, s.fx, "ci.yml", keys, wf...)
	b.gitea.waitJobs(ctx, t, s.fx.repo, len(keys))

	// One job runs on the preferred group's one runner; the other two wait
	// for its slot, and the other group, though it has slots, leaves them.
	noLoserRunner := func(ctx context.Context) error {
		all, err := b.runnerJobs(ctx, loser, s.group)
		if err != nil {
			return nil
		}
		if len(all) > 0 {
			return fmt.Errorf("the group in %s, which the rule does not prefer, created runner Jobs %v", loser, jobNames(all))
		}
		return nil
	}
	waitUntil(ctx, t, stepWait, "the other group leaves the two waiting jobs to the preferred one", dump, func(ctx context.Context) (bool, string, error) {
		if err := noLoserRunner(ctx); err != nil {
			return false, "", err
		}
		rg, err := b.group(ctx, loser, s.group)
		if err != nil {
			return false, err.Error(), nil
		}
		return rg.Status.JobsLeftToOtherGroups == 2 && rg.Status.QueuedJobs == 0, statusLine(rg), nil
	})
	b.waitPasses(ctx, t, loser, s.group, 2, dump, noLoserRunner)

	b.release(t, keys...)
	done := b.expectCompleted(ctx, t, winner, s.group, s.fx.repo, idsOf(b.gitea.waitJobs(ctx, t, s.fx.repo, len(keys)), keys...), dump)
	require.Len(t, done, len(keys))
	all, err := b.runnerJobs(ctx, winner, s.group)
	require.NoError(t, err)
	require.Len(t, all, len(keys), "one runner Job per Gitea job: %v", jobNames(all))
	require.NoError(t, noLoserRunner(ctx))
}
