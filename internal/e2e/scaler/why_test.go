//go:build e2e

package scaler

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/why"
)

// TestWhyExplainsServedBlockedUnmatchedAndWaitingJobs: a group capped at
// one runner, with two jobs that hold their runner once they get one, a job
// that needs both, and a job whose runs-on has a label no group offers.
// Once the group runs one of the two, `why` (the built binary, against the
// real API server and the real Gitea, given Gitea's own job URLs and bare
// IDs) says of each what the scene is: running on the group's runner; at
// capacity; blocked by needs:; and the label no group offers with the
// group's labels. `status` shows the group at capacity.
func TestWhyExplainsServedBlockedUnmatchedAndWaitingJobs(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 6*time.Minute)
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "why", Max: 1})
	first, second := e2e.JobKey("why-a"), e2e.JobKey("why-b")
	after, odd := e2e.JobKey("why-after"), e2e.JobKey("why-odd")
	unknown := e2e.Uniq("e2e-nolabel")
	e2e.PushJobs(ctx, t, b, s.Fx, "ci.yml", []string{first, second},
		e2e.WfJob{Key: first, RunsOn: []string{s.Label}},
		e2e.WfJob{Key: second, RunsOn: []string{s.Label}},
		e2e.WfJob{Key: after, RunsOn: []string{s.Label}, Needs: []string{first, second}},
		e2e.WfJob{Key: odd, RunsOn: []string{s.Label, unknown}},
	)
	t.Cleanup(func() { b.Release(t, first, second) })
	b.Gitea.WaitJobs(ctx, t, s.Fx.Repo, 4)

	// One of first and second runs on the group's only runner; the other
	// waits for it.
	var jobs map[string]giteasetup.Job
	var runningKey, waitingKey string
	e2e.WaitUntil(ctx, t, e2e.StepWait, "one held job runs, the group is at capacity", s.Dump, func(ctx context.Context) (bool, string, error) {
		list, err := b.Gitea.RepoJobs(ctx, s.Fx.Repo)
		if err != nil {
			return false, err.Error(), nil
		}
		jobs = map[string]giteasetup.Job{}
		for _, j := range list {
			jobs[j.Name] = j
		}
		rg, err := b.Group(ctx, s.NS, s.Group)
		if err != nil {
			return false, err.Error(), nil
		}
		runningKey, waitingKey = "", ""
		switch {
		case jobs[first].Status == "in_progress" && jobs[second].Status == "queued":
			runningKey, waitingKey = first, second
		case jobs[second].Status == "in_progress" && jobs[first].Status == "queued":
			runningKey, waitingKey = second, first
		}
		state := fmt.Sprintf("%s; group %s", e2e.DescribeGiteaJobs(list), e2e.StatusLine(rg))
		// Gitea shows a job in_progress before its runner runs it, and a
		// pass may see the runner registered and not yet on the job: wait
		// for a pass that recorded it busy, not idle.
		return runningKey != "" && rg.Status.ActiveRunners == 1 && rg.Status.IdleRunners == 0, state, nil
	})

	bin := filepath.Join(b.Root, "bin", "gitea-runner-scaler")
	run := func(args ...string) string {
		t.Helper()
		args = append(args, "--kubeconfig", b.Kubeconfig, "-n", s.NS)
		if args[0] == "why" {
			// why sends a group's token only where the listener would: the
			// bed's allowed Gitea URLs, as a pass gets them. (status asks
			// Gitea nothing.)
			args = append(args, "--allowed-gitea-urls", strings.Join(b.GiteaURLsOf(ctx, t, []string{s.NS}), ","))
			// and only from a namespace enabled for the release's
			// ServiceAccount, as a pass (issue 36).
			args = append(args, "--service-account", s.Sys+":"+s.Rel.Fullname())
		}
		cmd := exec.CommandContext(ctx, bin, args...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%v: %s", args, e2e.Redact(string(out)))
		return string(out)
	}
	whyJSON := func(ref string) why.Report {
		t.Helper()
		var rep why.Report
		out := run("why", ref, "-o", "json")
		require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
		return rep
	}
	group := s.NS + "/" + s.Group

	// Running: named by Gitea's own job URL.
	text := run("why", jobs[runningKey].HTMLURL)
	t.Logf("why %s:\n%s", jobs[runningKey].HTMLURL, text)
	assert.Regexp(t, regexp.MustCompile(`It already runs on runner \S+, started by runner Job `+regexp.QuoteMeta(s.NS+"/"+s.Group)+`-\w{5} of group `+regexp.QuoteMeta(group)+`\.`), text)
	assert.Contains(t, text, "verdict: "+why.VerdictRunning)

	// At capacity: named by its ID.
	rep := whyJSON(fmt.Sprint(jobs[waitingKey].ID))
	t.Logf("why %d: %q", jobs[waitingKey].ID, rep.Explanation)
	assert.Equal(t, why.VerdictAtCapacity, rep.Verdict)
	assert.Equal(t, group, rep.Assigned)
	assert.Equal(t, why.StatusQueued, rep.Job.Status)
	assert.Equal(t, s.Fx.Repo.String(), rep.Job.Repo)
	assert.Contains(t, rep.Explanation, group+" is at capacity: 1 of 1 runners active. The job gets a runner when one of them finishes, or when maxActiveRunners is raised.")

	// Blocked by needs:.
	rep = whyJSON(jobs[after].HTMLURL)
	assert.Equal(t, why.VerdictBlocked, rep.Verdict, "%q", rep.Explanation)
	assert.Equal(t, why.StatusBlocked, rep.Job.Status)
	assert.Equal(t, group, rep.Assigned)

	// A label no group offers, and the group's labels.
	text = run("why", jobs[odd].HTMLURL)
	t.Logf("why %s:\n%s", jobs[odd].HTMLURL, text)
	assert.Contains(t, text, fmt.Sprintf("No RunnerGroup whose scope contains %s offers the label(s) %s.", s.Fx.Repo, unknown))
	assert.Regexp(t, regexp.MustCompile(`The nearest group, `+regexp.QuoteMeta(group)+`, lacks `+regexp.QuoteMeta(unknown)+`; it offers: .*`+regexp.QuoteMeta(s.Label)), text)
	assert.Contains(t, text, "verdict: "+why.VerdictLabelsNotOffered)

	// status agrees: at capacity.
	table := run("status")
	assert.Regexp(t, regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(group)+`\s.*\s1/1\s.*False/AtCapacity$`), table)
}
