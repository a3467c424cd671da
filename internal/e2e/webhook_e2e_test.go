//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWebhookStartsARunnerBeforeThePoll: a looping scaler whose next poll
// is ten minutes away gets the real Gitea's workflow_job delivery for a
// pushed job (the bed's Gitea allows loopback targets in [webhook]
// ALLOWED_HOST_LIST) and creates the job's runner Job at once. It prints
// the time from the push to the runner Job.
func TestWebhookStartsARunnerBeforeThePoll(t *testing.T) {
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 4*time.Minute)
	fx := b.newOrgScope(ctx, t, uniq("e2e-hook"))
	label := uniq("e2e-hook")
	ns := b.quietNamespace(ctx, t, "e2e-hook")
	b.faultGroup(ctx, t, ns, "hooked", fx, b.gitea.admin.URL(), 2, label)

	// A free loopback port for the scaler's webhook endpoint.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	secret := uniq("hook-secret")
	secrets.add(secret)
	secretFile := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secretFile, []byte(secret), 0o600))

	run := b.startPass(ctx, t, passOpts{namespaces: []string{ns}, deadline: 3 * time.Minute,
		args: []string{"--loop", "--interval", "10m", "--webhook-addr", addr, "--webhook-secret-file", secretFile}})
	defer func() {
		_ = run.cmd.Process.Signal(syscall.SIGTERM)
		res := run.wait(t)
		t.Logf("scaler log tail:\n%s", redact(tail(res.log, 15)))
	}()
	// The first pass (nothing queued) is done when the group shows a check.
	b.waitPasses(ctx, t, ns, "hooked", 0, nil, nil)
	require.NoError(t, fx.pushAs.CreateRepoHook(ctx, fx.repo, "http://"+addr+"/webhook", secret))

	pushed := time.Now()
	ids := b.queueJobs(ctx, t, fx, "hook.yml", map[string]int{label: 1})[label]
	require.Len(t, ids, 1)
	var took time.Duration
	eventually(ctx, t, fmt.Sprintf("a runner Job for Gitea job %d before the next poll", ids[0]), func(ctx context.Context) (bool, error) {
		jobs, err := b.runnerJobs(ctx, ns, "hooked")
		if err != nil || len(jobs) == 0 {
			return false, err
		}
		took = jobs[0].CreationTimestamp.Sub(pushed)
		return true, nil
	})
	t.Logf("webhook: push to runner Job %s (the next poll was 10m away)", took.Round(time.Second))
}
