package scaler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/owned"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reason"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// create makes one runner Job per claim and returns how many it made.
// A claim is released only when the API server definitely refused its Job,
// so the next pass retries it at once. When the outcome is unknown (a
// timeout, a 5xx, a lost response) the Job may exist: the claim stays, and
// the Job, if it was written, is listed by the next pass; if it was not,
// the claim stops counting after the spawn TTL.
//
// obs is what the pass saw of the group: the runner config is kept for its
// runner Jobs (ensureRunnerConfig) whether or not the pass creates any.
func (s *Scaler) create(ctx context.Context, g *groupRun, claims []plan.Claim, obs *observation) (int, error) {
	var (
		refused []plan.Claim
		causes  []any
	)
	created := 0
	if len(claims) > 0 {
		s.recordOwner(ctx, g)
		if err := s.ensureRunnerConfig(ctx, g, obs.jobs); err != nil {
			// No runner without its config: the claims go, so the next
			// pass tries again at once.
			cleanup, cancel := detached(ctx)
			defer cancel()
			if rerr := s.release(cleanup, g, claims); rerr != nil {
				g.log.Warn("cannot release claims; they expire after the spawn TTL", "error", rerr)
			}
			return 0, err
		}
	} else {
		s.keepRunnerConfig(ctx, g, obs.jobs)
	}
	for _, c := range claims {
		if err := ctx.Err(); err != nil {
			// Cancelled before this create was sent: no Job exists, so the
			// claim goes and the next pass is free to serve the job.
			refused = append(refused, c)
			causes = append(causes, &createError{giteaJob: c.GiteaJobID, jobName: c.JobName, err: err})
			continue
		}
		err := s.createJob(ctx, g, c)
		if err == nil {
			created++
			if at, ok := g.queuedAt[c.GiteaJobID]; ok && !at.IsZero() {
				g.queuedToJob = append(g.queuedToJob, max(s.now().Sub(at), 0))
			}
			continue
		}
		g.log.Warn("cannot create runner Job", "job", c.JobName, "giteaJob", c.GiteaJobID, "error", err)
		causes = append(causes, &createError{giteaJob: c.GiteaJobID, jobName: c.JobName, err: err})
		if refusedForSure(err) || errors.Is(err, errNotBuilt) || errors.Is(err, errNotRegistered) {
			refused = append(refused, c)
		}
	}
	if len(causes) == 0 {
		return created, nil
	}
	if len(refused) > 0 {
		// A cancelled pass (SIGTERM, the CronJob's deadline) still releases:
		// otherwise its claims would hold slots for the whole spawn TTL.
		cleanup, cancel := detached(ctx)
		defer cancel()
		if err := s.release(cleanup, g, refused); err != nil {
			g.log.Warn("cannot release refused claims; they expire after the spawn TTL", "error", err)
		}
	}
	// One %w per cause, so that each stays testable with errors.Is.
	format := "cannot create %d runner Job(s): " + strings.TrimSuffix(strings.Repeat("%w; ", len(causes)), "; ")
	return created, reason.Errorf(v1alpha1.ReasonJobCreateFailed, format, append([]any{len(causes)}, causes...)...)
}

// errNotBuilt marks a runner Job that was never sent: its pod could not be
// built from the templates. validate checks the templates first, so this
// is a second line; the claim is released like a refused one.
var errNotBuilt = errors.New("runner Job not built")

// refusedForSure reports whether the API server answered a create with a
// refusal, so no Job was written: forbidden (RBAC, quota, admission),
// invalid, a bad request, or a name already taken by something else.
func refusedForSure(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) || apierrors.IsUnauthorized(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsRequestEntityTooLargeError(err)
}

// createJob creates the runner Job of one claim and tells the group. When
// the answer is lost, it asks for the Job by name: a Job that is there,
// and ours, was created.
func (s *Scaler) createJob(ctx context.Context, g *groupRun, c plan.Claim) error {
	job, err := runnerjob.Build(g.rg, c.JobName, c.GiteaJobID, s.runnerOptions(g))
	if err != nil {
		return fmt.Errorf("%w: %w", errNotBuilt, err)
	}
	runnerjob.MarkScope(job, g.registersIn(), g.placeKnown)
	if s.cfg.Runner.SelfRegistration {
		_, err = s.sendJob(ctx, g, job)
	} else {
		err = s.createRegistered(ctx, g, job)
	}
	if err != nil {
		return err
	}
	if plan.IsWarm(c.GiteaJobID) {
		g.log.Info("created runner Job", "job", c.JobName, "warm", true)
		s.event(ctx, g.rg, "Normal", v1alpha1.ReasonRunnerCreated, fmt.Sprintf("Created runner Job %s for the warm pool", c.JobName))
		return nil
	}
	g.log.Info("created runner Job", "job", c.JobName, "giteaJob", c.GiteaJobID)
	s.event(ctx, g.rg, "Normal", v1alpha1.ReasonRunnerCreated, fmt.Sprintf("Created runner Job %s for Gitea job %d", c.JobName, c.GiteaJobID))
	return nil
}

// sendJob creates a runner Job. When the answer is lost, it asks for the
// Job by name: a Job that is there, and ours, was created.
func (s *Scaler) sendJob(ctx context.Context, g *groupRun, job *batchv1.Job) (*batchv1.Job, error) {
	jobs := s.kube.BatchV1().Jobs(g.rg.Namespace)
	made, err := jobs.Create(ctx, job, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager})
	if err != nil && !refusedForSure(err) && ctx.Err() == nil {
		if got, gerr := jobs.Get(ctx, job.Name, metav1.GetOptions{}); gerr == nil && owned.Controls(g.rg, got) {
			g.log.Warn("the answer to a runner Job create was lost, but the Job exists", "job", job.Name, "error", err)
			return got, nil
		}
	}
	return made, err
}

// release removes claims from the state, loading it again on a conflict.
// Only a claim still naming the same runner Job goes: another pass may have
// claimed the job anew in between.
func (s *Scaler) release(ctx context.Context, g *groupRun, claims []plan.Claim) error {
	return retry.OnError(stateRetry, lostStateRace, func() error {
		loaded, err := g.store.Load(ctx, g.owner)
		if err != nil {
			return err
		}
		next := loaded.Claims.Clone()
		for _, c := range claims {
			if e, ok := next[c.GiteaJobID]; ok && e.JobName == c.JobName {
				delete(next, c.GiteaJobID)
			}
		}
		_, err = g.store.Save(ctx, g.owner, loaded, next)
		return err
	})
}

// stateRetry bounds the edits of the state that lost the race for its
// ConfigMap (holdDemand, release): maxClaimAttempts tries in all, a few
// milliseconds apart. The claim itself keeps its own loop: each of its
// attempts observes and plans again, and its first may plan from caches.
var stateRetry = wait.Backoff{Steps: maxClaimAttempts, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.1}

// lostStateRace says an edit of the state lost to another pass's write.
func lostStateRace(err error) bool { return errors.Is(err, state.ErrConflict) }

// createError is one runner Job the API server did not create. Its message
// names the Gitea job, not the Job's random name (which the log has), so a
// refusal that repeats pass after pass reads the same and is not news.
type createError struct {
	giteaJob int64
	jobName  string
	err      error
}

func (e *createError) Error() string {
	return fmt.Sprintf("runner Job for Gitea job %d: %s", e.giteaJob, strings.ReplaceAll(e.err.Error(), e.jobName, "<runner Job>"))
}

func (e *createError) Unwrap() error { return e.err }
