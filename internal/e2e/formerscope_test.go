//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// A group moved from its org to one of the org's repositories (issue
// 25.8) leaves its idle runner registered in the org: the next passes
// disable it there, confirm with the org's running jobs that it runs none,
// and delete its runner Job and its registration.
func TestLifecycleRunnerOfAFormerScopeIsReaped(t *testing.T) {
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 6*time.Minute)
	ns, fx, job, runner := b.idleRegisteredRunner(ctx, t, "e2e-moved", time.Hour)
	repo := b.gitea.createOrgRepo(ctx, t, fx.spec.Org, "moved")

	rg := b.patchGroup(ctx, t, ns, "idle", map[string]any{"spec": map[string]any{"scope": string(v1alpha1.ScopeRepo), "repo": repo.Name}})
	require.Equal(t, v1alpha1.ScopeRepo, rg.Spec.Scope, "the group moves to repository %s", repo)

	waitUntil(ctx, t, 3*time.Minute, "runner "+runner+" of the former scope reaped", nil, func(ctx context.Context) (bool, string, error) {
		b.lifecyclePass(ctx, t, ns, time.Hour, 10*time.Minute)
		jobs, err := b.runnerJobs(ctx, ns, "idle")
		if err != nil {
			return false, "", err
		}
		_, registered := b.orgRunners(ctx, t, fx.spec.Org)[runner]
		return len(jobs) == 0 && !registered, fmt.Sprintf("runner Jobs %v, registered in org %s: %v", jobNames(jobs), fx.spec.Org, registered), nil
	})
	require.Contains(t, b.reapedMessages(ctx, t, ns), "Reaped runner Job "+job.Name+": its runner is registered in the group's former Gitea scope (org "+fx.spec.Org+")")
}
