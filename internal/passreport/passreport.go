// Package passreport is what one scaler pass reports: the Summary its
// caller, the metrics endpoint and the log line read, and the words they
// share (why a runner went, why a deleted namespace's registrations were
// left). It is a leaf, so that readers of a pass need not import the
// engine that runs it.
package passreport

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Summary says how a pass went.
type Summary struct {
	// Groups counts the RunnerGroups served.
	Groups int
	// Failed names the groups that failed ("namespace/name").
	Failed []string
	// FailedNamespaces names the served namespaces whose RunnerGroups
	// could not be listed (for example, their Role was deleted).
	FailedNamespaces []string
	// Created counts the runner Jobs created.
	Created int
	// GroupStats has one line per group served, in serving order, and
	// QueuedToJob the time from each served Gitea job's creation to its
	// runner Job: what the metrics and the pass's summary line report.
	GroupStats  []GroupStats
	QueuedToJob []time.Duration
	// Partial is set for a pass over some of the groups only (a
	// webhook's, or one that deferred new groups): groups missing from
	// GroupStats were not looked at.
	Partial bool
	// Deferred counts the new groups left to later passes
	// (Config.NewGroupsPerPass).
	Deferred int
	// DeletedNamespaces is what the sweep of deleted namespaces' registrations
	// did (Config.DeletedNamespaces; zero when it is off, and in a partial pass).
	DeletedNamespaces DeletedNamespacesReport
}

// Err is non-nil when any group or namespace failed, so the pass's Job
// fails visibly in the CronJob's history.
func (s Summary) Err() error {
	var parts []string
	if len(s.Failed) > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d RunnerGroups failed: %s", len(s.Failed), s.Groups, strings.Join(s.Failed, ", ")))
	}
	if len(s.FailedNamespaces) > 0 {
		parts = append(parts, "cannot list the RunnerGroups of namespace(s) "+strings.Join(s.FailedNamespaces, ", "))
	}
	if len(parts) == 0 {
		return nil
	}
	return errors.New(strings.Join(parts, "; "))
}

// GroupStats is what a pass saw of one group, as its status says.
type GroupStats struct {
	Namespace, Name                   string
	Queued, Blocked, Running          int
	Active, Idle, Max                 int
	Failed                            bool
	Created, StartTimeouts, IdleReaps int
	OrphansRemoved                    int
	// Startups and Executions are the jobs the group's runners started
	// and finished that no earlier pass of the loop reported: from
	// creation to start, and from start to end (what the scaler's
	// jobtimes.go says of the timestamps).
	Startups, Executions []time.Duration
}

// Reasons a runner goes, in PassObserver's and the summary's counts.
const (
	ReapStartTimeout = "start_timeout"
	ReapIdle         = "idle"
	ReapOrphan       = "orphan"
)

// Observer hears about every finished pass: the metrics endpoint.
type Observer interface {
	ObservePass(sum Summary, took time.Duration, err error)
}

// RequestCounter counts the requests sent to Gitea and to Kubernetes
// since the start, so a pass can say what it cost.
type RequestCounter interface {
	Requests() (gitea, kube int64)
}

// Why recorded groups of deleted namespaces are left (the keys of
// DeletedNamespacesReport.Left, and the reason label of the metric).
const (
	// LeftNoToken: the sweep has no platform token, so nothing is deleted.
	LeftNoToken = "no_token"
	// LeftOtherGitea: the group registered on another Gitea than the
	// platform token's.
	LeftOtherGitea = "other_gitea"
	// LeftRunning: a registration of the group is online or runs a job
	// (Gitea has not yet seen its runner go); a later pass looks again.
	LeftRunning = "running"
	// LeftFailed: Gitea or the API server failed the sweep; a later pass
	// tries again.
	LeftFailed = "failed"
	// LeftLater: over the pass's bound; a later pass sweeps it.
	LeftLater = "later"
)

// DeletedNamespacesReport is what a pass's sweep of deleted namespaces
// did: registrations removed, namespaces still being deleted (waited
// for), and per reason how many recorded groups of deleted namespaces may
// still have registrations in Gitea.
type DeletedNamespacesReport struct {
	Removed int
	Waiting int
	Left    map[string]int
}
