package scaler

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// lifecycleReport is what the lifecycle step saw and did, for record.
type lifecycleReport struct {
	// idle and starting count the active runner Jobs whose runner runs no
	// job, by whether their pod has run, less those this step deleted.
	idle, starting int
	// stuck are the runner Jobs deleted (or, in a dry run, that would be)
	// because their pod did not start in time.
	stuck []plan.Stuck
	// reaped counts idle runner Jobs deleted and orphan registrations
	// removed; orphans counts the latter alone.
	reaped, orphans int
	// deletedJobs counts the runner Jobs this step deleted, which the
	// listing still showed as active.
	deletedJobs int
}

// podView is what the lifecycle needs of a runner Job's pods.
type podView struct {
	started         bool
	reason, message string
}

// lifecycle is the step after create: it frees runner Jobs whose pod never
// started, reaps idle runners beyond the demand and removes orphan
// registrations from Gitea. What it saw and did goes on obs for record.
// Its failures are the group's (RunnerReapFailed) but never undo what the
// steps before it did.
func (s *Scaler) lifecycle(ctx context.Context, g *groupRun, obs *observation) error {
	rep := &lifecycleReport{}
	obs.lifecycle = rep
	pods, err := s.runnerPods(ctx, g)
	if err != nil {
		return newGroupError(ReasonRunnerReapFailed, "cannot list runner pods: %w", err)
	}
	runners, _ := g.gitea.(gitea.Runners)
	var regs map[string][]gitea.Runner
	var all []gitea.Runner
	if runners != nil && s.cfg.RunnerIdleTimeout > 0 {
		if all, err = s.listRunners(ctx, g, runners); err != nil {
			return newGroupError(ReasonRunnerReapFailed, "cannot list the runners of %s: %w", TargetOf(&g.rg.Spec), err)
		}
		regs = map[string][]gitea.Runner{}
		for _, r := range all {
			regs[r.Name] = append(regs[r.Name], r)
		}
	}

	var starting []plan.StartingRunner
	var idle []plan.IdleRunner
	byName := map[string]*batchv1.Job{}
	for i := range obs.jobs {
		j := &obs.jobs[i]
		byName[j.Name] = j
		if !runnerjob.IsActive(j) || obs.busy[j.Name] {
			continue
		}
		pv := pods[j.UID]
		reg := regs[runnerjob.RunnerNameOf(j)]
		registered := len(reg) > 0
		if pv.started {
			rep.idle++
			// A runner Gitea calls busy runs no job the listings show,
			// but may still be cleaning up after a cancelled one (see
			// gitea.Runners): it waits for a later pass.
			if registered && !slices.ContainsFunc(reg, func(r gitea.Runner) bool { return r.Busy }) {
				idle = append(idle, plan.IdleRunner{Job: j.Name, Since: j.CreationTimestamp.Time})
			}
			continue
		}
		rep.starting++
		starting = append(starting, plan.StartingRunner{Job: j.Name, Created: j.CreationTimestamp.Time,
			Registered: registered, Reason: pv.reason, Message: pv.message})
	}

	errs := s.freeStuck(ctx, g, byName, plan.StuckRunners(s.now(), s.cfg.RunnerStartTimeout, starting), rep)
	if runners != nil && regs != nil {
		reap := plan.ReapIdle(plan.IdleInput{Now: s.now(), Timeout: s.cfg.RunnerIdleTimeout,
			Surplus: obs.surplus, MinIdle: int(g.rg.Spec.MinIdleRunners), Runners: idle})
		errs = append(errs, s.reapIdle(ctx, g, runners, byName, regs, reap, rep)...)
		errs = append(errs, s.removeOrphans(ctx, g, runners, all, obs, rep)...)
	}
	if len(errs) > 0 {
		return newGroupError(ReasonRunnerReapFailed, "%w", joinCauses(errs))
	}
	return nil
}

// listRunners lists the runners registered in the group's scope, once per
// pass for the groups that share a listing (same Gitea, token and target).
func (s *Scaler) listRunners(ctx context.Context, g *groupRun, runners gitea.Runners) ([]gitea.Runner, error) {
	list := func(ctx context.Context) ([]gitea.Runner, error) {
		return runners.ListRunners(ctx, TargetOf(&g.rg.Spec))
	}
	if g.shared == nil {
		return list(ctx)
	}
	return g.shared.runners.get(ctx, g.key, list)
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

// podViews tells, per runner Job UID, whether one of its pods has run and,
// if none has, why in Kubernetes' words. It reorders pods.
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
		if pv.started {
			continue
		}
		started, reason, message := PodStart(p)
		switch {
		case started:
			pv = podView{started: true}
		case !seen:
			pv = podView{reason: reason, message: message}
		}
		out[ref.UID] = pv
	}
	return out
}

// PodStart says whether a pod has run, and if not, why: its PodScheduled
// condition when it was not scheduled (Unschedulable), else a waiting
// container's reason (ErrImagePull, ImagePullBackOff,
// CreateContainerConfigError).
func PodStart(p *corev1.Pod) (started bool, reason, message string) {
	if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return true, "", ""
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running != nil || c.State.Terminated != nil || c.LastTerminationState.Terminated != nil {
			return true, "", ""
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return false, c.Reason, c.Message
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil && w.Reason != "" {
			return false, w.Reason, w.Message
		}
	}
	return false, "Pending", fmt.Sprintf("pod %s has not started", p.Name)
}

// failedCreate is FailedCreate with the pass's client.
func (s *Scaler) failedCreate(ctx context.Context, j *batchv1.Job) (reason, message string) {
	return FailedCreate(ctx, s.kube, j)
}

// FailedCreate is the newest FailedCreate event of a Job that has no pod:
// the Job controller's words for what refused the pod (Pod Security
// Admission, a ResourceQuota).
func FailedCreate(ctx context.Context, kube kubernetes.Interface, j *batchv1.Job) (reason, message string) {
	reason, message = "NoPod", "the Job controller created no pod"
	list, err := kube.CoreV1().Events(j.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(j.UID) + ",reason=FailedCreate"})
	if err != nil {
		return reason, message + fmt.Sprintf(" (its events cannot be read: %v)", err)
	}
	var newest time.Time
	for _, ev := range list.Items {
		t := ev.LastTimestamp.Time
		if t.IsZero() {
			t = ev.EventTime.Time
		}
		if ev.InvolvedObject.UID == j.UID && ev.Reason == "FailedCreate" && !t.Before(newest) {
			newest, reason, message = t, ev.Reason, ev.Message
		}
	}
	return reason, message
}
