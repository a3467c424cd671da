//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

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
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 6*time.Minute)
	// Once the job is queued, the pass also starts a runner to top the pool
	// up, and Gitea gives the job to whichever runner asks first: warm
	// runners that ask every 200ms, without backing off while idle, win over
	// one that must still start, register and ask. The group's runner
	// config says so, as a user would tune Gitea's runner for a warm pool.
	config := &v1alpha1.RunnerConfig{Runner: &v1alpha1.RunnerRunnerConfig{FetchInterval: ptr.To("200ms"), FetchIntervalMax: ptr.To("200ms")}}
	s := b.servedGroup(ctx, t, sceneOpts{name: "warm", max: 3, minIdle: 2, runnerConfig: config})

	var warm []string
	waitUntil(ctx, t, stepWait, "2 warm runners registered and shown as warm", s.dump, func(ctx context.Context) (bool, string, error) {
		jobs, err := b.runnerJobs(ctx, s.ns, s.group)
		if err != nil {
			return false, "", err
		}
		regs := b.orgRunners(ctx, t, s.fx.spec.Org)
		warm = warm[:0]
		registered := 0
		for _, j := range jobs {
			warm = append(warm, j.Name)
			if _, ok := regs[runnerjob.RunnerNameOf(&j)]; ok {
				registered++
			}
		}
		rg, err := b.group(ctx, s.ns, s.group)
		if err != nil {
			return false, "", err
		}
		state := fmt.Sprintf("%d runner Jobs, %d registered; %s warm=%d", len(jobs), registered, statusLine(rg), rg.Status.WarmRunners)
		if len(jobs) > 2 {
			return false, state, fmt.Errorf("more runner Jobs than the warm pool: %s", state)
		}
		return len(jobs) == 2 && registered == 2 && rg.Status.WarmRunners == 2, state, nil
	})
	sort.Strings(warm)
	t.Logf("warm runner Jobs: %v", warm)

	warmNames := map[string]string{} // runner name -> runner Job
	jobsNow, err := b.runnerJobs(ctx, s.ns, s.group)
	require.NoError(t, err)
	for i := range jobsNow {
		warmNames[runnerjob.RunnerNameOf(&jobsNow[i])] = jobsNow[i].Name
	}

	key := jobKey("warm")
	pushJobs(ctx, t, b, s.fx, "ci.yml", nil, wfJob{key: key, runsOn: []string{s.label}})
	id := idsOf(b.gitea.waitJobs(ctx, t, s.fx.repo, 1), key)[key]
	var tookIt string
	waitUntil(ctx, t, stepWait, "the job done by a warm runner", s.dump, func(ctx context.Context) (bool, string, error) {
		gjobs, err := b.gitea.repoJobs(ctx, s.fx.repo)
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
	waitUntil(ctx, t, stepWait, "the pool topped up to 2 again", s.dump, func(ctx context.Context) (bool, string, error) {
		jobs, err := b.runnerJobs(ctx, s.ns, s.group)
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
