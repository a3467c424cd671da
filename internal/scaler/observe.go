package scaler

import (
	"context"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// observation is what one pass saw of one group.
type observation struct {
	// jobs are the group's runner Jobs.
	jobs []batchv1.Job
	// askedAt is when the pass began to ask Gitea. Claims made after it
	// may be for jobs the listing never saw, so they must not be judged
	// by it (see plan.Input.SnapshotAt).
	askedAt time.Time
	// queued are the IDs of the queued Gitea jobs the group can run.
	queued []int64
	// blocked counts the jobs the group could run once their needs: are
	// done; running counts the jobs its runners run now.
	blocked int
	running int
	// busy maps the group's runners to the Gitea job each runs.
	busy map[string]int64
}

// observe lists the group's runner Jobs and asks Gitea for the jobs of its
// scope, keeping those the group's runners could take.
func (s *Scaler) observe(ctx context.Context, g *groupRun) (*observation, error) {
	rg := g.rg
	list, err := s.kube.BatchV1().Jobs(rg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: runnerjob.Selector(rg.Name)})
	if err != nil {
		return nil, newGroupError(ReasonKubernetesError, "cannot list runner Jobs: %w", err)
	}
	target := targetOf(&rg.Spec)
	askedAt := s.now()
	snap, err := g.gitea.Snapshot(ctx, target)
	if err != nil {
		return nil, newGroupError(giteaReason(err), "cannot list Gitea jobs of %s at %s: %w", target, rg.Spec.Gitea.URL, err)
	}
	obs := &observation{jobs: ownJobs(rg, list.Items), askedAt: askedAt, busy: map[string]int64{}}
	for _, j := range snap.Queued {
		if g.runnerLabels.CanRun(j.Labels) {
			obs.queued = append(obs.queued, j.ID)
		}
	}
	for _, j := range snap.Blocked {
		if g.runnerLabels.CanRun(j.Labels) {
			obs.blocked++
		}
	}
	for _, j := range snap.Running {
		if runnerjob.IsRunnerName(rg.Name, j.RunnerName) {
			obs.running++
			obs.busy[j.RunnerName] = j.ID
		}
	}
	return obs, nil
}

// ownJobs keeps the Jobs this group controls: a Job carrying the group's
// label but owned by something else (a copy, a group of the same name that
// was deleted and made again) is not ours to count.
func ownJobs(rg *v1alpha1.RunnerGroup, jobs []batchv1.Job) []batchv1.Job {
	out := jobs[:0:0]
	for _, j := range jobs {
		if ref := metav1.GetControllerOf(&j); ref != nil && ref.UID == rg.UID {
			out = append(out, j)
		}
	}
	return out
}

// targetOf says which part of Gitea a group serves. For scope repo the
// owner is whichever of org or user is set (the CRD requires exactly one).
func targetOf(spec *v1alpha1.RunnerGroupSpec) gitea.Target {
	t := gitea.Target{Scope: spec.Scope, Owner: spec.Owner(), Repo: spec.Repo}
	if spec.Scope == v1alpha1.ScopeGlobal {
		t.Owner = ""
	}
	return t
}
