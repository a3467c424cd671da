//go:build e2e

package lifecycle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A group moved from its org to another org, with that org's
// registration token (issue 25.8), leaves its idle runner registered in
// the first org, whose runners take none of the new org's jobs: the next
// passes disable it there, confirm with that org's running jobs that it
// runs none, and delete its runner Job and its registration. (A move into
// a scope the old one contains, such as one of the org's repositories,
// is no move for the runners: an org's runners take its repositories'
// jobs, and they stay supply; issue 32.)
func TestLifecycleRunnerOfAFormerScopeIsReaped(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 6*time.Minute)
	ns, fx, job, runner := idleRegisteredRunner(b, ctx, t, "e2e-moved", time.Hour)
	to := b.NewOrgScope(ctx, t, e2e.Uniq("e2e-moved-to"))

	sec, err := b.Kube.CoreV1().Secrets(ns).Get(ctx, e2e.GroupSecret("idle"), metav1.GetOptions{})
	require.NoError(t, err)
	e2e.Secrets.Add(to.RegToken)
	sec.Data["registration"] = []byte(to.RegToken)
	_, err = b.Kube.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{})
	require.NoError(t, err)
	rg := b.PatchGroup(ctx, t, ns, "idle", map[string]any{"spec": map[string]any{"org": to.Spec.Org}})
	require.Equal(t, to.Spec.Org, rg.Spec.Org, "the group moves to org %s", to.Spec.Org)

	e2e.WaitUntil(ctx, t, 3*time.Minute, "runner "+runner+" of the former scope reaped", nil, func(ctx context.Context) (bool, string, error) {
		b.LifecyclePass(ctx, t, ns, time.Hour, 10*time.Minute)
		jobs, err := b.RunnerJobs(ctx, ns, "idle")
		if err != nil {
			return false, "", err
		}
		_, registered := b.OrgRunners(ctx, t, fx.Spec.Org)[runner]
		return len(jobs) == 0 && !registered, fmt.Sprintf("runner Jobs %v, registered in org %s: %v", e2e.JobNames(jobs), fx.Spec.Org, registered), nil
	})
	require.Contains(t, b.ReapedMessages(ctx, t, ns), "Reaped runner Job "+job.Name+": its runner is registered in the group's former Gitea scope (org "+fx.Spec.Org+")")
}
