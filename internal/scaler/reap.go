package scaler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// freeStuck deletes the runner Jobs whose pod did not start in time, says
// why on the group, and holds the demand each covered for a back-off (see
// holdDemand). A Job without a pod gets the reason of its FailedCreate
// event.
func (s *Scaler) freeStuck(ctx context.Context, g *groupRun, byName map[string]*batchv1.Job, stuck []plan.Stuck, rep *lifecycleReport) []error {
	var errs []error
	var freed []*batchv1.Job
	for _, st := range stuck {
		j := byName[st.Job]
		if st.Reason == "" {
			st.Reason, st.Message = s.failedCreate(ctx, j)
		}
		msg := fmt.Sprintf("runner Job %s did not start within %s: %s: %s", j.Name, s.cfg.RunnerStartTimeout, st.Reason, st.Message)
		if s.cfg.DryRun {
			fmt.Fprintf(s.out, "  would delete %s\n", msg)
			rep.stuck = append(rep.stuck, st)
			continue
		}
		if err := s.deleteJob(ctx, j); err != nil {
			errs = append(errs, fmt.Errorf("cannot delete runner Job %s that did not start: %w", j.Name, err))
			continue
		}
		g.log.Warn("deleted a runner Job that did not start", "job", j.Name, "reason", st.Reason, "message", st.Message)
		s.event(ctx, g.rg, "Warning", ReasonRunnerStartTimeout, msg)
		rep.stuck = append(rep.stuck, st)
		rep.starting--
		rep.deletedJobs++
		freed = append(freed, j)
	}
	if len(freed) > 0 {
		if err := s.holdDemand(ctx, g, freed); err != nil {
			g.log.Warn("cannot hold the demand of the deleted runner Jobs; the next pass starts their replacements at once", "error", err)
		}
	}
	return errs
}

// holdDemand is the back-off after a runner Job that did not start: it
// writes a claim, naming the deleted Job, for the Gitea job the Job was
// started for. The pool counts a claim whose Job is not listed as a runner
// being created until the spawn TTL, so that demand gets its next runner
// one spawn TTL (5 minutes by default) later instead of at the next pass.
// A cluster that cannot start runners (an image that cannot be pulled, a
// quota, a policy) thus gets one failing pod per job every start timeout
// plus spawn TTL, not one per pass, while a fixed cluster serves the job
// within the spawn TTL. Other queued jobs are not held.
func (s *Scaler) holdDemand(ctx context.Context, g *groupRun, freed []*batchv1.Job) error {
	for attempt := 1; ; attempt++ {
		loaded, err := g.store.Load(ctx, g.owner)
		if err != nil {
			return err
		}
		next := loaded.Claims.Clone()
		for _, j := range freed {
			if id := runnerjob.GiteaJobID(j); id > 0 {
				if _, claimed := next[id]; !claimed {
					next[id] = state.Entry{ClaimedAt: s.now(), JobName: j.Name}
				}
			}
		}
		if _, err = g.store.Save(ctx, g.owner, loaded, next); !errors.Is(err, state.ErrConflict) || attempt == maxClaimAttempts {
			return err
		}
	}
}

// reapIdle reaps idle surplus runners safely: it first makes each unable
// to take work in Gitea (disabled, or deleted where Gitea cannot disable),
// then asks Gitea again which runners run a job, and deletes the runner
// Job, and then the registration, of each that still runs none. A runner
// that took a job in between is left alone: ephemeral, it exits after that
// job, and being disabled it takes no other.
func (s *Scaler) reapIdle(ctx context.Context, g *groupRun, runners gitea.Runners, byName map[string]*batchv1.Job,
	regs map[string][]gitea.Runner, reap []string, rep *lifecycleReport) []error {
	if len(reap) == 0 {
		return nil
	}
	t := targetOf(&g.rg.Spec)
	if s.cfg.DryRun {
		for _, name := range reap {
			fmt.Fprintf(s.out, "  would reap idle runner Job %s (idle for at least %s beyond the demand)\n", name, s.cfg.RunnerIdleTimeout)
		}
		return nil
	}
	var errs []error
	var disabled []string
	for _, name := range reap {
		if err := s.disable(ctx, runners, t, regs[runnerjob.RunnerNameOf(byName[name])]); err != nil {
			errs = append(errs, fmt.Errorf("cannot disable the runner of %s in Gitea: %w", name, err))
			continue
		}
		disabled = append(disabled, name)
	}
	if len(disabled) == 0 {
		return errs
	}
	snap, err := g.gitea.Snapshot(ctx, t)
	if err != nil {
		return append(errs, fmt.Errorf("cannot confirm that the disabled runners run no job: %w", err))
	}
	busy := map[string]bool{}
	for _, j := range snap.Running {
		busy[j.RunnerName] = true
	}
	for _, name := range disabled {
		j := byName[name]
		runnerName := runnerjob.RunnerNameOf(j)
		if busy[runnerName] {
			g.log.Info("an idle runner took a job while it was reaped; leaving it alone", "job", name, "runner", runnerName)
			continue
		}
		if err := s.deleteJob(ctx, j); err != nil {
			errs = append(errs, fmt.Errorf("cannot delete idle runner Job %s: %w", name, err))
			continue
		}
		for _, r := range regs[runnerName] {
			if err := runners.DeleteRunner(ctx, t, r.ID); err != nil {
				errs = append(errs, fmt.Errorf("cannot remove runner %s from Gitea: %w", runnerName, err))
			}
		}
		rep.reaped++
		rep.idle--
		rep.deletedJobs++
		g.log.Info("reaped an idle runner", "job", name, "runner", runnerName)
		s.event(ctx, g.rg, "Normal", ReasonRunnerReaped, fmt.Sprintf("Reaped idle runner Job %s: idle for at least %s while the group had more runners than queued jobs", name, s.cfg.RunnerIdleTimeout))
	}
	return errs
}

// disable makes every registration of one runner take no more work. A
// Gitea without the disable endpoint (405) gets the registration deleted
// instead; one that is gone already is fine.
func (s *Scaler) disable(ctx context.Context, runners gitea.Runners, t gitea.Target, regs []gitea.Runner) error {
	for _, r := range regs {
		err := runners.DisableRunner(ctx, t, r.ID)
		var ae *gitea.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusMethodNotAllowed {
			err = runners.DeleteRunner(ctx, t, r.ID)
		}
		if err != nil && !errors.Is(err, gitea.ErrNotFound) {
			return err
		}
	}
	return nil
}

// removeOrphans deletes the group's ephemeral registrations whose runner
// Job is gone (plan.Orphans), each after asking the API server for the Job
// by name: a Job that exists now, whatever the listing said, keeps its
// runner.
func (s *Scaler) removeOrphans(ctx context.Context, g *groupRun, runners gitea.Runners, all []gitea.Runner, obs *observation, rep *lifecycleReport) []error {
	listed := make(map[string]bool, len(obs.jobs))
	for i := range obs.jobs {
		listed[obs.jobs[i].Name] = true
	}
	var regs []plan.Registration
	for _, r := range all {
		job, _ := runnerjob.JobOfRunner(g.rg, r.Name)
		regs = append(regs, plan.Registration{ID: r.ID, Name: r.Name, Job: job, Ephemeral: r.Ephemeral, Online: r.Online, Busy: obs.busy[job]})
	}
	t := targetOf(&g.rg.Spec)
	var errs []error
	for _, o := range plan.Orphans(regs, listed) {
		_, err := s.kube.BatchV1().Jobs(g.rg.Namespace).Get(ctx, o.Job, metav1.GetOptions{})
		switch {
		case err == nil:
			continue
		case !apierrors.IsNotFound(err):
			errs = append(errs, fmt.Errorf("cannot check runner Job %s of registration %s: %w", o.Job, o.Name, err))
			continue
		case s.cfg.DryRun:
			fmt.Fprintf(s.out, "  would remove runner %s (ID %d) from Gitea: its runner Job is gone\n", o.Name, o.ID)
			continue
		}
		if err := runners.DeleteRunner(ctx, t, o.ID); err != nil {
			errs = append(errs, fmt.Errorf("cannot remove orphan runner %s from Gitea: %w", o.Name, err))
			continue
		}
		rep.reaped++
		rep.orphans++
		g.log.Info("removed an orphan runner registration", "runner", o.Name, "id", o.ID)
		s.event(ctx, g.rg, "Normal", ReasonRunnerReaped, fmt.Sprintf("Removed runner %s from Gitea: it registered, but its runner Job %s is gone and it ran no job", o.Name, o.Job))
	}
	return errs
}

// deleteJob deletes one runner Job, only if it is still the one listed
// (same UID), with its pods.
func (s *Scaler) deleteJob(ctx context.Context, j *batchv1.Job) error {
	bg := metav1.DeletePropagationBackground
	err := s.kube.BatchV1().Jobs(j.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &j.UID},
		PropagationPolicy: &bg,
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// joinCauses is one error of several, each still testable with errors.Is.
func joinCauses(errs []error) error {
	format := strings.TrimSuffix(strings.Repeat("%w; ", len(errs)), "; ")
	args := make([]any, len(errs))
	for i, e := range errs {
		args[i] = e
	}
	return fmt.Errorf(format, args...)
}
