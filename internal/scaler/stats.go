package scaler

import (
	"log/slog"
	"slices"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// GroupStats is what a pass saw of one group, as its status says.
type GroupStats struct {
	Namespace, Name                   string
	Queued, Blocked, Running          int
	Active, Idle, Max                 int
	Failed                            bool
	Created, StartTimeouts, IdleReaps int
	OrphansRemoved                    int
}

// Reasons a runner goes, in PassObserver's and the summary's counts.
const (
	ReapStartTimeout = "start_timeout"
	ReapIdle         = "idle"
	ReapOrphan       = "orphan"
	// ReapDeletedNamespace: a registration a deleted namespace left
	// (DeletedNamespaces), counted in Summary.DeletedNamespaces.
	ReapDeletedNamespace = "deleted_namespace"
)

// PassObserver hears about every finished pass: the metrics endpoint.
type PassObserver interface {
	ObservePass(sum Summary, took time.Duration, err error)
}

// RequestCounter counts the requests sent to Gitea and to Kubernetes
// since the start, so a pass can say what it cost.
type RequestCounter interface {
	Requests() (gitea, kube int64)
}

// groupStats is the group's line in the pass's Summary, from the status
// record just wrote.
func groupStats(rg *v1alpha1.RunnerGroup, obs *observation, created int, failed bool) GroupStats {
	st := rg.Status
	gs := GroupStats{
		Namespace: rg.Namespace, Name: rg.Name, Max: int(rg.Spec.MaxActiveRunners), Failed: failed, Created: created,
		Queued: int(st.QueuedJobs), Blocked: int(st.BlockedJobs), Running: int(st.RunningJobs),
		Active: int(st.ActiveRunners), Idle: int(st.IdleRunners),
	}
	if obs != nil && obs.lifecycle != nil {
		l := obs.lifecycle
		gs.StartTimeouts = len(l.stuck)
		gs.OrphansRemoved = l.orphans
		gs.IdleReaps = l.reaped - l.orphans
	}
	return gs
}

// summaryAttrs are the numbers of one pass for its log line: what the
// metrics endpoint reports, for CronJob mode where nothing scrapes.
func summaryAttrs(sum Summary, took time.Duration, giteaReqs, kubeReqs int64) []any {
	var q, b, r, a, i, st, ir, or int
	for _, g := range sum.GroupStats {
		q, b, r, a, i = q+g.Queued, b+g.Blocked, r+g.Running, a+g.Active, i+g.Idle
		st, ir, or = st+g.StartTimeouts, ir+g.IdleReaps, or+g.OrphansRemoved
	}
	attrs := []any{
		"groups", sum.Groups, "failed", len(sum.Failed), "failedNamespaces", len(sum.FailedNamespaces),
		"created", sum.Created, "duration", took,
		"queued", q, "blocked", b, "running", r, "active", a, "idle", i,
		slog.Group("reaped", ReapStartTimeout, st, ReapIdle, ir, ReapOrphan, or),
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
