//go:build e2e

// Watching one runner Job from the side: the lifecycle tests prove that
// a runner Job is never deleted while its runner still works, and a pass
// that deletes it may do so between two of the test's own looks.

package e2e

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// jobWatchEvery is how often a jobWatch reads its Job.
const jobWatchEvery = 250 * time.Millisecond

// JobWatch reads one runner Job every jobWatchEvery until end, and keeps
// the first moment it saw it deleted: gone (a Job that completed stays
// for its TTL, 10 minutes, so gone is deleted), replaced by another of
// the same name, or terminating.
type JobWatch struct {
	job  batchv1.Job
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	at   time.Time // zero while the Job has not been seen deleted
	how  string
	last string // the Job's state at the last look
}

// WatchJob starts watching j; the watch ends with end or ctx.
func (b *Testbed) WatchJob(ctx context.Context, j batchv1.Job) *JobWatch {
	w := &JobWatch{job: j, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			cur, err := b.Kube.BatchV1().Jobs(j.Namespace).Get(ctx, j.Name, metav1.GetOptions{})
			how := ""
			switch {
			case apierrors.IsNotFound(err):
				how = "gone"
			case err != nil:
				// Not known: look again.
			case cur.UID != j.UID:
				how = "replaced by a Job of the same name"
			case cur.DeletionTimestamp != nil:
				how = "terminating since " + cur.DeletionTimestamp.UTC().Format(time.RFC3339)
			}
			w.mu.Lock()
			if how != "" && w.at.IsZero() {
				w.at, w.how = time.Now(), how
			}
			if err == nil {
				w.last = JobState(cur)
			}
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(jobWatchEvery):
			}
		}
	}()
	return w
}

// Deleted is when the Job was first seen deleted, and how; ok is false
// while it has not been.
func (w *JobWatch) Deleted() (at time.Time, how string, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.at, w.how, !w.at.IsZero()
}

// State is the Job's state at the last look that found it.
func (w *JobWatch) State() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// End stops the watch and waits for it.
func (w *JobWatch) End() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// Describe says what the watch saw, for a message.
func (w *JobWatch) Describe() string {
	at, how, ok := w.Deleted()
	if !ok {
		return fmt.Sprintf("runner Job %s not deleted (last seen %s)", w.job.Name, w.State())
	}
	return fmt.Sprintf("runner Job %s deleted (%s) at %s, %s after its creation", w.job.Name, how,
		at.UTC().Format(time.RFC3339), at.Sub(w.job.CreationTimestamp.Time).Round(time.Second))
}
