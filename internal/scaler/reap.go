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
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reaper"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// freeStuck deletes the runner Jobs whose pod did not start in time, says
// why on the group, and holds the demand each covered for a back-off (see
// holdDemand). A Job without a pod gets the reason of its FailedCreate
// event. Each is read again first (recheckStuck): the pass's view of
// pods, registrations and running jobs predates the serving of every
// group, and a pod that started since may have taken its job.
func (s *Scaler) freeStuck(ctx context.Context, g *groupRun, byName map[string]*batchv1.Job, stuck []plan.Stuck, rep *lifecycleReport) []error {
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
			rep.stuck = append(rep.stuck, st)
			continue
		}
		if gone, err := s.reaperOf(g).DeleteJob(ctx, j); err != nil || gone {
			if err != nil {
				errs = append(errs, fmt.Errorf("cannot delete runner Job %s that did not start: %w", j.Name, err))
			}
			continue
		}
		g.log.Warn("deleted a runner Job that did not start", "job", j.Name, "reason", st.Reason, "message", st.Message)
		s.event(ctx, g.rg, "Warning", v1alpha1.ReasonRunnerStartTimeout, msg)
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
	names := map[string]bool{}
	if runners, ok := g.gitea.(gitea.Runners); ok {
		// Each runner is looked for where it registers (place.go).
		var places []ledger.Place
		for _, j := range jobs {
			if p, _, _ := s.runnerPlace(ctx, g, j); !slices.Contains(places, p) {
				places = append(places, p)
			}
		}
		for _, p := range places {
			t := targetOf(p)
			running, err := runners.InProgress(ctx, t)
			if err != nil {
				return nil, fmt.Errorf("cannot list the running jobs of %s: %w", t, err)
			}
			for _, r := range running {
				names[r.RunnerName] = true
			}
			regs, err := runners.ListRunners(ctx, t)
			switch {
			case errors.Is(err, gitea.ErrForbidden) || errors.Is(err, gitea.ErrUnauthorized):
				g.log.Debug("the API token may not list runners; judging runners that did not start by their pods and Gitea's running jobs", "error", err)
			case err != nil:
				return nil, fmt.Errorf("cannot list the runners of %s: %w", t, err)
			}
			for _, r := range regs {
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
		case names[runnerjob.RunnerNameOf(j)]:
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
func (s *Scaler) deleteSpent(ctx context.Context, g *groupRun, spent []*batchv1.Job, rep *lifecycleReport) []error {
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
		rep.reaped++
		rep.deletedJobs++
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

// reapRunners reaps, safely, the idle surplus runners (reap) and the
// runners that can take no work (unable: disabled by a reap that stopped
// after the disable, or unregistered). In each place the runners register
// in, it first makes each idle one unable to take work in Gitea (disabled,
// or deleted where Gitea cannot disable), then reads the confirmation
// (reaper.Confirm), and deletes the runner Job, and then the registration, of
// each it does not keep. A runner that took a job in between is left
// alone: ephemeral, it exits after that job, and being disabled it takes
// no other. When the confirmation cannot be read, nothing there is
// deleted; a runner left disabled is no supply, and the next pass reaps it.
func (s *Scaler) reapRunners(ctx context.Context, g *groupRun, runners gitea.Runners, byName map[string]*batchv1.Job,
	reap []string, unable []*batchv1.Job, obs *observation, rep *lifecycleReport) []error {
	if len(reap) == 0 && len(unable) == 0 {
		return nil
	}
	if s.cfg.DryRun {
		for _, name := range reap {
			fmt.Fprintf(s.out, "  would reap idle runner Job %s (idle for at least %s beyond the demand)\n", name, s.cfg.RunnerIdleTimeout)
		}
		for _, j := range unable {
			fmt.Fprintf(s.out, "  would reap runner Job %s: %s\n", j.Name, obs.unavailable[j.Name])
		}
		return nil
	}
	rp := s.reaperWith(runners)
	type candidate struct {
		job  *batchv1.Job
		idle bool
		regs []gitea.Runner
	}
	var errs []error
	var places []ledger.Place
	cands := map[ledger.Place][]candidate{}
	where := func(j *batchv1.Job) (ledger.Place, []gitea.Runner) {
		p, _, _ := s.runnerPlace(ctx, g, j)
		regs, _ := s.registrationsOf(ctx, g, p, j)
		return p, regs
	}
	add := func(p ledger.Place, c candidate) {
		if _, seen := cands[p]; !seen {
			places = append(places, p)
		}
		cands[p] = append(cands[p], c)
	}
	for _, name := range reap {
		j := byName[name]
		p, regs := where(j)
		if err := rp.Disable(ctx, targetOf(p), regs); err != nil {
			errs = append(errs, fmt.Errorf("cannot disable the runner of %s in Gitea: %w", name, err))
			continue
		}
		add(p, candidate{job: j, idle: true, regs: regs})
	}
	for _, j := range unable {
		p, regs := where(j)
		add(p, candidate{job: j, regs: regs})
	}
	for _, p := range places {
		t := targetOf(p)
		todo := cands[p]
		conf, err := rp.Confirm(ctx, t)
		if err != nil {
			errs = append(errs, fmt.Errorf("cannot confirm that the runners to reap run no job, so none is deleted: %w", err))
			continue
		}
		for _, c := range todo {
			j := c.job
			runnerName := runnerjob.RunnerNameOf(j)
			if why := conf.Keeps(runnerName, obs.unavailable[j.Name] == whyUnregistered); why != "" {
				g.log.Info("a runner to reap is left alone", "job", j.Name, "runner", runnerName, "why", why)
				continue
			}
			if gone, err := rp.DeleteJob(ctx, j); err != nil || gone {
				if err != nil {
					errs = append(errs, fmt.Errorf("cannot delete runner Job %s: %w", j.Name, err))
				}
				continue
			}
			for _, r := range c.regs {
				if err := runners.DeleteRunner(ctx, t, r.ID); err != nil {
					errs = append(errs, fmt.Errorf("cannot remove runner %s from Gitea: %w", runnerName, err))
				}
			}
			rep.reaped++
			rep.deletedJobs++
			if c.idle {
				rep.idle--
				g.log.Info("reaped an idle runner", "job", j.Name, "runner", runnerName)
				s.event(ctx, g.rg, "Normal", v1alpha1.ReasonRunnerReaped, fmt.Sprintf("Reaped idle runner Job %s: idle for at least %s while the group had more runners than queued jobs", j.Name, s.cfg.RunnerIdleTimeout))
				continue
			}
			why := obs.unavailable[j.Name]
			g.log.Info("reaped a runner that can take no work", "job", j.Name, "runner", runnerName, "why", why)
			s.event(ctx, g.rg, "Normal", v1alpha1.ReasonRunnerReaped, fmt.Sprintf("Reaped runner Job %s: %s", j.Name, why))
		}
	}
	return errs
}

// removeOrphans deletes the group's ephemeral registrations whose runner
// Job is gone (plan.Orphans), each after asking Gitea's sound listing
// which runners run a job and the API server for the Job by name: a runner
// that runs a job, or whose Job exists now, whatever the pass's listings
// said, is kept.
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
	t := targetOf(g.registersIn())
	orphans := plan.Orphans(regs, listed)
	if len(orphans) == 0 {
		return nil
	}
	conf, err := s.reaperWith(runners).Confirm(ctx, t)
	if err != nil {
		return []error{fmt.Errorf("cannot confirm that the orphan runners run no job, so none is removed: %w", err)}
	}
	var errs []error
	for _, o := range orphans {
		if conf.Keeps(o.Name, false) != "" {
			continue
		}
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
		s.event(ctx, g.rg, "Normal", v1alpha1.ReasonRunnerReaped, fmt.Sprintf("Removed runner %s from Gitea: it registered, but its runner Job %s is gone and it ran no job", o.Name, o.Job))
	}
	return errs
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
