//go:build e2e

package runners

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

const (
	// containStart is the passes' --runner-start-timeout: short, so that a
	// runner Job is well past it while its job still runs.
	containStart = 20 * time.Second
	// containIdle is the passes' --runner-idle-timeout: long (no idle
	// runner is reaped here) but not 0, which would turn the runners API,
	// and with it every reading of registrations, off.
	containIdle = 10 * time.Minute
	// containWatch is how long after its runner Job's creation the other
	// repository's job is held running, with passes every containEvery:
	// the start timeout, plus the minute a runner container may run
	// before a runner missing from the listing counts as unregistered
	// (scaler.registerGrace), plus 40 s of passes that would see it so.
	containWatch = containStart + time.Minute + 40*time.Second
	containEvery = 3 * time.Second
)

// TestARunnerOfAnOrgTokenFinishesAnotherRepositorysJob (issue 32.1): a
// repo-scope group whose registration token is its organisation's (a
// containing scope, which the token check accepts) starts runners that
// register in the organisation, so Gitea hands them any of the
// organisation's queued jobs their labels match. Here the runner started
// for the group's own job in "app" takes an older job of the sibling
// repository "other" (Gitea gives the oldest waiting job first:
// models/actions/task.go CreateTaskForRunner) and runs it, held, for well
// past --runner-start-timeout while the test runs a pass every few
// seconds. Its runner Job must stay (not deleted, not terminating) for the
// whole job, no pass may report it reaped or stuck, the job succeeds once
// released, and then the group's own job is served.
func TestARunnerOfAnOrgTokenFinishesAnotherRepositorysJob(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 8*time.Minute)
	g := b.Gitea
	org := g.CreateOrg(ctx, t, e2e.Uniq("e2e-contain"))
	app := g.CreateOrgRepo(ctx, t, org, "app")
	other := g.CreateOrgRepo(ctx, t, org, "other")
	fx := e2e.ScopeFixture{Spec: v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeRepo, Org: org, Repo: app.Name}, Repo: app, PushAs: g.Admin,
		RegToken: g.RegistrationToken(ctx, t, g.Admin, giteasetup.OrgRunners(org)), APIToken: g.AdminToken}
	otherFx := fx
	otherFx.Repo = other
	label := e2e.Uniq("e2e-contain")
	ns := b.Namespace(ctx, t, "e2e-contain", nil)
	const group = "narrow"
	b.CreateScopedGroup(ctx, t, ns, group, fx, 1, label)
	dump := func() string { return b.DumpNamespaces(ns) + g.JobsLine(app, other) }

	long, own := e2e.JobKey("contain", "long"), e2e.JobKey("contain", "own")
	e2e.PushJobs(ctx, t, b, otherFx, "long.yml", []string{long}, e2e.WfJob{Key: long, RunsOn: []string{label}})
	longID := e2e.IDsOf(g.WaitJobs(ctx, t, other, 1), long)[long]
	// Gitea orders waiting jobs by their update time in seconds: own is
	// pushed a second later so that long is the older.
	e2e.SleepCtx(ctx, 1100*time.Millisecond)
	e2e.PushJobs(ctx, t, b, fx, "own.yml", nil, e2e.WfJob{Key: own, RunsOn: []string{label}})
	ownID := e2e.IDsOf(g.WaitJobs(ctx, t, app, 1), own)[own]

	var passLog []string
	pass := func() {
		r := b.LifecyclePass(ctx, t, ns, containIdle, containStart)
		passLog = append(passLog, r.Log)
	}

	// The group starts a runner for own; that runner takes long.
	var runner batchv1.Job
	e2e.WaitEvery(ctx, t, containEvery, e2e.StepWait, "the group's runner running the other repository's job", dump, func(ctx context.Context) (bool, string, error) {
		pass()
		gj, err := b.GiteaJob(ctx, other, longID)
		if err != nil {
			return false, err.Error(), nil
		}
		mine, err := b.GiteaJob(ctx, app, ownID)
		if err == nil && mine.RunnerName != "" {
			return false, "", fmt.Errorf("the group's runner %s took its own job %s, not the older job of %s: this test cannot show what it is for", mine.RunnerName, own, other)
		}
		if gj.Status != "in_progress" || gj.RunnerName == "" {
			return false, "long is " + gj.State(), nil
		}
		if _, err := os.Stat(e2e.StepStarted(long)); err != nil {
			return false, "long's step has not started", nil
		}
		jobs, err := b.RunnerJobs(ctx, ns, group)
		if err != nil {
			return false, err.Error(), nil
		}
		for i := range jobs {
			if runnerjob.RunnerNameOf(&jobs[i]) == gj.RunnerName {
				runner = jobs[i]
				return true, "", nil
			}
		}
		return false, "", fmt.Errorf("long was taken by runner %s, which is no runner Job of group %s: %v", gj.RunnerName, group, e2e.JobNames(jobs))
	})
	t.Logf("runner Job %s (created %s) runs %s's job %s (#%d) for group %s of %s", runner.Name,
		runner.CreationTimestamp.UTC().Format(time.RFC3339), other, long, longID, group, app)

	// Passes for well past the start timeout, while long runs.
	w := b.WatchJob(ctx, runner)
	defer w.End()
	until := runner.CreationTimestamp.Add(containWatch)
	passes := 0
	for time.Now().Before(until) {
		pass()
		passes++
		if _, _, gone := w.Deleted(); gone {
			break
		}
		gj, err := b.GiteaJob(ctx, other, longID)
		require.NoError(t, err)
		require.Equal(t, "in_progress", gj.Status, "the other repository's job ended while held: %s\n%s", gj.State(), e2e.Redact(dump()))
		e2e.SleepCtx(ctx, containEvery)
	}
	if at, _, gone := w.Deleted(); gone {
		t.Fatalf("%s while its runner ran %s's job %s (#%d), %s past --runner-start-timeout %s, after %d passes\nevents: %s\npass log: %s\n%s",
			w.Describe(), other, long, longID, at.Sub(runner.CreationTimestamp.Add(containStart)).Round(time.Second), containStart, passes,
			eventsAbout(b, ctx, t, ns, runner.Name), e2e.Redact(passLines(passLog, runner.Name)), e2e.Redact(dump()))
	}
	t.Logf("%s after %d passes over %s: runner Job %s is %s", long, passes, time.Since(runner.CreationTimestamp.Time).Round(time.Second), runner.Name, w.State())

	// Released, long succeeds on that runner, whose Job then completes;
	// own gets a runner next. Gitea removes an ephemeral runner's
	// registration as its job ends, in the seconds before the runner
	// exits: a pass then may take it for unregistered and delete its Job,
	// which loses nothing (the job has ended). A deletion before long
	// ended is the defect.
	b.Release(t, long)
	e2e.WaitEvery(ctx, t, containEvery, e2e.StepWait, "long succeeded, its runner Job complete (or deleted after long ended), and own succeeded", dump, func(ctx context.Context) (bool, string, error) {
		pass()
		gl, err := b.GiteaJob(ctx, other, longID)
		if err != nil {
			return false, err.Error(), nil
		}
		if gl.Status == "completed" && gl.Conclusion != "success" {
			return false, "", fmt.Errorf("the other repository's job ended %s", gl.State())
		}
		if at, _, gone := w.Deleted(); gone && gl.Status != "completed" {
			return false, "", fmt.Errorf("%s at %s while long was %s; events: %s", w.Describe(), at.UTC().Format(time.RFC3339), gl.State(), eventsAbout(b, ctx, t, ns, runner.Name))
		}
		gown, err := b.GiteaJob(ctx, app, ownID)
		if err != nil {
			return false, err.Error(), nil
		}
		_, _, gone := w.Deleted()
		state := fmt.Sprintf("long %s, runner Job %s %s, own %s", gl.State(), runner.Name, w.State(), gown.State())
		return gl.State() == "completed/success" && (w.State() == "Complete" || gone) && gown.State() == "completed/success", state, nil
	})
	assert.NotContains(t, eventsAbout(b, ctx, t, ns, runner.Name), "RunnerStartTimeout", "no pass freed the runner Job that ran the job as not started")
}

// eventsAbout are the group's RunnerReaped and RunnerStartTimeout events
// in ns that name a runner Job, a line each.
func eventsAbout(b *e2e.Testbed, ctx context.Context, t *testing.T, ns, job string) string {
	t.Helper()
	evs, err := b.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var said []string
	for _, ev := range evs.Items {
		if (ev.Reason == "RunnerReaped" || ev.Reason == "RunnerStartTimeout") && strings.Contains(ev.Message, job) {
			said = append(said, ev.Reason+": "+ev.Message)
		}
	}
	return strings.Join(said, "\n")
}

// passLines are the lines of the passes' logs that name a runner Job.
func passLines(logs []string, job string) string {
	var out []string
	for _, l := range logs {
		out = append(out, e2e.Lines(l, job)...)
	}
	return strings.Join(out, "\n")
}
