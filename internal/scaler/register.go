package scaler

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerlabels"
)

// errNotRegistered marks a runner Job that was never sent because Gitea
// did not register its runner (Gitea down, the token refused): the claim
// is released like a refused create.
var errNotRegistered = errors.New("runner not registered")

// createRegistered registers the runner of job with Gitea, then creates the
// Job, marked with the registration's ID, then the Secret with the runner's
// own credentials, controlled by the Job (runnerjob.StateSecret). Whatever
// fails after the registration takes it back: a registration with no Job
// or a Job with no credentials would serve nobody. The pod waits for its
// Secret, so the order costs no start.
func (s *Scaler) createRegistered(ctx context.Context, g *groupRun, job *batchv1.Job) error {
	registrar, ok := g.gitea.(gitea.RunnerRegistrar)
	if !ok || g.regToken == "" {
		return fmt.Errorf("%w: the scaler has no registration token for the group", errNotRegistered)
	}
	creds, err := registrar.RegisterRunner(ctx, g.regToken, gitea.NewRunner{
		Name:      runnerjob.RunnerNameOf(job),
		Labels:    runnerlabels.ForGroup(&g.rg.Spec, s.cfg.Runner.DefaultLabels),
		Ephemeral: true,
	})
	if err != nil {
		if creds.ID > 0 {
			s.unregister(ctx, g, job, creds.ID, "Gitea registered it as a runner that outlives its job")
		}
		return fmt.Errorf("%w: %w", errNotRegistered, err)
	}
	runnerjob.MarkRegistered(job, creds.ID)
	made, err := s.sendJob(ctx, g, job)
	if err != nil {
		if refusedForSure(err) {
			s.unregister(ctx, g, job, creds.ID, "its runner Job was refused")
		}
		// Otherwise the Job may exist: the lifecycle removes the
		// registration with the Job, or as an orphan without one.
		return err
	}
	secret, err := runnerjob.StateSecret(made, creds)
	if err == nil {
		_, err = s.kube.CoreV1().Secrets(job.Namespace).Create(ctx, secret, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager})
	}
	if err != nil {
		cleanup, cancel := detached(ctx)
		defer cancel()
		derr := s.kube.BatchV1().Jobs(job.Namespace).Delete(cleanup, made.Name, metav1.DeleteOptions{
			Preconditions:     &metav1.Preconditions{UID: &made.UID},
			PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
		})
		if derr == nil {
			s.unregister(cleanup, g, job, creds.ID, "its credentials could not be stored")
		}
		return fmt.Errorf("%w: cannot store the runner's credentials: %w", errNotRegistered, err)
	}
	g.log.Debug("registered the runner", "job", job.Name, "runnerID", creds.ID)
	return nil
}

// unregister removes a registration the scaler made and no runner will
// use. No pod has its credentials, so no job can run on it and no
// confirmation is needed. On failure the orphan reaper removes it later.
func (s *Scaler) unregister(ctx context.Context, g *groupRun, job *batchv1.Job, id int64, why string) {
	runners, ok := g.gitea.(gitea.Runners)
	if !ok {
		return
	}
	if err := runners.DeleteRunner(ctx, g.registersIn(), id); err != nil {
		g.log.Warn("cannot remove a runner registration that no pod uses; the orphan reaper removes it", "job", job.Name, "runnerID", id, "why", why, "error", err)
		return
	}
	g.log.Info("removed a runner registration that no pod uses", "job", job.Name, "runnerID", id, "why", why)
}

// preRegistered says the scaler registered the Job's runner before its
// pod existed: a registration of its name then says nothing of whether the
// runner started.
func preRegistered(j *batchv1.Job) bool {
	_, ok := runnerjob.RegisteredID(j)
	return ok
}

// ranInGitea says whether Gitea has heard from the Job's runner: for a
// runner the pod registers, any registration of it; for one the scaler
// registered, a registration Gitea shows in contact (online, or busy).
func ranInGitea(j *batchv1.Job, regs []gitea.Runner) bool {
	if !preRegistered(j) {
		return len(regs) > 0
	}
	for _, r := range regs {
		if r.Online || r.Busy {
			return true
		}
	}
	return false
}

// unregisterUnstarted removes the registration the scaler made for a
// runner Job it just deleted as not started: the recheck before the
// deletion confirmed that no pod of it ran and that Gitea shows its runner
// neither in contact nor running a job.
func (s *Scaler) unregisterUnstarted(ctx context.Context, g *groupRun, j *batchv1.Job) {
	id, ok := runnerjob.RegisteredID(j)
	if !ok {
		return
	}
	runners, ok := g.gitea.(gitea.Runners)
	if !ok {
		return
	}
	p, _, _ := s.runnerPlace(ctx, g, j)
	if err := runners.DeleteRunner(ctx, p, id); err != nil {
		g.log.Warn("cannot remove the registration of a runner Job that did not start; the orphan reaper removes it", "job", j.Name, "runnerID", id, "error", err)
		return
	}
	g.log.Info("removed the registration of a runner Job that did not start", "job", j.Name, "runnerID", id)
}
