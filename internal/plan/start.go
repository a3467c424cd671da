package plan

import (
	"sort"
	"time"
)

// StartingRunner is an active runner Job whose runner runs no job, as the
// start decision needs it.
type StartingRunner struct {
	Job     string
	Created time.Time
	// Started is true once its pod has run (a container running or ended):
	// from then on a slow runner is the idle decision's business.
	Started bool
	// Registered is true when Gitea knows its runner, which only a started
	// pod can be.
	Registered bool
	// Reason and Message say why the pod does not run, in Kubernetes' own
	// words: a waiting container's reason (ErrImagePull,
	// CreateContainerConfigError), the pod's PodScheduled condition
	// (Unschedulable), or the Job's FailedCreate event when there is no pod.
	Reason  string
	Message string
}

// Stuck is a runner Job that did not start within the start timeout.
type Stuck struct {
	Job     string
	Reason  string
	Message string
}

// StuckRunners names the runner Jobs whose pod never ran within timeout of
// the Job's creation, oldest first; a timeout of 0 names none. A runner
// that registered with Gitea has run, whatever the pod says now.
func StuckRunners(now time.Time, timeout time.Duration, runners []StartingRunner) []Stuck {
	if timeout <= 0 {
		return nil
	}
	var due []StartingRunner
	for _, r := range runners {
		if !r.Started && !r.Registered && now.Sub(r.Created) >= timeout {
			due = append(due, r)
		}
	}
	sort.Slice(due, func(i, j int) bool {
		if !due[i].Created.Equal(due[j].Created) {
			return due[i].Created.Before(due[j].Created)
		}
		return due[i].Job < due[j].Job
	})
	out := make([]Stuck, 0, len(due))
	for _, r := range due {
		out = append(out, Stuck{Job: r.Job, Reason: r.Reason, Message: r.Message})
	}
	return out
}
