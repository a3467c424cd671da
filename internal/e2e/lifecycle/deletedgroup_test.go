//go:build e2e

package lifecycle

import (
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A RunnerGroup deleted while its runner is registered and has never run a
// job takes its runner Job with it but not the registration; the passes of
// another group of its namespace and Gitea scope remove the registration
// (the namespace's ledger names the deleted group's owner tag).
func TestLifecycleDeletedGroupRegistrationIsRemoved(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 8*time.Minute)
	ns, fx, _, runner := idleRegisteredRunner(b, ctx, t, "e2e-gone", time.Hour)
	b.FaultGroup(ctx, t, ns, "keeper", fx, b.Gitea.Admin.URL(), 2, e2e.Uniq("keeper"))

	require.NoError(t, b.Groups(ns).Delete(ctx, "idle", metav1.DeleteOptions{}))
	passUntilRunnerRemoved(b, ctx, t, ns, fx.Spec.Org, runner, 5*time.Minute, "runner "+runner+" of the deleted group removed from Gitea")
	require.Contains(t, b.ReapedMessages(ctx, t, ns), "Removed runner "+runner+" from Gitea: RunnerGroup "+ns+"/idle that registered it is gone")
}
