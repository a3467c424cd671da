package scaler

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/assign"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// record tells the group how its pass went: the status when it changed
// (see statusChanged), and for a failure an error log and, when the
// failure is news, a Warning event.
//
// It writes on a context of its own, detached from the group's: a pass
// cancelled by SIGTERM or a group past its deadline still has its outcome
// recorded, within detachedTimeout.
func (s *Scaler) record(ctx context.Context, g *groupRun, obs *observation, created int, err error) {
	var reason, message string
	if err != nil {
		reason, message = failure(ctx, s.cfg.GroupTimeout, err)
	}
	ctx, cancel := detached(ctx)
	defer cancel()
	// What the status said before this pass decides whether the failure
	// is news.
	before := meta.FindStatusCondition(g.rg.Status.Conditions, v1alpha1.ConditionReady)
	news := before == nil || before.Status != metav1.ConditionFalse || before.Reason != reason || before.Message != message
	s.recordStatus(ctx, g, obs, created, reason, message)
	g.stats = groupStats(g.rg, obs, created, err != nil)
	g.stats.Startups, g.stats.Executions = s.jobDurations(g, obs)
	if err != nil {
		g.log.Error("pass failed for RunnerGroup", "reason", reason, "error", message)
		// A failure that repeats is in the status already; an event every
		// pass would be thousands an hour at a few hundred groups. In a
		// namespace that is not enabled the scaler may not write one.
		if news && reason != v1alpha1.ReasonNamespaceNotEnabled {
			s.event(ctx, g.rg, "Warning", reason, message)
		}
	}
}

// recordStatus writes what the pass saw and how it went: a failure's
// reason and message, or none. What was not observed (Gitea failed) keeps
// its last value, so a Gitea outage does not show as an empty queue. A dry
// run writes nothing.
func (s *Scaler) recordStatus(ctx context.Context, g *groupRun, obs *observation, created int, reason, message string) {
	rg := g.rg
	st := rg.Status
	st.Conditions = append([]metav1.Condition(nil), rg.Status.Conditions...)
	st.ObservedGeneration = rg.Generation
	if obs != nil {
		observed(&st, obs, created, int(rg.Spec.WarmPool()))
	}
	// SetStatusCondition keeps the old transition time when the status did
	// not change, and takes ours when it did.
	now := metav1.NewTime(s.now())
	meta.SetStatusCondition(&st.Conditions, readyCondition(rg, &st, created, reason, message, now))
	meta.SetStatusCondition(&st.Conditions, scalingCondition(rg, &st, obs, s.cfg.RunnerStartTimeout, now))
	if c := g.regCheck; c != nil {
		c.ObservedGeneration, c.LastTransitionTime = rg.Generation, now
		meta.SetStatusCondition(&st.Conditions, *c)
	}
	if c := g.cacheCheck; c != nil {
		c.ObservedGeneration, c.LastTransitionTime = rg.Generation, now
		meta.SetStatusCondition(&st.Conditions, *c)
	} else if !s.cfg.Runner.Cache.Enabled() {
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionCache)
	}

	if s.cfg.DryRun {
		return
	}
	patch := statusChanged(rg.UID, &rg.Status, &st, s.now())
	// One line per group and pass, at debug level: what tells the e2e
	// suite that a pass served the group now that the status does not
	// move on every pass.
	g.log.Debug("group recorded", "statusPatched", patch)
	if !patch {
		// Unchanged: the listed group holds this status already, with
		// the lastCheckTime the API server keeps.
		return
	}
	// A copy takes the new status: the listed object may be a loop's
	// cache's own (selection.ListShared), which only the watch changes.
	written := *rg
	written.Status = st
	g.rg = &written
	if err := s.groups.PatchStatus(ctx, g.rg); err != nil {
		g.log.Error("cannot update RunnerGroup status", "error", err)
	}
}

// heartbeatOf is when group uid's steady status is written again: at a
// point between three quarters of assign.StatusHeartbeat and all of it, fixed per
// group by its UID. Groups first served by one pass (a new install, or the
// 1,500 new groups a pass serves at most) would otherwise all fall due in
// the same later pass, and that pass would patch them all, paced by
// --kube-qps (30 s at 1,500); spread, they fall due over a
// quarter of the heartbeat, and their periods differ, so they drift
// further apart. Writes cost G / (7/8 × assign.StatusHeartbeat) per second on
// average, a seventh more than a fixed heartbeat.
func heartbeatOf(uid types.UID) time.Duration {
	h := fnv.New32a()
	_, _ = h.Write([]byte(uid))
	// The hash's fraction of 2^32, of a quarter of the heartbeat (in
	// milliseconds, so the product fits in 64 bits).
	quarter := uint64(assign.StatusHeartbeat / 4 / time.Millisecond)
	spread := time.Duration(uint64(h.Sum32())*quarter>>32) * time.Millisecond
	return assign.StatusHeartbeat - spread
}

// statusChanged reports whether next must be written over prev, the status
// of group uid: anything but lastCheckTime differs, or prev's
// lastCheckTime is missing or as old as the group's heartbeat.
func statusChanged(uid types.UID, prev, next *v1alpha1.RunnerGroupStatus, now time.Time) bool {
	if prev.LastCheckTime == nil || now.Sub(prev.LastCheckTime.Time) >= heartbeatOf(uid) {
		return true
	}
	a, b := *prev, *next
	a.LastCheckTime, b.LastCheckTime = nil, nil
	return !equality.Semantic.DeepEqual(a, b)
}

// observed sets the counts of the status from what the pass saw. The Jobs
// created in this pass are active, though the listing predates them. Warm
// runners are the started idle runners beyond the queued jobs, up to the
// warm pool's size.
func observed(st *v1alpha1.RunnerGroupStatus, obs *observation, created, minIdle int) {
	active := int32(created)
	for i := range obs.jobs {
		if runnerjob.IsActive(&obs.jobs[i]) {
			active++
		}
	}
	st.ActiveRunners = active
	st.QueuedJobs = int32(len(obs.queued))
	st.BlockedJobs = int32(obs.blocked)
	st.RunningJobs = int32(obs.running)
	st.JobsLeftToOtherGroups = int32(obs.leftToOthers)
	if l := obs.lifecycle; l != nil {
		st.ActiveRunners -= int32(l.DeletedJobs)
		st.IdleRunners, st.StartingRunners = int32(l.Idle), int32(l.Starting)
		st.StuckRunners, st.ReapedRunners = int32(len(l.Stuck)), int32(l.Reaped)
		st.WarmRunners = int32(min(minIdle, max(0, l.Idle-len(obs.queued))))
	}
	// Without the lifecycle's counts (its pods could not be listed) the
	// runner counts keep their last values: not known is not zero.
	t := metav1.NewTime(obs.askedAt)
	st.LastCheckTime = &t
}

// readyCondition says whether the pass served the group, or why not: a
// failure's reason is not empty.
func readyCondition(rg *v1alpha1.RunnerGroup, st *v1alpha1.RunnerGroupStatus, created int, reason, message string, now metav1.Time) metav1.Condition {
	c := metav1.Condition{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReconciled,
		ObservedGeneration: rg.Generation, LastTransitionTime: now,
		Message: fmt.Sprintf("%d queued, %d blocked, %d running; %d runner Job(s) created", st.QueuedJobs, st.BlockedJobs, st.RunningJobs, created),
	}
	if reason != "" {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, reason, message
	}
	return c
}

// scalingCondition says whether the group can start runners: not when it
// is paused, nor when this pass deleted runner Jobs whose pod did not start
// (with the pod's own reason and message), nor when it is at its cap while
// jobs wait.
func scalingCondition(rg *v1alpha1.RunnerGroup, st *v1alpha1.RunnerGroupStatus, obs *observation, startTimeout time.Duration, now metav1.Time) metav1.Condition {
	c := metav1.Condition{
		Type: v1alpha1.ConditionScalingActive, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonScaling,
		ObservedGeneration: rg.Generation, LastTransitionTime: now,
		Message: fmt.Sprintf("%d of %d runners active", st.ActiveRunners, rg.Spec.MaxActiveRunners),
	}
	switch {
	case rg.Spec.Suspend:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonPaused, "spec.suspend is true: the group starts no runners"
	case rg.Spec.MaxActiveRunners == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonPaused, "maxActiveRunners is 0: the group starts no runners"
	case obs != nil && obs.lifecycle != nil && len(obs.lifecycle.Stuck) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonRunnerStartTimeout
		c.Message = cutRunes(stuckMessage(obs.lifecycle.Stuck, startTimeout), maxMessageRunes)
	case obs != nil && obs.lifecycle != nil && len(obs.lifecycle.Unused) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonRunnerEndedWithoutJob
		c.Message = cutRunes(unusedMessage(obs.lifecycle.Unused), maxMessageRunes)
	case st.ActiveRunners >= rg.Spec.MaxActiveRunners && st.QueuedJobs > 0:
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonAtCapacity
		c.Message += "; queued jobs wait for a free slot"
	}
	return c
}

// stuckMessage says why runner Jobs were deleted for not starting: the
// first few pods' own reasons and messages.
func stuckMessage(stuck []plan.Stuck, timeout time.Duration) string {
	var parts []string
	for _, st := range stuck[:min(len(stuck), maxCauses)] {
		parts = append(parts, st.Reason+": "+st.Message)
	}
	msg := fmt.Sprintf("%d runner Job(s) did not start within %s and were deleted; the jobs they were for get a new runner after a back-off: %s",
		len(stuck), timeout, strings.Join(parts, "; "))
	if len(stuck) > maxCauses {
		msg += fmt.Sprintf("; and %d more", len(stuck)-maxCauses)
	}
	return msg
}

// unusedMessage says which runner Jobs completed without their runner
// taking a job, and where to look.
func unusedMessage(jobs []string) string {
	msg := fmt.Sprintf("%d runner Job(s) completed without their runner taking a job; their jobs get new runners, which may end the same way: "+
		"the pods' logs say why, e.g. kubectl logs job/%s", len(jobs), jobs[0])
	if len(jobs) > 1 {
		msg += fmt.Sprintf(" (also %s)", strings.Join(jobs[1:min(len(jobs), maxCauses)], ", "))
	}
	return msg
}

// event records a core/v1 Event on the RunnerGroup. It is written directly
// rather than through client-go's broadcaster, whose asynchronous sink could
// drop the last events when a short-lived pass exits. Failures are logged
// and otherwise ignored: an event is a courtesy, the status is the record.
// Messages are built from object names and errors only, never secret values,
// and are cut to maxMessageRunes. A dry run writes none.
func (s *Scaler) event(ctx context.Context, rg *v1alpha1.RunnerGroup, typ, reason, message string) {
	if s.cfg.DryRun {
		return
	}
	now := metav1.NewTime(s.now())
	host, _ := os.Hostname()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: rg.Name + ".", Namespace: rg.Namespace},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind,
			Namespace: rg.Namespace, Name: rg.Name, UID: rg.UID, ResourceVersion: rg.ResourceVersion,
		},
		Type: typ, Reason: reason, Message: cutRunes(message, maxMessageRunes),
		Source:         corev1.EventSource{Component: v1alpha1.FieldManager},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: v1alpha1.ReportingController, ReportingInstance: host,
	}
	if _, err := s.kube.CoreV1().Events(rg.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		s.log.Warn("cannot record event", "runnergroup", rg.Key(), "reason", reason, "error", err)
	}
}
