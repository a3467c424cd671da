package scaler

import (
	"log/slog"
	"slices"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
)

// groupStats is the group's line in the pass's Summary, from the status
// record just wrote.
func groupStats(rg *v1alpha1.RunnerGroup, obs *observation, created int, failed bool) passreport.GroupStats {
	st := rg.Status
	gs := passreport.GroupStats{
		Namespace: rg.Namespace, Name: rg.Name, Max: int(rg.Spec.MaxActiveRunners), Failed: failed, Created: created,
		Queued: int(st.QueuedJobs), Blocked: int(st.BlockedJobs), Running: int(st.RunningJobs),
		Active: int(st.ActiveRunners), Idle: int(st.IdleRunners),
	}
	if obs != nil && obs.lifecycle != nil {
		l := obs.lifecycle
		gs.StartTimeouts = len(l.Stuck)
		gs.OrphansRemoved = l.Orphans
		gs.IdleReaps = l.Reaped - l.Orphans
	}
	return gs
}

// summaryAttrs are the numbers of one pass for its log line: what the
// metrics endpoint reports, for CronJob mode where nothing scrapes.
func summaryAttrs(sum passreport.Summary, took time.Duration, giteaReqs, kubeReqs int64) []any {
	var q, b, r, a, i, st, ir, or int
	for _, g := range sum.GroupStats {
		q, b, r, a, i = q+g.Queued, b+g.Blocked, r+g.Running, a+g.Active, i+g.Idle
		st, ir, or = st+g.StartTimeouts, ir+g.IdleReaps, or+g.OrphansRemoved
	}
	attrs := []any{
		"groups", sum.Groups, "failed", len(sum.Failed), "failedNamespaces", len(sum.FailedNamespaces),
		"created", sum.Created, "duration", took,
		"queued", q, "blocked", b, "running", r, "active", a, "idle", i,
		slog.Group("reaped", passreport.ReapStartTimeout, st, passreport.ReapIdle, ir, passreport.ReapOrphan, or),
		"giteaRequests", giteaReqs, "kubeRequests", kubeReqs,
	}
	if sum.Deferred > 0 {
		attrs = append(attrs, "deferred", sum.Deferred)
	}
	if d := sum.DeletedNamespaces; d.Left != nil {
		attrs = append(attrs, slog.Group("deletedNamespaces", "removed", d.Removed, "waiting", d.Waiting, "left", d.Left))
	}
	if n := len(sum.QueuedToJob); n > 0 {
		l := slices.Clone(sum.QueuedToJob)
		slices.Sort(l)
		attrs = append(attrs, slog.Group("queuedToJob", "p50", l[n/2], "max", l[n-1]))
	}
	return attrs
}
