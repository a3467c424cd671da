//go:build e2e

package runners

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
)

const (
	// cleanupFor is how long the cancelled job's cleanup runs: shorter
	// than the 5 to 10 s Gitea calls a runner busy after its last report
	// (gitea-runner stops reporting once it learns of the cancel,
	// internal/pkg/report/reporter.go), so a scaler that keeps a busy
	// runner keeps it for the whole cleanup.
	cleanupFor = 6 * time.Second
	// longCleanupFor outlasts Gitea's busy flag: the runner then looks
	// idle (or, disabled, unable), and only the passes' sightings of it
	// at work keep it.
	longCleanupFor = 20 * time.Second
	// idleTimeout is the --runner-idle-timeout of the case where the
	// runner stays able to take work: its job runs until the runner Job
	// is older than that before the cancel, so a pass that counted idle
	// time from the Job's creation would reap it mid-cleanup. A sighting
	// is kept at most half of it behind the last one, which leaves the
	// cleanup at least a minute.
	idleTimeout = 2 * time.Minute
	// cleanupGrace is the runner pods' terminationGracePeriodSeconds:
	// short, so that a runner Job deleted during the cleanup ends it
	// (shutdown_timeout 1 s, then the pod's processes are killed at 2 s)
	// rather than the runner waiting for it, as it would for 3 h with the
	// built-in grace.
	cleanupGrace = 2
	// cleanupWait bounds the wait for the cleanup's end after the cancel.
	cleanupWait = 90 * time.Second
)

// TestACancelledJobsRunnerFinishesItsCleanupBeforeItsJobGoes (issue 32.3):
// a job whose first step is a node action with a post step (the cleanup:
// it leaves a file when it starts, runs cleanupFor and leaves another when
// it ends) is cancelled in Gitea while its second step runs. Gitea 1.26
// completes a cancelled job at once, so no jobs listing shows its runner
// at work while act runs the post step (act runs post steps of a cancelled
// job, act/runner/job_executor.go); Gitea's busy flag is the one sign.
// Before the cancel the runner was made unable to take work in the two ways
// the lifecycle reaps such runners: disabled in Gitea (a reap that stopped
// after the disable), or left in the group's former scope (the group moved
// to its repository, with that repository's token). The test runs passes
// from the cancel on. The runner Job must not be deleted before the
// cleanup has ended, and the cleanup must end. The disabled runner's
// cleanup outlasts Gitea's busy flag: the passes' sightings of it at work
// keep it. In a third case the runner stays able, its cleanup outlasts the
// flag too, and the job ran longer than the passes' idle timeout: the
// kept sightings are all that keeps it.
//
// On the default bed (Gitea 1.26.0, with gitea-runner 3.1.0 as with
// 1.0.8) it skips after the cancel:
// Gitea deletes the ephemeral runner's registration the moment its job is
// cancelled and the runner is never told (see below), so the case cannot
// arise there. Run before that check existed, it showed the runner Job
// deleted as "not registered in Gitea" about a minute into its run while
// its runner, unaware of the cancel, still ran the job's steps; its
// cleanup ran only after the SIGTERM. On Gitea 1.27.3 with gitea-runner
// 3.1.0 (make test-gitea-versions) it runs: the runner, told of the
// cancel, runs the cleanup while Gitea calls it busy, and its runner Job
// is left alone until it completes.
func TestACancelledJobsRunnerFinishesItsCleanupBeforeItsJobGoes(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	cases := []cleanupCase{
		// Its cleanup outlasts Gitea's busy flag: only the passes'
		// sightings of it at work keep a disabled runner (a cleanup that
		// started late once outlasted a 6 s one's margin).
		{name: "disabled", cleanup: longCleanupFor, unable: func(ctx context.Context, t *testing.T, _, _ string, fx e2e.ScopeFixture, runnerID int64) {
			require.NoError(t, b.Gitea.Admin.SetRunnerDisabled(ctx, giteasetup.OrgRunners(fx.Spec.Org), runnerID, true), "disable the runner as the reaper does")
		}},
		{name: "moved", unable: func(ctx context.Context, t *testing.T, ns, group string, fx e2e.ScopeFixture, _ int64) {
			repoToken := b.Gitea.RegistrationToken(ctx, t, b.Gitea.Admin, giteasetup.RepoRunners(fx.Repo))
			sec, err := b.Kube.CoreV1().Secrets(ns).Get(ctx, e2e.GroupSecret(group), metav1.GetOptions{})
			require.NoError(t, err)
			sec.Data["registration"] = []byte(repoToken)
			_, err = b.Kube.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{})
			require.NoError(t, err)
			rg := b.PatchGroup(ctx, t, ns, group, map[string]any{"spec": map[string]any{"scope": string(v1alpha1.ScopeRepo), "repo": fx.Repo.Name}})
			require.Equal(t, v1alpha1.ScopeRepo, rg.Spec.Scope, "the group moves to repository %s", fx.Repo)
		}},
		// The runner stays able to take work, and its cleanup outlasts
		// Gitea's busy flag: an idle runner of a group without demand,
		// older than the idle timeout, which single passes reap unless
		// the state kept when they last saw it at work.
		{name: "idle", idle: idleTimeout, cleanup: longCleanupFor, needsCancelling: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e2e.ParallelSub(t)
			ctx := e2e.TestContext(t, 6*time.Minute+tc.idle)
			cancelledJobCleansUp(b, ctx, t, tc)
		})
	}
}

// cleanupCase is one way a cancelled job's runner may be taken for one
// the lifecycle should end.
type cleanupCase struct {
	name string
	// unable, if set, makes the group's runner, which runs job #id of
	// fx's repository, unable to take more work.
	unable func(ctx context.Context, t *testing.T, ns, group string, fx e2e.ScopeFixture, runnerID int64)
	// idle is the passes' --runner-idle-timeout (containIdle when 0);
	// the job runs until its runner Job is older than that.
	idle time.Duration
	// cleanup is how long the cleanup runs (cleanupFor when 0).
	cleanup time.Duration
	// needsCancelling skips the case up front on a Gitea older than 1.27,
	// which cannot tell a runner of the cancel (see below).
	needsCancelling bool
}

func cancelledJobCleansUp(b *e2e.Testbed, ctx context.Context, t *testing.T, tc cleanupCase) {
	t.Helper()
	name, idle, cleanup := tc.name, cmp.Or(tc.idle, containIdle), cmp.Or(tc.cleanup, cleanupFor)
	g := b.Gitea
	if tc.needsCancelling {
		skipBeforeCancelling(ctx, t, g.Admin)
	}
	fx := b.NewOrgScope(ctx, t, e2e.Uniq("e2e-cleanup-"+name))
	// Who cancels: a writer of the repository, signed in to the web UI.
	user := e2e.Uniq("e2e-canceller-" + name)
	pass := g.CreateUser(ctx, t, user)
	e2e.MustGitea(t, g.Admin.AddCollaborator(ctx, fx.Repo, user, "write"), "make %s a writer of %s", user, fx.Repo)
	canceller := g.Admin.WithPassword(user, pass)

	key := e2e.JobKey("cleanup", name)
	started, ended := filepath.Join(e2e.HoldDir, "cleanup-started-"+key), filepath.Join(e2e.HoldDir, "cleanup-ended-"+key)
	// The action lives in a repository of its own: pushed to the
	// workflow's, each of its pushes that Gitea's queue handled after the
	// workflow landed ran the workflow again (Gitea reads a push's
	// workflows at the branch's head), and a second run's job took the
	// group's one runner.
	action := g.CreateOrgRepo(ctx, t, fx.Spec.Org, "cleanup")
	pushCleanupAction(b, ctx, t, action, started, ended, cleanup)

	ns := b.Namespace(ctx, t, "e2e-cleanup-"+name, nil)
	group := "cleanup"
	label := e2e.Uniq("e2e-cleanup-" + name)
	b.TokenSecret(ctx, t, ns, e2e.GroupSecret(group), fx.RegToken, fx.APIToken)
	spec := b.GroupSpec(fx, e2e.GroupSecret(group), 1, label)
	spec.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](cleanupGrace)}}
	b.CreateGroup(ctx, t, ns, group, nil, spec)
	dump := func() string { return b.DumpNamespaces(ns) + g.JobsLine(fx.Repo) }
	s := e2e.Scene{NS: ns, Fx: fx, Group: group, Label: label, Dump: dump}

	b.Hold(t, key)
	g.PushWorkflow(ctx, t, fx.PushAs, fx.Repo, "cleanup.yml", cleanupWorkflow(key, label, g.Admin.URL()+"/"+action.String()+"@main"))
	gj := g.WaitJobs(ctx, t, fx.Repo, 1)[key]
	b.LifecyclePass(ctx, t, ns, idle, containStart)
	runner := runnerRunningStep(b, ctx, t, s, key, gj.ID)
	runnerName := ""
	if gj, err := b.GiteaJob(ctx, fx.Repo, gj.ID); err == nil {
		runnerName = gj.RunnerName
	}
	reg, ok := b.OrgRunners(ctx, t, fx.Spec.Org)[runnerName]
	require.True(t, ok, "runner %s registered in org %s", runnerName, fx.Spec.Org)

	if tc.unable != nil {
		tc.unable(ctx, t, ns, group, fx, reg.ID)
	}
	w := b.WatchJob(ctx, runner)
	defer w.End()
	// Passes while the job runs (with tc.idle, until its runner Job is
	// older than that): they must leave the runner alone.
	for {
		b.LifecyclePass(ctx, t, ns, idle, containStart)
		if _, _, gone := w.Deleted(); gone {
			t.Fatalf("%s while its job ran\nevents: %s\n%s", w.Describe(), eventsAbout(b, ctx, t, ns, runner.Name), e2e.Redact(dump()))
		}
		if tc.idle == 0 || time.Since(runner.CreationTimestamp.Time) > tc.idle+5*time.Second {
			break
		}
		e2e.SleepCtx(ctx, 10*time.Second)
	}

	require.NoError(t, canceller.CancelRun(ctx, fx.Repo, gj.RunID), "cancel run %d in Gitea", gj.RunID)
	cancelled := time.Now()
	// Gitea 1.26.0 deletes an ephemeral runner's registration as soon as
	// its task is done, a cancel included (models/actions/task.go
	// UpdateTask, DeleteEphemeralRunner): the runner's next UpdateLog and
	// UpdateTask fail (500), so the runner (1.0.8 and 3.1.0 alike) is
	// never told of the cancel and runs the job's steps on. No busy flag, and no cleanup
	// after a cancel, until its pod is stopped. The case this test is for
	// (a registered runner Gitea calls busy while it cleans up) needs a
	// Gitea with the cancelling state and a runner that declares it.
	// Gitea 1.27.3 with gitea-runner 3.1.0 (which declares the cancelling
	// capability) tells the runner: the job stays listed in_progress while
	// the runner runs its cleanup, so the cleanup's start is an answer too,
	// and the passes below run while it lasts.
	var forgotten bool
	e2e.WaitUntil(ctx, t, 15*time.Second, "Gitea's answer to the cancel", dump, func(ctx context.Context) (bool, string, error) {
		if _, err := os.Stat(started); err == nil {
			return true, "", nil
		}
		gj, err := b.GiteaJob(ctx, fx.Repo, gj.ID)
		if err != nil || gj.Status != "completed" {
			return false, fmt.Sprintf("job %s %v", gj.State(), err), nil
		}
		_, registered := b.OrgRunners(ctx, t, fx.Spec.Org)[runnerName]
		_, err = os.Stat(started)
		forgotten = !registered && os.IsNotExist(err)
		return true, "", nil
	})
	if forgotten {
		t.Skipf("Gitea deleted the registration of ephemeral runner %s when its job was cancelled, and the runner is not told (Gitea 1.26): "+
			"it cannot be a registered runner Gitea calls busy while it cleans up, which this test is for", runnerName)
	}
	var passLog, busy []string
	var cleanupEnd time.Time
	for time.Since(cancelled) < cleanupWait {
		r := b.LifecyclePass(ctx, t, ns, idle, containStart)
		passLog = append(passLog, r.Log)
		if rr, ok := b.OrgRunners(ctx, t, fx.Spec.Org)[runnerName]; ok {
			busy = append(busy, fmt.Sprintf("+%s busy=%v disabled=%v", time.Since(cancelled).Round(100*time.Millisecond), rr.Busy, rr.Disabled))
		} else {
			busy = append(busy, fmt.Sprintf("+%s not registered in the org", time.Since(cancelled).Round(100*time.Millisecond)))
		}
		if fi, err := os.Stat(ended); err == nil {
			cleanupEnd = fi.ModTime()
		}
		_, _, gone := w.Deleted()
		if !cleanupEnd.IsZero() && (gone || w.State() != "Active") {
			break
		}
		e2e.SleepCtx(ctx, time.Second)
	}
	state := "not listed"
	if gj, err := b.GiteaJob(ctx, fx.Repo, gj.ID); err == nil {
		state = gj.State()
	}
	cleanupStart := "never"
	if fi, err := os.Stat(started); err == nil {
		cleanupStart = "+" + fi.ModTime().Sub(cancelled).Round(100*time.Millisecond).String()
	}
	at, _, gone := w.Deleted()
	seen := fmt.Sprintf("Gitea job %s (#%d) %s; cleanup started %s, ended %s; %s; the runner in Gitea after the cancel: %s",
		key, gj.ID, state, cleanupStart, since(cleanupEnd, cancelled), w.Describe(), strings.Join(busy, ", "))
	t.Log(seen)
	if gone && (cleanupEnd.IsZero() || at.Before(cleanupEnd)) {
		t.Fatalf("runner Job %s deleted %s after the cancel, before its cleanup ended: %s\nevents: %s\npass log: %s\n%s",
			runner.Name, at.Sub(cancelled).Round(100*time.Millisecond), seen, eventsAbout(b, ctx, t, ns, runner.Name),
			e2e.Redact(passLines(passLog, runner.Name)), e2e.Redact(dump()))
	}
	require.False(t, cleanupEnd.IsZero(), "the cancelled job's cleanup ended within %s: %s", cleanupWait, seen)
	require.Equal(t, "completed/cancelled", state, "Gitea records the cancel: %s", seen)
}

// since is t as an offset from start, or "never".
func since(t, start time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return "+" + t.Sub(start).Round(100*time.Millisecond).String()
}

// pushCleanupAction commits a node action to the repository's root:
// its main step does nothing; its post step, which act runs after the
// job's steps even when the job was cancelled (with a context of its own),
// leaves the file started, runs for the given time, then leaves the file
// ended. The bed's runners run on the host, which has node.
func pushCleanupAction(b *e2e.Testbed, ctx context.Context, t *testing.T, r giteasetup.Repo, started, ended string, cleanupFor time.Duration) {
	t.Helper()
	files := []struct{ path, content string }{
		{"action.yml", "name: cleanup\ndescription: a cleanup that runs after the job, also when it is cancelled\nruns:\n  using: node20\n  main: main.js\n  post: post.js\n"},
		{"main.js", "console.log('cleanup armed');\n"},
		{"post.js", fmt.Sprintf("const fs = require('fs');\nfs.writeFileSync(%q, '');\nconsole.log('cleanup started');\n"+
			"setTimeout(() => { fs.writeFileSync(%q, ''); console.log('cleanup ended'); }, %d);\n", started, ended, cleanupFor.Milliseconds())},
	}
	for _, f := range files {
		e2e.MustGitea(t, b.Gitea.Admin.PushFile(ctx, r, f.path, []byte(f.content)), "push %s to %s", f.path, r)
	}
}

// cleanupWorkflow is one job on label whose first step is the cleanup
// action at uses and whose second is jobSteps(key) (held while
// b.hold(key)).
func cleanupWorkflow(key, label, uses string) string {
	steps := strings.TrimPrefix(e2e.JobSteps(key), "    steps:\n")
	return fmt.Sprintf("name: e2e\non: [push]\njobs:\n  %s:\n    runs-on: [%s]\n    steps:\n      - uses: %s\n%s", key, label, uses, steps)
}

// skipBeforeCancelling skips on a Gitea older than 1.27, which deletes a
// cancelled job's ephemeral runner at once instead of letting it clean up.
func skipBeforeCancelling(ctx context.Context, t *testing.T, admin *giteasetup.Client) {
	t.Helper()
	v, err := admin.Version(ctx)
	require.NoError(t, err)
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err == nil && (major > 1 || minor >= 27) {
		return
	}
	t.Skipf("Gitea %s has no cancelling state: a cancelled job's runner is never told, so it never cleans up while registered", v)
}
