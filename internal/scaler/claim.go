package scaler

import (
	"context"
	"errors"
	"fmt"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reason"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// maxClaimAttempts bounds how often one pass re-plans after losing a race
// for the state ConfigMap. Each loss means another pass made progress, so
// a handful is plenty; past it the group is reported and the next pass
// goes on.
const maxClaimAttempts = 5

// claim decides which queued jobs get a runner and stores those claims in
// the group's state ConfigMap before any Job exists. The write is
// conditional on the ConfigMap's resourceVersion: a pass that loses it to
// another pass loads, observes and plans again, so the two never claim one
// job twice nor together exceed the group's cap. It returns the new claims
// (none in a dry run, which prints the plan instead of storing it) and the
// last observation.
func (s *Scaler) claim(ctx context.Context, g *groupRun) ([]plan.Claim, *observation, error) {
	var obs *observation
	for attempt := 1; ; attempt++ {
		var loaded state.Loaded
		var err error
		if attempt == 1 && g.hasPreload {
			// Read by gather, before the runner Jobs it observes.
			loaded, err = g.preloaded, g.preloadErr
		} else {
			loaded, err = s.loadClaims(ctx, g)
		}
		if err != nil {
			return nil, obs, err
		}
		if obs, err = s.observe(ctx, g); err != nil {
			return nil, obs, err
		}
		untrusted := untrustedState(g.rg, loaded)
		// A plan from the watch caches may be behind: a runner Job made by
		// another pass that already dropped its claim may not have
		// reached the Jobs cache yet, and the conditional write would not
		// catch that (the state did not change). So that plan may only
		// find nothing to create; to create, or to rebuild a state, the
		// group reads the API server afresh, in the order a lone group
		// reads (state, runner Jobs, Gitea), and plans again.
		cached := attempt == 1 && g.fromCache
		if cached && untrusted != "" {
			g.log.Debug("the cached state is untrusted; reading afresh")
			continue
		}
		if untrusted != "" {
			s.rebuildClaims(ctx, g, &loaded, obs, untrusted)
		}
		p := s.makePlan(g, loaded.Claims, obs, untrusted != "")
		if cached && len(p.New) > 0 {
			g.log.Debug("planned runners from the watch caches; reading afresh before claiming", "claims", len(p.New))
			continue
		}
		obs.surplus = p.Surplus
		if s.cfg.DryRun {
			s.printPlan(g.rg, p)
			g.state = loaded
			return nil, obs, nil
		}
		g.state, err = g.store.Save(ctx, g.owner, loaded, p.Claims)
		switch {
		case err == nil:
			return p.New, obs, nil
		case !errors.Is(err, state.ErrConflict):
			return nil, obs, reason.Errorf(v1alpha1.ReasonKubernetesError, "%w", err)
		case attempt == maxClaimAttempts:
			return nil, obs, reason.Errorf(v1alpha1.ReasonStateConflict, "state ConfigMap %s kept changing under this pass (%d attempts); the next pass will try again", state.ConfigMapName(g.rg.Name), attempt)
		}
		g.log.Debug("state changed under this pass, planning again", "attempt", attempt)
	}
}

// loadClaims reads the group's state ConfigMap. One of the same name that
// the group does not own is never overwritten.
func (s *Scaler) loadClaims(ctx context.Context, g *groupRun) (state.Loaded, error) {
	loaded, err := g.store.Load(ctx, g.owner)
	return loaded, claimsError(err)
}

// claimsError is a failure to read a group's state in the group's words.
func claimsError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, state.ErrNotOurs):
		return reason.Errorf(v1alpha1.ReasonStateNotOwned, "%w", err)
	default:
		return reason.Errorf(v1alpha1.ReasonKubernetesError, "%w", err)
	}
}

// untrustedState says why the loaded claims cannot be trusted, or "" when
// they can: the ConfigMap held garbage or lost its key, or it is gone though
// the group was served before (someone deleted it).
func untrustedState(rg *v1alpha1.RunnerGroup, loaded state.Loaded) string {
	switch {
	case loaded.Corrupt != nil:
		return fmt.Sprintf("was unreadable (%v)", loaded.Corrupt)
	case loaded.ResourceVersion == "" && rg.Status.LastCheckTime != nil:
		return "was missing though the group was served before"
	}
	return ""
}

// rebuildClaims replaces untrusted claims with those the runner Jobs carry
// in their Gitea job label, and says so on the group.
func (s *Scaler) rebuildClaims(ctx context.Context, g *groupRun, loaded *state.Loaded, obs *observation, why string) {
	loaded.Claims = state.FromJobs(obs.jobs)
	name := state.ConfigMapName(g.rg.Name)
	g.log.Warn("state ConfigMap untrusted, rebuilt it from the runner Jobs; no runner is created in this pass", "configmap", name, "why", why, "claims", len(loaded.Claims))
	s.event(ctx, g.rg, "Warning", v1alpha1.ReasonStateRebuilt, fmt.Sprintf("state ConfigMap %s %s; rebuilt it from %d runner Jobs, and the next pass creates runners again", name, why, len(obs.jobs)))
}

// makePlan is the pure decision (package plan) on what was loaded and seen.
func (s *Scaler) makePlan(g *groupRun, claims state.Claims, obs *observation, hold bool) plan.Result {
	jobs := make([]plan.RunnerJob, 0, len(obs.jobs))
	for i := range obs.jobs {
		j := &obs.jobs[i]
		jobs = append(jobs, plan.RunnerJob{
			Name:        j.Name,
			Active:      runnerjob.IsActive(j),
			Busy:        obs.busy[j.Name],
			Unavailable: obs.unavailable[j.Name] != "",
			Stranded:    stranded(obs.unavailable[j.Name]),
			GiteaJobID:  runnerjob.GiteaJobID(j),
		})
	}
	p := plan.Make(plan.Input{
		Now:        s.now(),
		ClaimTTL:   s.cfg.SpawnTTL,
		MaxActive:  int(g.rg.Spec.RunnerCap()),
		Jobs:       jobs,
		Claims:     claims,
		Queued:     obs.queued,
		NewJobName: func() string { return s.newJobName(g.rg.Name) },
		MinIdle:    int(g.rg.Spec.WarmPool()),
		Hold:       hold,
	})
	g.log.Debug("planned", "queued", len(obs.queued), "leftToOthers", obs.leftToOthers, "blocked", obs.blocked, "running", obs.running,
		"active", p.Active, "idle", p.Idle, "inFlight", p.InFlight, "slots", p.Slots, "claims", len(p.New), "warm", p.Warm, "waiting", p.Waiting, "surplus", p.Surplus, "dropped", p.Dropped)
	return p
}

// printPlan is what a dry run shows instead of storing the claims.
func (s *Scaler) printPlan(rg *v1alpha1.RunnerGroup, p plan.Result) {
	fmt.Fprintf(s.out, "runnergroup %s/%s: %d active, %d slot(s), %d waiting\n", rg.Namespace, rg.Name, p.Active, p.Slots, p.Waiting)
	for _, c := range p.New {
		fmt.Fprintf(s.out, "  would create runner Job %s for Gitea job %d\n", c.JobName, c.GiteaJobID)
	}
	for _, id := range p.Dropped {
		fmt.Fprintf(s.out, "  would forget the claim for Gitea job %d (its runner Job exists, or never appeared)\n", id)
	}
}
