package scaler

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// When a pass last saw each runner at work: named by a running job, or
// called busy by Gitea. A runner cleaning up after a cancelled job is
// neither once Gitea 1.27.3 stops calling it busy (5 to 10 s after
// gitea-runner 3.1.0's last report, which stops at the cancel), yet it
// will exit by itself once done, as every ephemeral runner does after its
// job. Its idle time counts from the last sighting, not from its Job's
// creation. The sightings live in the group's state ConfigMap
// (state.AtWork), so a CronJob's passes and a restarted loop count alike;
// plan.KeepAtWork says when they are written.

// sawAtWork records that j's runner is at work in this pass.
func (g *groupRun) sawAtWork(j *batchv1.Job) {
	g.seenAtWork = append(g.seenAtWork, j.UID)
}

// idleRunner is j's runner as an idle one, idle since when the group's
// state last saw it at work (plan.IdleSince).
func (s *Scaler) idleRunner(g *groupRun, j *batchv1.Job) plan.IdleRunner {
	return plan.IdleRunner{Job: j.Name, Since: plan.IdleSince(j.CreationTimestamp.Time, g.state.AtWork[j.UID], s.now())}
}

// keepAtWork writes this pass's sightings into the group's state when
// plan.KeepAtWork says they are due, loading the state again if another
// write came first. A sighting that is not kept only shortens a cleanup's
// grace, so a failure is a warning and the next pass tries again.
func (s *Scaler) keepAtWork(ctx context.Context, g *groupRun, obs *observation) {
	if s.cfg.DryRun || obs == nil || len(g.seenAtWork) == 0 {
		return
	}
	var active []types.UID
	for i := range obs.jobs {
		if runnerjob.IsActive(&obs.jobs[i]) {
			active = append(active, obs.jobs[i].UID)
		}
	}
	loaded, first := g.state, true
	err := retry.OnError(stateRetry, lostStateRace, func() error {
		if !first {
			var err error
			if loaded, err = g.store.Load(ctx, g.owner); err != nil {
				return err
			}
		}
		first = false
		next, due := plan.KeepAtWork(plan.AtWorkInput{Now: s.now(), Timeout: s.cfg.RunnerIdleTimeout,
			Kept: loaded.AtWork, Seen: g.seenAtWork, Active: active})
		if !due {
			return nil
		}
		saved, err := g.store.SaveAtWork(ctx, g.owner, loaded, next)
		if err == nil {
			g.state = saved
		}
		return err
	})
	if err != nil {
		g.log.Warn("cannot keep when the group's runners were last seen at work; the next pass tries again", "configmap", state.ConfigMapName(g.rg.Name), "error", err)
	}
}
