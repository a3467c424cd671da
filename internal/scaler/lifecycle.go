package scaler

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reaper"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reason"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerpod"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// podView is what the lifecycle needs of a runner Job's pods.
type podView struct {
	started         bool
	reason, message string
	// spent is true when the newest pod's runner container has ended with
	// exit code 0: its runner has run its job, whatever keeps the pod up
	// (a regular sidecar such as docker:dind does).
	spent bool
	// runningSince is when the newest pod's runner container last
	// started, zero when it does not run; crashLooping says it waits to
	// be restarted after it has run.
	runningSince time.Time
	crashLooping bool
}

// Why a runner that is not busy can take no work (observation.unavailable).
const (
	whySpent        = "its runner container has ended after its job while another container keeps the pod running"
	whyDisabled     = "its runner is disabled in Gitea (a reap that stopped after the disable)"
	whyUnregistered = "its runner has run for longer than the start timeout and is not registered in Gitea (its registration was deleted, or it never registered)"
)

// registerGrace is how long a runner container may run before a runner
// missing from Gitea's listing counts as unregistered: act_runner
// registers within seconds of starting.
const registerGrace = time.Minute

// unavailableRunners names the active runner Jobs, not busy, whose runner
// can take no work, with why: the pool counts none of them as supply (so a
// queued job gets a runner of its own) and the lifecycle reaps them. A
// spent runner is told by its pod alone; a disabled or unregistered one
// needs the runners listing of the place it registered in, and without it
// none is named. A runner is taken for unregistered only when the scaler
// knows where it registered (place.go): a runner whose registration token
// may be a containing scope's is listed there, not here.
func (s *Scaler) unavailableRunners(ctx context.Context, g *groupRun, obs *observation) map[string]string {
	out := map[string]string{}
	if obs.podsErr != nil {
		return out // the lifecycle step reports it
	}
	for i := range obs.jobs {
		j := &obs.jobs[i]
		if !runnerjob.IsActive(j) || obs.busy[j.Name] {
			continue
		}
		pv := obs.pods[j.UID]
		if pv.spent {
			out[j.Name] = whySpent
			continue
		}
		if !pv.started {
			continue
		}
		p, known, former := s.runnerPlace(ctx, g, j)
		if former {
			// Registered (or to register) where the group no longer is:
			// it takes no job of the group's scope.
			out[j.Name] = whyFormerScope
			if why := s.unreachable(ctx, g, p); why != "" {
				out[j.Name] = whyStranded + why
			}
			continue
		}
		mine, listed := s.registrationsOf(ctx, g, p, j)
		if !listed {
			continue
		}
		switch {
		case len(mine) > 0 && allDisabled(mine):
			out[j.Name] = whyDisabled
		case len(mine) == 0 && known && s.neverRegistered(j, pv):
			out[j.Name] = whyUnregistered
		}
	}
	return out
}

// neverRegistered says whether a started runner that no listing shows
// has had time to register: its Job is older than the start timeout and
// its runner container has run for registerGrace, or crash-loops.
func (s *Scaler) neverRegistered(j *batchv1.Job, pv podView) bool {
	grace := cmp.Or(s.cfg.RunnerStartTimeout, s.cfg.RunnerIdleTimeout)
	return pv.started && s.now().Sub(j.CreationTimestamp.Time) >= grace &&
		(pv.crashLooping || !pv.runningSince.IsZero() && s.now().Sub(pv.runningSince) >= registerGrace)
}

func allDisabled(regs []gitea.Runner) bool {
	for _, r := range regs {
		if !r.Disabled {
			return false
		}
	}
	return true
}

// listedRunners is one place's runners listing within a group's pass,
// with its registrations by runner name (made once: every runner Job of
// the group looks itself up in it).
type listedRunners struct {
	all    []gitea.Runner
	byName map[string][]gitea.Runner
	err    error
}

// registrationsAt are the runners registered in place p, listed once per
// group and pass; listed is false when they were not asked
// (--runner-idle-timeout 0 turns off the runners API) or could not be.
func (s *Scaler) registrationsAt(ctx context.Context, g *groupRun, p scope.Place) (all []gitea.Runner, listed bool, err error) {
	runners, _ := g.gitea.(gitea.Runners)
	if runners == nil || s.cfg.RunnerIdleTimeout <= 0 {
		return nil, false, nil
	}
	if g.regs == nil {
		g.regs = map[scope.Place]listedRunners{}
	}
	l, ok := g.regs[p]
	if !ok {
		l.all, l.err = s.listRunners(ctx, g, runners, p)
		l.byName = reaper.ByRunnerName(l.all)
		g.regs[p] = l
	}
	return l.all, l.err == nil, l.err
}

// registrationsOf are the registrations of a runner Job's runner in place
// p (registrationsAt), and whether p was listed.
func (s *Scaler) registrationsOf(ctx context.Context, g *groupRun, p scope.Place, j *batchv1.Job) (mine []gitea.Runner, listed bool) {
	if _, listed, _ = s.registrationsAt(ctx, g, p); !listed {
		return nil, false
	}
	return g.regs[p].byName[runnerjob.RunnerNameOf(j)], true
}

// lifecycle is the step after create: it frees runner Jobs whose pod never
// started, deletes those whose runner has ended while the pod stays up,
// reaps idle runners beyond the demand and runners that can take no work,
// and removes orphan registrations from Gitea. What it saw and did goes on
// obs for record. Its failures are the group's (RunnerReapFailed) but
// never undo what the steps before it did.
//
// Nothing here deletes a runner on the pass's first reading alone: a
// runner Job that did not start is read again just before it is deleted
// (recheckStuck), and a runner is reaped or its registration removed only
// after the confirmation (reaper.Confirm), read afresh in the place it
// registered in, says it runs no job and Gitea does not call it busy. Any
// doubt keeps the runner.
func (s *Scaler) lifecycle(ctx context.Context, g *groupRun, obs *observation) error {
	pods, err := obs.pods, obs.podsErr
	if err != nil {
		// obs.lifecycle stays nil: the runner counts are not known, and
		// the status keeps their last values.
		return reason.Errorf(v1alpha1.ReasonRunnerReapFailed, "cannot list runner pods: %w", err)
	}
	rep := &reaper.Tally{}
	obs.lifecycle = rep
	runners, _ := g.gitea.(gitea.Runners)
	here := g.registersIn()

	var starting []plan.StartingRunner
	var idle []plan.IdleRunner
	var spent, unable, former, ended []*batchv1.Job
	byName := map[string]*batchv1.Job{}
	for i := range obs.jobs {
		j := &obs.jobs[i]
		byName[j.Name] = j
		if !runnerjob.IsActive(j) {
			ended = append(ended, j)
			continue
		}
		if obs.busy[j.Name] {
			g.sawAtWork(j)
			continue
		}
		pv := pods[j.UID]
		why := obs.unavailable[j.Name]
		switch {
		case why == whySpent:
			spent = append(spent, j)
			continue
		case why == whyDisabled && plan.StillAtWork(j.CreationTimestamp.Time, g.state.AtWork[j.UID], s.now(), s.cfg.RunnerIdleTimeout):
			// Disabled by a reap that stopped because it was busy: it may
			// still be cleaning up after a cancelled job, past Gitea's
			// busy flag. It holds its slot until it ends or the idle
			// timeout passes, as an idle runner would.
			g.log.Info("a disabled runner seen at work within the idle timeout is left to finish (it may be cleaning up after a cancelled job)", "job", j.Name,
				"lastAtWork", g.state.AtWork[j.UID])
			continue
		case why == whyDisabled, why == whyUnregistered:
			unable = append(unable, j)
			continue
		case why == whyFormerScope:
			former = append(former, j)
			continue
		case stranded(why):
			g.log.Warn("a runner Job registered where the group no longer is, in a place the scaler cannot reach, is left to end by itself; it holds no slot", "job", j.Name, "why", why)
			continue
		}
		p, _, _ := s.runnerPlace(ctx, g, j)
		reg, _ := s.registrationsOf(ctx, g, p, j)
		registered := len(reg) > 0
		if pv.started {
			rep.Idle++
			// A runner Gitea calls busy runs no job the listings show,
			// but may still be cleaning up after a cancelled one (see
			// gitea.Runners): it waits for a later pass.
			switch {
			case slices.ContainsFunc(reg, func(r gitea.Runner) bool { return r.Busy }):
				g.sawAtWork(j)
			case registered:
				idle = append(idle, s.idleRunner(g, j))
			}
			continue
		}
		rep.Starting++
		starting = append(starting, plan.StartingRunner{Job: j.Name, Created: j.CreationTimestamp.Time,
			Registered: ranInGitea(j, reg), Reason: pv.reason, Message: pv.message})
	}

	errs := s.freeStuck(ctx, g, byName, plan.StuckRunners(s.now(), s.cfg.RunnerStartTimeout, starting), rep)
	errs = append(errs, s.deleteSpent(ctx, g, spent, rep)...)
	all, listed, listErr := s.registrationsAt(ctx, g, here)
	switch {
	case listErr != nil:
		errs = append(errs, fmt.Errorf("cannot list the runners of %s: %w", here, listErr))
	case listed:
		reap := plan.ReapIdle(plan.IdleInput{Now: s.now(), Timeout: s.cfg.RunnerIdleTimeout,
			Surplus: obs.surplus, MinIdle: int(g.rg.Spec.WarmPool()), Demand: len(obs.queued), Runners: idle})
		rp, rg := s.reaperWith(runners), s.reapGroup(g, rep)
		idleJobs := make([]*batchv1.Job, 0, len(reap))
		for _, name := range reap {
			idleJobs = append(idleJobs, byName[name])
		}
		unables := make([]reaper.Unable, 0, len(unable))
		for _, j := range unable {
			why := obs.unavailable[j.Name]
			unables = append(unables, reaper.Unable{Job: j, Why: why, Unregistered: why == whyUnregistered})
		}
		errs = append(errs, rp.ReapRunners(ctx, rg, s.cfg.RunnerIdleTimeout, idleJobs, unables)...)
		errs = append(errs, rp.RemoveOrphans(ctx, rg, here, all, obs.listedJobs(), obs.busy)...)
		errs = append(errs, rp.RemoveUnused(ctx, rg, s.inListedPlaces(ctx, g, ended))...)
		errs = append(errs, s.removeLeftBehind(ctx, g, runners, all, rep)...)
	}
	if runners != nil && s.cfg.RunnerIdleTimeout > 0 {
		errs = append(errs, s.reapFormerScopes(ctx, g, runners, former, obs, rep)...)
	}
	if len(errs) > 0 {
		return reason.Errorf(v1alpha1.ReasonRunnerReapFailed, "%w", joinCauses(errs))
	}
	return nil
}

// inListedPlaces keeps the runner Jobs whose runner registers in a place
// whose registrations this group's pass has listed already: an ended Job
// lingers until its TTL, and one of a place no active runner needs would
// otherwise cost that place's listing every pass.
func (s *Scaler) inListedPlaces(ctx context.Context, g *groupRun, jobs []*batchv1.Job) []*batchv1.Job {
	var out []*batchv1.Job
	for _, j := range jobs {
		p, _, _ := s.runnerPlace(ctx, g, j)
		if _, listed := g.regs[p]; listed {
			out = append(out, j)
		}
	}
	return out
}

// listRunners lists the runners registered in target t, once per pass
// for the groups that share a listing (same Gitea and token).
func (s *Scaler) listRunners(ctx context.Context, g *groupRun, runners gitea.Runners, t scope.Place) ([]gitea.Runner, error) {
	list := func(ctx context.Context) ([]gitea.Runner, error) {
		return runners.ListRunners(ctx, t)
	}
	if g.shared == nil {
		return list(ctx)
	}
	key := g.key
	key.target = t
	return g.shared.runners.get(ctx, key, list)
}

// runnerPods lists the group's runner pods (or takes the pass's list of
// its namespace) and tells, per runner Job UID,
// whether one has run and, if none has, why in Kubernetes' words.
func (s *Scaler) runnerPods(ctx context.Context, g *groupRun) (map[types.UID]podView, error) {
	if ns := g.shared.namespace(g.rg.Namespace); ns != nil {
		return ns.pods, ns.podsErr
	}
	list, err := s.kube.CoreV1().Pods(g.rg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: runnerjob.Selector(g.rg.Name)})
	if err != nil {
		return nil, err
	}
	return podViews(list.Items), nil
}

// podViews tells, per runner Job UID, whether one of its pods has run
// and, if none has, why in Kubernetes' words; and, by its newest pod,
// whether its runner is spent and since when its runner container runs.
// It reorders pods.
func podViews(pods []corev1.Pod) map[types.UID]podView {
	// Newest first, so a Job's latest pod gives the reason.
	sort.Slice(pods, func(i, j int) bool {
		return pods[j].CreationTimestamp.Before(&pods[i].CreationTimestamp)
	})
	out := map[types.UID]podView{}
	for i := range pods {
		p := &pods[i]
		ref := metav1.GetControllerOf(p)
		if ref == nil {
			continue
		}
		pv, seen := out[ref.UID]
		if !seen {
			pv.spent, pv.runningSince, pv.crashLooping = runnerContainer(p)
		}
		if !pv.started {
			started, reason, message := runnerpod.Started(p)
			switch {
			case started:
				pv.started, pv.reason, pv.message = true, "", ""
			case !seen:
				pv.reason, pv.message = reason, message
			}
		}
		out[ref.UID] = pv
	}
	return out
}

// runnerContainer judges a runner by its runner container, not by the
// pod: a regular sidecar keeps the pod Running after the runner has
// ended. The runner has run its job when its container ended with exit
// code 0 while another container still runs (restartPolicy OnFailure
// restarts it on any other code): without one, the pod is about to
// succeed, and its phase only lags. It is crash-looping when it waits to
// be restarted.
func runnerContainer(p *corev1.Pod) (spent bool, runningSince time.Time, crashLooping bool) {
	if p.Status.Phase != corev1.PodRunning {
		// Pending has not run; Succeeded or Failed ends the Job itself.
		return false, time.Time{}, false
	}
	sidecarRuns := slices.ContainsFunc(p.Status.ContainerStatuses, func(c corev1.ContainerStatus) bool {
		return c.Name != runnerjob.ContainerName && c.State.Running != nil
	})
	for _, c := range p.Status.ContainerStatuses {
		if c.Name != runnerjob.ContainerName {
			continue
		}
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			return sidecarRuns, time.Time{}, false
		case c.State.Running != nil:
			return false, c.State.Running.StartedAt.Time, false
		case c.State.Waiting != nil && c.LastTerminationState.Terminated != nil:
			return false, time.Time{}, true
		}
	}
	return false, time.Time{}, false
}

// failedCreate is runnerpod.FailedCreate with the pass's client.
func (s *Scaler) failedCreate(ctx context.Context, j *batchv1.Job) (reason, message string) {
	return runnerpod.FailedCreate(ctx, s.kube, j)
}
