//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// TestStatusShowsAGroupAtCapacity: a group capped at one runner with three
// jobs pushed; once its listener has started the one runner, `status` (the
// built binary, against the real API server) shows the group with its
// queued jobs, 1/1 active and ScalingActive AtCapacity, in the table and in
// JSON.
func TestStatusShowsAGroupAtCapacity(t *testing.T) {
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 5*time.Minute)
	s := b.servedGroup(ctx, t, sceneOpts{name: "status", max: 1})
	keys, wf := numberedJobs("status", 3, s.label)
	pushJobs(ctx, t, b, s.fx, "ci.yml", keys, wf...)
	t.Cleanup(func() { b.release(t, keys...) })
	b.gitea.waitJobs(ctx, t, s.fx.repo, len(keys))

	waitUntil(ctx, t, stepWait, "the group is at capacity with jobs queued", s.dump, func(ctx context.Context) (bool, string, error) {
		rg, err := b.group(ctx, s.ns, s.group)
		if err != nil {
			return false, err.Error(), nil
		}
		return rg.Status.ActiveRunners == 1 && rg.Status.QueuedJobs >= 1, statusLine(rg), nil
	})

	run := func(args ...string) string {
		cmd := exec.CommandContext(ctx, filepath.Join(b.root, "bin", "gitea-runner-scaler"),
			append([]string{"status", "--kubeconfig", b.kubeconfig, "-n", s.ns}, args...)...)
		out, err := cmd.Output()
		require.NoError(t, err, string(out))
		return string(out)
	}
	table := run()
	t.Logf("status:\n%s", table)
	assert.Regexp(t, regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(s.ns+"/"+s.group)+`\s+org `+regexp.QuoteMeta(s.fx.spec.Org)+`\s+[1-3]\s+0\s+[01]\s+1/1\s+[01]/0\s+\S+ \(\S+ ago\)\s+True/Reconciled\s+False/AtCapacity$`), table)

	var got struct {
		Groups []struct {
			Namespace, Name string
			Active, Max     int32
			ScalingActive   struct{ Reason string } `json:"scalingActive"`
			LastPass        *time.Time              `json:"lastPass"`
		} `json:"groups"`
	}
	require.NoError(t, json.Unmarshal([]byte(run("-o", "json")), &got))
	require.Len(t, got.Groups, 1)
	g := got.Groups[0]
	assert.Equal(t, s.group, g.Name)
	assert.Equal(t, [2]int32{1, 1}, [2]int32{g.Active, g.Max})
	assert.Equal(t, v1alpha1.ReasonAtCapacity, g.ScalingActive.Reason)
	assert.NotNil(t, g.LastPass)
}
