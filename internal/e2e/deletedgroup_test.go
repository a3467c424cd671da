//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
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
	waitUntil(ctx, t, 5*time.Minute, "runner "+runner+" of the deleted group removed from Gitea", nil, func(ctx context.Context) (bool, string, error) {
		b.lifecyclePass(ctx, t, ns, time.Hour, 10*time.Minute)
		r, ok := b.orgRunners(ctx, t, fx.spec.Org)[runner]
		return !ok, fmt.Sprintf("runner %+v", r), nil
	})
	evs, err := b.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=RunnerReaped"})
	require.NoError(t, err)
	var said []string
	for _, ev := range evs.Items {
		said = append(said, ev.Message)
	}
	require.Contains(t, strings.Join(said, "\n"), "Removed runner "+runner+" from Gitea: RunnerGroup "+ns+"/idle that registered it is gone")
}
