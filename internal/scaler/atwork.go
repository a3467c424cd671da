package scaler

import (
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
)

// atWork is when a loop last saw each runner Job's runner at work: named
// by a running job, or called busy by Gitea. A runner cleaning up after a
// cancelled job is neither once Gitea 1.27.3 stops calling it busy (5 to 10
// s after gitea-runner 3.1.0's last report, which stops at the cancel), yet
// it will exit by itself once done, as every ephemeral runner does after
// its job. Its idle time counts from the last sighting, not from its Job's
// creation, so --runner-idle-timeout is what its cleanup may take before a
// reap. A single pass has no sighting to go by: a CronJob may reap a runner
// whose cleanup outlasts Gitea's busy flag (the README says so).
type atWork struct {
	mu   sync.Mutex
	seen passKept[types.UID, time.Time]
}

// saw records that j's runner is at work now.
func (m *memory) saw(j *batchv1.Job, now time.Time) {
	if m == nil {
		return
	}
	m.atWork.mu.Lock()
	defer m.atWork.mu.Unlock()
	m.atWork.seen.keep(j.UID, now)
}

// idleSince is when j's runner became idle, as far as is known: its Job's
// creation, or the loop's last sighting of it at work.
func (m *memory) idleSince(j *batchv1.Job) time.Time {
	since := j.CreationTimestamp.Time
	if m == nil {
		return since
	}
	m.atWork.mu.Lock()
	defer m.atWork.mu.Unlock()
	if last, ok := m.atWork.seen.get(j.UID, func(time.Time) bool { return true }); ok && last.After(since) {
		return last
	}
	return since
}
