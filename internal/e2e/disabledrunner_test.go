//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// disabledWatch is how long the test watches a disabled runner beside a
// queued job it may take: several of the bed's runner fetch intervals
// (0.5 s, backing off to 1 s).
const disabledWatch = 6 * time.Second

// TestADisabledRealRunnerTakesNoJobAndIsNotSupply pins what gitea-runner
// 1.0.8 does in the window of a reap, after the scaler disabled it and
// before its Job is deleted (or when a reap stops there): it keeps running
// and asking Gitea for work, Gitea 1.26 gives a disabled runner none
// (services/actions/task.go), and it does not exit on its own. Enabled
// again, it takes the next job at once: it was polling all along. The
// scaler does not count a disabled runner as supply: the next pass starts
// a runner for a job queued meanwhile, which runs it, and finishes the
// reap (its registration and its Job go).
func TestADisabledRealRunnerTakesNoJobAndIsNotSupply(t *testing.T) {
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 5*time.Minute)
	const group = "disabled"
	fx := b.newOrgScope(ctx, t, uniq("e2e-disabled"))
	label := uniq("e2e-disabled")
	ns := b.namespace(ctx, t, "e2e-disabled", nil)
	dump := func() string { return b.dumpNamespaces(ns) + b.gitea.jobsLine(fx.repo) }
	b.tokenSecret(ctx, t, ns, groupSecret(group), fx.regToken, fx.apiToken)
	spec := b.groupSpec(fx, groupSecret(group), 3, label)
	spec.Gitea.URL = b.gitea.admin.URL()
	spec.MinIdleRunners = 2
	b.createGroup(ctx, t, ns, group, nil, spec)

	// One pass makes two warm runners; they register and wait for work.
	b.lifecyclePass(ctx, t, ns, 10*time.Minute, 10*time.Minute)
	warm, err := b.runnerJobs(ctx, ns, group)
	require.NoError(t, err)
	require.Len(t, warm, 2, "the warm pool's runner Jobs")
	names := []string{runnerjob.RunnerNameOf(&warm[0]), runnerjob.RunnerNameOf(&warm[1])}
	ids := map[string]int64{}
	waitUntil(ctx, t, stepWait, fmt.Sprintf("runners %v registered in Gitea", names), dump, func(ctx context.Context) (bool, string, error) {
		regs := b.orgRunners(ctx, t, fx.spec.Org)
		for _, n := range names {
			ids[n] = regs[n].ID
		}
		return ids[names[0]] != 0 && ids[names[1]] != 0, fmt.Sprintf("runners: %v", keysOf(regs)), nil
	})
	scope := giteasetup.OrgRunners(fx.spec.Org)
	for _, n := range names {
		require.NoError(t, b.gitea.admin.SetRunnerDisabled(ctx, scope, ids[n], true), "disable runner %s as the reaper does", n)
	}
	// No warm pool from here on: the next pass starts a runner only for
	// a queued job.
	b.patchGroup(ctx, t, ns, group, map[string]any{"spec": map[string]any{"minIdleRunners": 0}})

	first := jobKey("disabled", "first")
	pushJobs(ctx, t, b, fx, "first.yml", nil, wfJob{key: first, runsOn: []string{label}})
	firstID := idsOf(b.gitea.waitJobs(ctx, t, fx.repo, 1), first)[first]
	watchEnd := time.Now().Add(disabledWatch)
	for time.Now().Before(watchEnd) {
		gjobs, err := b.gitea.repoJobs(ctx, fx.repo)
		require.NoError(t, err)
		for _, gj := range gjobs {
			require.False(t, gj.ID == firstID && gj.RunnerName != "", "a disabled runner must take no job: %s by %s", gj.State(), gj.RunnerName)
		}
		sleepCtx(ctx, 250*time.Millisecond)
	}
	for _, j := range warm {
		pods, err := b.jobPods(ctx, ns, j.Name)
		require.NoError(t, err)
		require.Len(t, pods, 1)
		require.NotEmpty(t, pods[0].Status.ContainerStatuses)
		require.NotNil(t, pods[0].Status.ContainerStatuses[0].State.Running,
			"a disabled gitea-runner does not exit on its own: %+v", pods[0].Status.ContainerStatuses[0].State)
	}

	// Enabled again, the first runner takes the job without any pass.
	require.NoError(t, b.gitea.admin.SetRunnerDisabled(ctx, scope, ids[names[0]], false))
	waitUntil(ctx, t, stepWait, "the enabled runner takes the queued job", dump, func(ctx context.Context) (bool, string, error) {
		gjobs, err := b.gitea.repoJobs(ctx, fx.repo)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, gj := range gjobs {
			if gj.ID != firstID {
				continue
			}
			if gj.RunnerName != "" && gj.RunnerName != names[0] {
				return false, "", fmt.Errorf("job %s taken by %s, not the re-enabled runner %s", first, gj.RunnerName, names[0])
			}
			return gj.State() == "completed/success", gj.State(), nil
		}
		return false, "not listed", nil
	})

	// The other stays disabled: no supply. The pass starts a runner for
	// the next job and finishes the disabled one's reap.
	second := jobKey("disabled", "second")
	pushJobs(ctx, t, b, fx, "second.yml", nil, wfJob{key: second, runsOn: []string{label}})
	secondID := idsOf(b.gitea.waitJobs(ctx, t, fx.repo, 2), second)[second]
	b.lifecyclePass(ctx, t, ns, 10*time.Minute, 10*time.Minute)
	served := b.expectCompleted(ctx, t, ns, group, fx.repo, map[string]int64{second: secondID}, dump)
	require.NotContains(t, names, served[second].gitea.RunnerName, "a new runner, not a warm one, ran the job")
	_, still := b.orgRunners(ctx, t, fx.spec.Org)[names[1]]
	require.False(t, still, "the pass removes the disabled runner's registration")
	left, err := b.runnerJobs(ctx, ns, group)
	require.NoError(t, err)
	require.NotContains(t, jobNames(left), warm[1].Name, "the pass deletes the disabled runner's Job")
}
