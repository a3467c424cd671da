//go:build e2e

package runners

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// disabledWatch is how long the test watches a disabled runner beside a
// queued job it may take: several of the bed's runner fetch intervals
// (0.5 s, backing off to 1 s).
const disabledWatch = 6 * time.Second

// TestADisabledRealRunnerTakesNoJobAndIsNotSupply pins what Gitea's runner
// (the default image's 3.1.0, as 1.0.8 before it) does in the window of
// a reap, after the scaler disabled it and before its Job is deleted (or
// when a reap stops there): it keeps running and asking Gitea for work,
// Gitea 1.26 gives a disabled runner none (services/actions/task.go), and
// it does not exit on its own. Enabled
// again, it takes the next job at once: it was polling all along. The
// scaler does not count a disabled runner as supply: the next pass starts
// a runner for a job queued meanwhile, which runs it, and finishes the
// reap (its registration and its Job go).
func TestADisabledRealRunnerTakesNoJobAndIsNotSupply(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 5*time.Minute)
	const group = "disabled"
	fx := b.NewOrgScope(ctx, t, e2e.Uniq("e2e-disabled"))
	label := e2e.Uniq("e2e-disabled")
	ns := b.Namespace(ctx, t, "e2e-disabled", nil)
	dump := func() string { return b.DumpNamespaces(ns) + b.Gitea.JobsLine(fx.Repo) }
	b.TokenSecret(ctx, t, ns, e2e.GroupSecret(group), fx.RegToken, fx.APIToken)
	spec := b.GroupSpec(fx, e2e.GroupSecret(group), 3, label)
	spec.Gitea.URL = b.Gitea.Admin.URL()
	spec.MinIdleRunners = 2
	b.CreateGroup(ctx, t, ns, group, nil, spec)

	// One pass makes two warm runners; they register and wait for work.
	b.LifecyclePass(ctx, t, ns, 10*time.Minute, 10*time.Minute)
	warm, err := b.RunnerJobs(ctx, ns, group)
	require.NoError(t, err)
	require.Len(t, warm, 2, "the warm pool's runner Jobs")
	names := []string{runnerjob.RunnerNameOf(&warm[0]), runnerjob.RunnerNameOf(&warm[1])}
	ids := map[string]int64{}
	e2e.WaitUntil(ctx, t, e2e.StepWait, fmt.Sprintf("runners %v registered in Gitea", names), dump, func(ctx context.Context) (bool, string, error) {
		regs := b.OrgRunners(ctx, t, fx.Spec.Org)
		for _, n := range names {
			ids[n] = regs[n].ID
		}
		return ids[names[0]] != 0 && ids[names[1]] != 0, fmt.Sprintf("runners: %v", e2e.KeysOf(regs)), nil
	})
	scope := giteasetup.OrgRunners(fx.Spec.Org)
	for _, n := range names {
		require.NoError(t, b.Gitea.Admin.SetRunnerDisabled(ctx, scope, ids[n], true), "disable runner %s as the reaper does", n)
	}
	// No warm pool from here on: the next pass starts a runner only for
	// a queued job.
	b.PatchGroup(ctx, t, ns, group, map[string]any{"spec": map[string]any{"minIdleRunners": 0}})

	first := e2e.JobKey("disabled", "first")
	e2e.PushJobs(ctx, t, b, fx, "first.yml", nil, e2e.WfJob{Key: first, RunsOn: []string{label}})
	firstID := e2e.IDsOf(b.Gitea.WaitJobs(ctx, t, fx.Repo, 1), first)[first]
	watchEnd := time.Now().Add(disabledWatch)
	for time.Now().Before(watchEnd) {
		gjobs, err := b.Gitea.RepoJobs(ctx, fx.Repo)
		require.NoError(t, err)
		for _, gj := range gjobs {
			require.False(t, gj.ID == firstID && gj.RunnerName != "", "a disabled runner must take no job: %s by %s", gj.State(), gj.RunnerName)
		}
		e2e.SleepCtx(ctx, 250*time.Millisecond)
	}
	for _, j := range warm {
		pods, err := b.JobPods(ctx, ns, j.Name)
		require.NoError(t, err)
		require.Len(t, pods, 1)
		require.NotEmpty(t, pods[0].Status.ContainerStatuses)
		require.NotNil(t, pods[0].Status.ContainerStatuses[0].State.Running,
			"a disabled gitea-runner does not exit on its own: %+v", pods[0].Status.ContainerStatuses[0].State)
	}

	// Enabled again, the first runner takes the job without any pass.
	require.NoError(t, b.Gitea.Admin.SetRunnerDisabled(ctx, scope, ids[names[0]], false))
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the enabled runner takes the queued job", dump, func(ctx context.Context) (bool, string, error) {
		gjobs, err := b.Gitea.RepoJobs(ctx, fx.Repo)
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
	second := e2e.JobKey("disabled", "second")
	e2e.PushJobs(ctx, t, b, fx, "second.yml", nil, e2e.WfJob{Key: second, RunsOn: []string{label}})
	secondID := e2e.IDsOf(b.Gitea.WaitJobs(ctx, t, fx.Repo, 2), second)[second]
	b.LifecyclePass(ctx, t, ns, 10*time.Minute, 10*time.Minute)
	served := b.ExpectCompleted(ctx, t, ns, group, fx.Repo, map[string]int64{second: secondID}, dump)
	require.NotContains(t, names, served[second].Gitea.RunnerName, "a new runner, not a warm one, ran the job")
	_, still := b.OrgRunners(ctx, t, fx.Spec.Org)[names[1]]
	require.False(t, still, "the pass removes the disabled runner's registration")
	left, err := b.RunnerJobs(ctx, ns, group)
	require.NoError(t, err)
	require.NotContains(t, e2e.JobNames(left), warm[1].Name, "the pass deletes the disabled runner's Job")
}
