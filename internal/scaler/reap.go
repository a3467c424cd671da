package scaler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reaper"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// freeStuck deletes the runner Jobs whose pod did not start in time, says
// why on the group, and holds the demand each covered for a back-off (see
// holdDemand). A Job without a pod gets the reason of its FailedCreate
// event. Each is read again first (recheckStuck): the pass's view of
// pods, registrations and running jobs predates the serving of every
// group, and a pod that started since may have taken its job.
func (s *Scaler) freeStuck(ctx context.Context, g *groupRun, byName map[string]*batchv1.Job, stuck []plan.Stuck, rep *reaper.Tally) []error {
	if len(stuck) == 0 {
		return nil
	}
	var errs []error
	var freed []*batchv1.Job
	jobs := make([]*batchv1.Job, 0, len(stuck))
	for _, st := range stuck {
		jobs = append(jobs, byName[st.Job])
	}
	notStarted, err := s.recheckStuck(ctx, g, jobs)
	if err != nil {
		return []error{fmt.Errorf("cannot tell whether the runner Jobs that did not start in time have started since, so none is deleted: %w", err)}
	}
	for _, st := range stuck {
		j := byName[st.Job]
		if !notStarted[j.Name] {
			g.log.Info("a runner Job seen not started has started since, or is gone; leaving it alone", "job", j.Name)
			continue
		}
		if st.Reason == "" {
			st.Reason, st.Message = s.failedCreate(ctx, j)
		}
		msg := fmt.Sprintf("runner Job %s did not start within %s: %s: %s", j.Name, s.cfg.RunnerStartTimeout, st.Reason, st.Message)
		if s.cfg.DryRun {
			fmt.Fprintf(s.out, "  would delete %s\n", msg)
			rep.Stuck = append(rep.Stuck, st)
			continue
		}
		if gone, err := s.reaperOf(g).DeleteJob(ctx, j); err != nil || gone {
			if err != nil {
				errs = append(errs, fmt.Errorf("cannot delete runner Job %s that did not start: %w", j.Name, err))
			}
			continue
		}
		g.log.Warn("deleted a runner Job that did not start", "job", j.Name, "reason", st.Reason, "message", st.Message)
		s.unregisterUnstarted(ctx, g, j)
		s.event(ctx, g.rg, "Warning", v1alpha1.ReasonRunnerStartTimeout, msg)
		rep.Stuck = append(rep.Stuck, st)
		rep.Starting--
		rep.DeletedJobs++
		freed = append(freed, j)
	}
	if len(freed) > 0 {
		if err := s.holdDemand(ctx, g, freed); err != nil {
			g.log.Warn("cannot hold the demand of the deleted runner Jobs; the next pass starts their replacements at once", "error", err)
		}
	}
	return errs
}

// recheckStuck reads afresh, just before runner Jobs are deleted as not
// started, everything that says whether their runner started, and names
// those that every reading says did not: Gitea's running jobs (the sound
// listing: none carries the runner's name) and its registrations (none has
// it), then the Job (still the one listed, active, no ready pod), then its
// pods (none has run). The pods come last because a runner registers and
// takes a job only after its pod has started: whatever registered before
// Gitea was read has a started pod by the time the pods are read.
//
// This holds with --runner-idle-timeout 0 as well: the running jobs need
// only the right to list jobs, which every group has. A token that may not
// use the runners API (401, 403) skips the registrations alone, as that
// setting promises that stuck runners are still freed; any other failure
// is an error, and nothing is deleted.
func (s *Scaler) recheckStuck(ctx context.Context, g *groupRun, jobs []*batchv1.Job) (map[string]bool, error) {
	names, contacted := map[string]bool{}, map[string]bool{}
	if runners, ok := g.gitea.(gitea.Runners); ok {
		// Each runner is looked for where it registers (place.go).
		var places []scope.Place
		for _, j := range jobs {
			if p, _, _ := s.runnerPlace(ctx, g, j); !slices.Contains(places, p) {
				places = append(places, p)
			}
		}
		for _, p := range places {
			running, err := runners.InProgress(ctx, p)
			if err != nil {
				return nil, fmt.Errorf("cannot list the running jobs of %s: %w", p, err)
			}
			for _, r := range running {
				names[r.RunnerName] = true
			}
			regs, err := runners.ListRunners(ctx, p)
			switch {
			case errors.Is(err, gitea.ErrForbidden) || errors.Is(err, gitea.ErrUnauthorized):
				g.log.Debug("the API token may not list runners; judging runners that did not start by their pods and Gitea's running jobs", "error", err)
			case err != nil:
				return nil, fmt.Errorf("cannot list the runners of %s: %w", p, err)
			}
			for _, r := range regs {
				if r.Online || r.Busy {
					contacted[r.Name] = true
				}
				names[r.Name] = true
			}
		}
	}
	out := map[string]bool{}
	for _, j := range jobs {
		cur, err := s.kube.BatchV1().Jobs(j.Namespace).Get(ctx, j.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("cannot read runner Job %s: %w", j.Name, err)
		case cur.UID != j.UID || !runnerjob.IsActive(cur) || ptr.Deref(cur.Status.Ready, 0) > 0:
			continue
		case names[runnerjob.RunnerNameOf(j)] && !preRegistered(j):
			continue
		case contacted[runnerjob.RunnerNameOf(j)]:
			continue
		}
		out[j.Name] = true
	}
	if len(out) == 0 {
		return out, nil
	}
	list, err := s.kube.CoreV1().Pods(g.rg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: runnerjob.Selector(g.rg.Name)})
	if err != nil {
		return nil, fmt.Errorf("cannot list runner pods: %w", err)
	}
	pods := podViews(list.Items)
	for _, j := range jobs {
		if pods[j.UID].started {
			delete(out, j.Name)
		}
	}
	return out, nil
}

// deleteSpent deletes the runner Jobs whose runner container has ended
// after its job while another container (a regular sidecar) keeps the pod
// running: deleting the Job ends the pod's other containers. The runner
// process is gone, so no job of it can be lost; Gitea is not asked.
func (s *Scaler) deleteSpent(ctx context.Context, g *groupRun, spent []*batchv1.Job, rep *reaper.Tally) []error {
	var errs []error
	for _, j := range spent {
		if s.cfg.DryRun {
			fmt.Fprintf(s.out, "  would delete runner Job %s: %s\n", j.Name, whySpent)
			continue
		}
		if gone, err := s.reaperOf(g).DeleteJob(ctx, j); err != nil || gone {
			if err != nil {
				errs = append(errs, fmt.Errorf("cannot delete spent runner Job %s: %w", j.Name, err))
			}
			continue
		}
		rep.Reaped++
		rep.DeletedJobs++
		g.log.Info("deleted a spent runner Job", "job", j.Name)
		s.event(ctx, g.rg, "Normal", v1alpha1.ReasonRunnerReaped, fmt.Sprintf("Deleted runner Job %s: %s; a native sidecar (an init container with restartPolicy Always) ends with the runner by itself", j.Name, whySpent))
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
	return retry.OnError(stateRetry, lostStateRace, func() error {
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
		_, err = g.store.Save(ctx, g.owner, loaded, next)
		return err
	})
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

// reaperWith is the pass's reaper through runners.
func (s *Scaler) reaperWith(runners gitea.Runners) reaper.Reaper {
	return reaper.Reaper{Runners: runners, Kube: s.kube, DryRun: s.cfg.DryRun, Out: s.out}
}

// reaperOf is the pass's reaper through the group's Gitea client.
func (s *Scaler) reaperOf(g *groupRun) reaper.Reaper {
	runners, _ := g.gitea.(gitea.Runners)
	return s.reaperWith(runners)
}

// reapGroup is what the reaper needs of the group: its log, its events,
// where its runners register, which runner Jobs a pass is creating, and
// its tally.
func (s *Scaler) reapGroup(g *groupRun, rep *reaper.Tally) reaper.Group {
	return reaper.Group{RG: g.rg, Log: g.log, Tally: rep,
		Event: func(ctx context.Context, typ, reason, message string) { s.event(ctx, g.rg, typ, reason, message) },
		Where: func(ctx context.Context, j *batchv1.Job) (scope.Place, []gitea.Runner) {
			p, _, _ := s.runnerPlace(ctx, g, j)
			regs, _ := s.registrationsOf(ctx, g, p, j)
			return p, regs
		},
		Coming: func(ctx context.Context) (map[string]bool, error) {
			loaded, err := g.store.Load(ctx, g.owner)
			if err != nil {
				return nil, err
			}
			coming := map[string]bool{}
			for _, c := range loaded.Claims {
				if plan.InFlight(s.now(), s.cfg.SpawnTTL, c) {
					coming[c.JobName] = true
				}
			}
			return coming, nil
		},
	}
}
