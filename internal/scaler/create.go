package scaler

import (
	"context"
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// create makes one runner Job per claim and returns how many it made.
// Claims whose Job could not be created are released, so the next pass
// retries them at once instead of after the spawn TTL.
func (s *Scaler) create(ctx context.Context, g *groupRun, claims []plan.Claim) (int, error) {
	var (
		failed []plan.Claim
		causes []any
	)
	for _, c := range claims {
		if err := s.createJob(ctx, g, c); err != nil {
			failed = append(failed, c)
			//lint:ignore ST1005 it continues the sentence of the group's error, below
			causes = append(causes, fmt.Errorf("Job %s for Gitea job %d: %w", c.JobName, c.GiteaJobID, err))
		}
	}
	created := len(claims) - len(failed)
	if len(failed) == 0 {
		return created, nil
	}
	if err := s.release(ctx, g, failed); err != nil {
		g.log.Warn("cannot release failed claims; they expire after the spawn TTL", "error", err)
	}
	// One %w per cause, so that each stays testable with errors.Is.
	format := "cannot create %d runner Job(s): " + strings.TrimSuffix(strings.Repeat("%w; ", len(causes)), "; ")
	return created, newGroupError(ReasonJobCreateFailed, format, append([]any{len(failed)}, causes...)...)
}

// createJob creates the runner Job of one claim and tells the group.
func (s *Scaler) createJob(ctx context.Context, g *groupRun, c plan.Claim) error {
	job := runnerjob.Build(g.rg, c.JobName, c.GiteaJobID, s.cfg.Runner)
	if _, err := s.kube.BatchV1().Jobs(g.rg.Namespace).Create(ctx, job, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager}); err != nil {
		return err
	}
	g.log.Info("created runner Job", "job", c.JobName, "giteaJob", c.GiteaJobID, "retry", c.Retry)
	msg := fmt.Sprintf("Created runner Job %s for Gitea job %d", c.JobName, c.GiteaJobID)
	if c.Retry {
		msg += " (retry: the earlier runner took another job, ended, or did not start within the spawn TTL)"
	}
	s.event(ctx, g.rg, "Normal", ReasonRunnerCreated, msg)
	return nil
}

// release removes claims from the state, loading it again on a conflict.
// Only a claim still naming the same runner Job goes: another pass may have
// claimed the job anew in between.
func (s *Scaler) release(ctx context.Context, g *groupRun, claims []plan.Claim) error {
	for attempt := 1; ; attempt++ {
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
		if _, err = g.store.Save(ctx, g.owner, loaded, next); !errors.Is(err, state.ErrConflict) || attempt == maxClaimAttempts {
			return err
		}
	}
}
