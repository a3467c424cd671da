//go:build e2e

package scaler

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// TestWarmPoolServesTheNextJobWithoutANewPod: a group with
// spec.minIdleRunners 2 and no demand keeps 2 runners registered in the real
// Gitea, and its status says 2 are warm; the next job is taken by one of
// them, so no pod is started for it.
func TestWarmPoolServesTheNextJobWithoutANewPod(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 6*time.Minute)
	// Once the job is queued, the pass also starts a runner to top the pool
	// up, and Gitea gives the job to whichever runner asks first: warm
	// runners that ask every 200ms, without backing off while idle, win over
	// one that must still start, register and ask. The group's runner
	// config says so, as a user would tune Gitea's runner for a warm pool.
	config := &v1alpha1.RunnerConfig{Runner: &v1alpha1.RunnerRunnerConfig{FetchInterval: ptr.To("200ms"), FetchIntervalMax: ptr.To("200ms")}}
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "warm", Max: 3, MinIdle: 2, RunnerConfig: config})

	var warm []string
	e2e.WaitUntil(ctx, t, e2e.StepWait, "2 warm runners registered and shown as warm", s.Dump, func(ctx context.Context) (bool, string, error) {
		jobs, err := b.RunnerJobs(ctx, s.NS, s.Group)
		if err != nil {
			return false, "", err
		}
		regs := b.OrgRunners(ctx, t, s.Fx.Spec.Org)
		warm = warm[:0]
		registered := 0
		for _, j := range jobs {
			warm = append(warm, j.Name)
			if _, ok := regs[runnerjob.RunnerNameOf(&j)]; ok {
				registered++
			}
		}
		rg, err := b.Group(ctx, s.NS, s.Group)
		if err != nil {
			return false, "", err
		}
		state := fmt.Sprintf("%d runner Jobs, %d registered; %s warm=%d", len(jobs), registered, e2e.StatusLine(rg), rg.Status.WarmRunners)
		if len(jobs) > 2 {
			return false, state, fmt.Errorf("more runner Jobs than the warm pool: %s", state)
		}
		return len(jobs) == 2 && registered == 2 && rg.Status.WarmRunners == 2, state, nil
	})
	sort.Strings(warm)
	t.Logf("warm runner Jobs: %v", warm)

	warmNames := map[string]string{} // runner name -> runner Job
	jobsNow, err := b.RunnerJobs(ctx, s.NS, s.Group)
	require.NoError(t, err)
	for i := range jobsNow {
		warmNames[runnerjob.RunnerNameOf(&jobsNow[i])] = jobsNow[i].Name
	}

	key := e2e.JobKey("warm")
	e2e.PushJobs(ctx, t, b, s.Fx, "ci.yml", nil, e2e.WfJob{Key: key, RunsOn: []string{s.Label}})
	id := e2e.IDsOf(b.Gitea.WaitJobs(ctx, t, s.Fx.Repo, 1), key)[key]
	var tookIt string
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the job done by a warm runner", s.Dump, func(ctx context.Context) (bool, string, error) {
		gjobs, err := b.Gitea.RepoJobs(ctx, s.Fx.Repo)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, gj := range gjobs {
			if gj.ID != id {
				continue
			}
			if gj.Status == "completed" && gj.Conclusion != "success" {
				return false, "", fmt.Errorf("the job ended %s", gj.State())
			}
			tookIt = warmNames[gj.RunnerName]
			if gj.RunnerName != "" && tookIt == "" {
				return false, "", fmt.Errorf("runner %q took the job, none of the warm runners %v", gj.RunnerName, warm)
			}
			return gj.State() == "completed/success", gj.State() + " runner=" + gj.RunnerName, nil
		}
		return false, "job not listed", nil
	})
	assert.Contains(t, warm, tookIt, "a warm runner took the job: no pod was started for it")
	t.Logf("warm runner Job %s served Gitea job %d", tookIt, id)

	// The pool is topped up again: 2 runner Jobs that are not finished.
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the pool topped up to 2 again", s.Dump, func(ctx context.Context) (bool, string, error) {
		jobs, err := b.RunnerJobs(ctx, s.NS, s.Group)
		if err != nil {
			return false, "", err
		}
		active := 0
		for i := range jobs {
			if runnerjob.IsActive(&jobs[i]) {
				active++
			}
		}
		return active == 2, fmt.Sprintf("%d runner Jobs, %d active", len(jobs), active), nil
	})
}
