//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A RunnerGroup deleted while its runner is registered and has never run a
// job takes its runner Job with it but not the registration; the passes of
// another group of its namespace and Gitea scope remove the registration
// (the namespace's ledger names the deleted group's owner tag).
func TestLifecycleDeletedGroupRegistrationIsRemoved(t *testing.T) {
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 8*time.Minute)
	ns, fx, _, runner := b.idleRegisteredRunner(ctx, t, "e2e-gone", time.Hour)
	b.faultGroup(ctx, t, ns, "keeper", fx, b.gitea.admin.URL(), 2, uniq("keeper"))

	require.NoError(t, b.groups(ns).Delete(ctx, "idle", metav1.DeleteOptions{}))
	b.passUntilRunnerRemoved(ctx, t, ns, fx.spec.Org, runner, 5*time.Minute, "runner "+runner+" of the deleted group removed from Gitea")
	require.Contains(t, b.reapedMessages(ctx, t, ns), "Removed runner "+runner+" from Gitea: RunnerGroup "+ns+"/idle that registered it is gone")
}
