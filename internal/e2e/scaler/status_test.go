//go:build e2e

package scaler

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

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
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 5*time.Minute)
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "status", Max: 1})
	keys, wf := e2e.NumberedJobs("status", 3, s.Label)
	e2e.PushJobs(ctx, t, b, s.Fx, "ci.yml", keys, wf...)
	t.Cleanup(func() { b.Release(t, keys...) })
	b.Gitea.WaitJobs(ctx, t, s.Fx.Repo, len(keys))

	e2e.WaitUntil(ctx, t, e2e.StepWait, "the group is at capacity with jobs queued", s.Dump, func(ctx context.Context) (bool, string, error) {
		rg, err := b.Group(ctx, s.NS, s.Group)
		if err != nil {
			return false, err.Error(), nil
		}
		return rg.Status.ActiveRunners == 1 && rg.Status.QueuedJobs >= 1, e2e.StatusLine(rg), nil
	})

	run := func(args ...string) string {
		cmd := exec.CommandContext(ctx, filepath.Join(b.Root, "bin", "gitea-runner-scaler"),
			append([]string{"status", "--kubeconfig", b.Kubeconfig, "-n", s.NS}, args...)...)
		out, err := cmd.Output()
		require.NoError(t, err, string(out))
		return string(out)
	}
	table := run()
	t.Logf("status:\n%s", table)
	assert.Regexp(t, regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(s.NS+"/"+s.Group)+`\s+org `+regexp.QuoteMeta(s.Fx.Spec.Org)+`\s+[1-3]\s+0\s+[01]\s+1/1\s+[01]/0\s+\S+ \(\S+ ago\)\s+True/Reconciled\s+False/AtCapacity$`), table)

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
	assert.Equal(t, s.Group, g.Name)
	assert.Equal(t, [2]int32{1, 1}, [2]int32{g.Active, g.Max})
	assert.Equal(t, v1alpha1.ReasonAtCapacity, g.ScalingActive.Reason)
	assert.NotNil(t, g.LastPass)
}
