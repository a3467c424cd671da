package scaler

import (
	"context"
	"log/slog"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/assign"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/owned"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reaper"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reason"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// observation is what one pass saw of one group.
type observation struct {
	// jobs are the group's runner Jobs.
	jobs []batchv1.Job
	// askedAt is when the pass began to ask Gitea.
	askedAt time.Time
	// queued are the IDs of the queued Gitea jobs the group serves: those
	// its runners can run and the assignment rule gives it; queuedAt says
	// when Gitea created each (for the time from queued to runner Job).
	queued   []int64
	queuedAt map[int64]time.Time
	// leftToOthers counts queued jobs the group could run but the rule
	// gives to another group.
	leftToOthers int
	// blocked counts the jobs the group could run once their needs: are
	// done; running counts the jobs its runners run now.
	blocked int
	running int
	// ran are the running jobs on the group's runners, for the job
	// histograms (jobtimes.go).
	ran []gitea.Job
	// busy names the group's runner Jobs whose runner is running a Gitea
	// job.
	busy map[string]bool
	// unavailable names the active runner Jobs, not busy, whose runner can
	// take no work, with why (see unavailableRunners).
	unavailable map[string]string
	// pods tells, per runner Job UID, what its pods say (podsErr: why they
	// could not be listed); read with the runner Jobs.
	pods    map[types.UID]podView
	podsErr error
	// surplus is the plan's count of runners beyond the demand, which the
	// lifecycle step may reap.
	surplus int
	// lifecycle is what the lifecycle step saw and did; nil when it did
	// not run.
	lifecycle *reaper.Tally
}

// observe lists the group's runner Jobs and then asks Gitea for the jobs of
// its scope, keeping those the group serves. The order matters: a runner Job
// seen finished had its Gitea job finished before Gitea was asked, so the
// listing never shows as queued a job whose runner is already gone.
//
// The first observation of a pass takes what the pass gathered for all
// groups (gather, which keeps the same order); one after a lost race for
// the state reads afresh.
func (s *Scaler) observe(ctx context.Context, g *groupRun) (*observation, error) {
	rg := g.rg
	jobs, askedAt, snap, err := s.read(ctx, g)
	if err != nil {
		return nil, err
	}
	obs := &observation{jobs: ownJobs(rg, jobs), askedAt: askedAt, busy: map[string]bool{}, queuedAt: map[int64]time.Time{}}
	var running map[string]bool
	for _, j := range snap.Queued {
		if running == nil {
			running = g.runningRunners(snap)
		}
		switch {
		case !g.runnerLabels.CanRun(j.Labels):
		case !g.serves(j), s.startingElsewhere(g, j.ID, running):
			obs.leftToOthers++
		default:
			obs.queued = append(obs.queued, j.ID)
			obs.queuedAt[j.ID] = j.Created
		}
	}
	for _, j := range snap.Blocked {
		if g.runnerLabels.CanRun(j.Labels) {
			obs.blocked++
		}
	}
	byRunner := runnerNames(obs.jobs)
	for _, j := range snap.Running {
		if job, ok := g.jobOfRunner(byRunner, j.RunnerName); ok {
			obs.running++
			obs.busy[job] = true
			obs.ran = append(obs.ran, j)
		}
	}
	obs.pods, obs.podsErr = s.runnerPods(ctx, g)
	s.busyElsewhere(ctx, g, obs)
	obs.unavailable = s.unavailableRunners(ctx, g, obs)
	return obs, nil
}

// busyElsewhere marks busy the started runners registered in a scope that
// contains the group's (place.go): Gitea may have given them a job of
// another repository of that scope, which the group's own listing does not
// show. Such a runner is no supply, and no reaper takes it for idle. Their
// place's running jobs are read once per pass; a place whose running jobs
// cannot be read counts its runners busy.
func (s *Scaler) busyElsewhere(ctx context.Context, g *groupRun, obs *observation) {
	runners, ok := g.gitea.(gitea.Runners)
	if !ok || obs.podsErr != nil {
		return
	}
	own := scope.Of(&g.rg.Spec)
	for i := range obs.jobs {
		j := &obs.jobs[i]
		if !runnerjob.IsActive(j) || obs.busy[j.Name] || !obs.pods[j.UID].started {
			continue
		}
		p, _, former := s.runnerPlace(ctx, g, j)
		if p == own || former {
			continue
		}
		if g.running == nil {
			g.running = map[scope.Place]runningJobs{}
		}
		r, read := g.running[p]
		if !read {
			r = runningJobs{names: map[string]bool{}}
			var jobs []gitea.Job
			if jobs, r.err = runners.InProgress(ctx, p); r.err != nil {
				g.log.Warn("cannot read the running jobs of the scope the group's runners register in; its runners there count as busy", "scope", p.String(), "error", r.err)
			}
			for _, rj := range jobs {
				r.names[rj.RunnerName] = true
			}
			g.running[p] = r
		}
		if r.err != nil || r.names[runnerjob.RunnerNameOf(j)] {
			obs.busy[j.Name] = true
		}
	}
}

// runningJobs are the runners that run a job in one place, read once per
// group and pass (busyElsewhere).
type runningJobs struct {
	names map[string]bool
	err   error
}

// read returns the group's runner Jobs (with the group's label; ownJobs
// keeps those it owns), when Gitea was asked and what Gitea said.
func (s *Scaler) read(ctx context.Context, g *groupRun) ([]batchv1.Job, time.Time, gitea.Snapshot, error) {
	rg := g.rg
	target := scope.Of(&rg.Spec)
	giteaErr := func(err error) error {
		return reason.Errorf(giteaReason(err), "cannot list Gitea jobs of %s at %s: %w", target, rg.Spec.Gitea.URL, err)
	}
	if ns, l := g.shared.namespace(rg.Namespace), g.shared.listing(g.key); ns != nil && l != nil && !g.sharedUsed {
		g.sharedUsed = true
		select {
		case <-l.done:
		case <-ctx.Done():
			return nil, time.Time{}, gitea.Snapshot{}, giteaErr(ctx.Err())
		}
		switch {
		case ns.jobsErr != nil:
			return nil, time.Time{}, gitea.Snapshot{}, reason.Errorf(v1alpha1.ReasonKubernetesError, "cannot list runner Jobs: %w", ns.jobsErr)
		case l.err != nil:
			return nil, time.Time{}, gitea.Snapshot{}, giteaErr(l.err)
		}
		return groupJobs(rg, ns.jobs), l.askedAt, l.snap, nil
	}
	list, err := s.kube.BatchV1().Jobs(rg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: runnerjob.Selector(rg.Name)})
	if err != nil {
		return nil, time.Time{}, gitea.Snapshot{}, reason.Errorf(v1alpha1.ReasonKubernetesError, "cannot list runner Jobs: %w", err)
	}
	askedAt := s.now()
	snap, err := g.gitea.Snapshot(ctx, target)
	if err != nil {
		return nil, time.Time{}, gitea.Snapshot{}, giteaErr(err)
	}
	warnUnlisted(g.log, target, snap)
	return list.Items, askedAt, snap, nil
}

// runnerNames maps the name each runner Job's runner registered with to
// the Job's name.
func runnerNames(jobs []batchv1.Job) map[string]string {
	out := make(map[string]string, len(jobs))
	for i := range jobs {
		out[runnerjob.RunnerNameOf(&jobs[i])] = jobs[i].Name
	}
	return out
}

// jobOfRunner says whether a Gitea runner is one of the group's, and its
// runner Job's name: a name the group registers (with its owner tag), or
// the name a listed runner Job of the group registered with (a Job made
// before the tag, whose runner registered under the Job's own name).
func (g *groupRun) jobOfRunner(byRunner map[string]string, runnerName string) (string, bool) {
	if job, ok := runnerjob.JobOfRunner(g.rg, runnerName); ok {
		return job, true
	}
	job, ok := byRunner[runnerName]
	return job, ok
}

// serves reports whether the assignment rule gives this queued job, which
// the group can run, to the group. A job the rule gives to nobody (the group
// was created after the pass listed every group) came from the group's own
// listing, so it is in the group's scope: the group serves it.
func (g *groupRun) serves(j gitea.Job) bool {
	if g.rule == nil {
		return true
	}
	repo := j.Repo
	if repo == "" && g.rg.Spec.Scope != v1alpha1.ScopeGlobal {
		// The group's own listing returned it, so its owner is the group's.
		repo = g.rg.Spec.Owner() + "/" + g.rg.Spec.Repo
	}
	owner := g.rule.Owner(g.rg.Spec.Gitea.URL, assign.Job{Repo: repo, Labels: j.Labels, Created: j.Created})
	return owner == "" || owner == g.rg.Key()
}

// startingElsewhere reports whether another group's runner Job, started
// for this Gitea job within the assignment hold, is still active and its
// runner free: the job had another owner (this group was paused, failing
// or not yet served, or the job's turn came), and that runner may take it
// yet. Starting a second runner for it would leave one idle.
// A runner is not free when Gitea lists it running a job (running: an
// ephemeral runner takes whichever queued job it is offered, not
// necessarily the one it was started for) or its runner container has
// ended after a job: it will not take this one, which would otherwise
// wait the whole hold for nothing. Past the hold the other
// runner has had its chance, as the assignment rule's turns say. Only the
// namespaces this pass gathered are seen, and only runners of the group's
// Gitea count: job IDs are per Gitea.
func (s *Scaler) startingElsewhere(g *groupRun, id int64, running map[string]bool) bool {
	instance := scope.Instance(g.rg.Spec.Gitea.URL)
	for _, j := range g.shared.runnersFor(id) {
		if owned.Controls(g.rg, j) || !runnerjob.IsActive(j) || scope.Instance(instanceURL(j)) != instance {
			continue
		}
		// A Job without a creation time (never so from the API server)
		// counts as just created.
		young := j.CreationTimestamp.IsZero() || s.now().Sub(j.CreationTimestamp.Time) < s.cfg.AssignmentHold
		if !young || running[runnerjob.RunnerNameOf(j)] {
			continue
		}
		if v := g.shared.namespace(j.Namespace); v != nil && v.pods[j.UID].spent {
			continue
		}
		return true
	}
	return false
}

// runningRunners names the runners Gitea lists running a job on the
// group's Gitea: in the group's own listing, and in every other listing
// of the pass on that Gitea whose answer is already in (another group's
// runner may run a job outside this group's scope). A listing still
// under way is not waited for: the group is served as soon as its own is
// in, and a runner not seen busy counts as free, as before.
func (g *groupRun) runningRunners(own gitea.Snapshot) map[string]bool {
	out := map[string]bool{}
	for _, j := range own.Running {
		out[j.RunnerName] = true
	}
	if g.shared == nil {
		return out
	}
	instance := scope.Of(&g.rg.Spec).URL()
	for k, l := range g.shared.listings {
		if k.target.URL() != instance {
			continue
		}
		select {
		case <-l.done:
		default:
			continue
		}
		if l.err != nil {
			continue
		}
		for _, j := range l.snap.Running {
			out[j.RunnerName] = true
		}
	}
	return out
}

// instanceURL is the Gitea a runner Job's runner registers with (its
// GITEA_INSTANCE_URL, which the scaler sets and templates may not).
func instanceURL(j *batchv1.Job) string {
	for _, c := range j.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == "GITEA_INSTANCE_URL" {
				return e.Value
			}
		}
	}
	return ""
}

// ownJobs keeps the Jobs this group controls: a Job carrying the group's
// label but owned by something else (a copy, a group of the same name that
// was deleted and made again) is not ours to count.
func ownJobs(rg *v1alpha1.RunnerGroup, jobs []batchv1.Job) []batchv1.Job {
	out := jobs[:0:0]
	for i := range jobs {
		if owned.Controls(rg, &jobs[i]) {
			out = append(out, jobs[i])
		}
	}
	return out
}

// listedJobs names the group's runner Jobs the pass listed: a registration
// whose Job is not among them may be an orphan's.
func (o *observation) listedJobs() map[string]bool {
	listed := make(map[string]bool, len(o.jobs))
	for i := range o.jobs {
		listed[o.jobs[i].Name] = true
	}
	return listed
}

// warnUnlisted says which scope's listing left jobs out (gitea.Snapshot's
// Unlisted), so an admin can find and delete them in Gitea: until then
// every pass reads around them.
func warnUnlisted(log *slog.Logger, target scope.Place, snap gitea.Snapshot) {
	if snap.Unlisted > 0 {
		log.Warn("Gitea could not list some jobs of the scope and they were left out; a run queued as its repository was deleted leaves such jobs, and an admin can delete them in Gitea",
			"scope", target.String(), "unlisted", snap.Unlisted)
	}
}
