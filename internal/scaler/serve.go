package scaler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerlabels"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// maxClaimAttempts bounds how often one pass re-plans after losing a race
// for the state ConfigMap. Each loss means another pass made progress, so
// a handful is plenty; past it the group is reported and the next pass
// goes on.
const maxClaimAttempts = 5

// groupError is a failure of one group, with the condition reason it shows.
type groupError struct {
	reason string
	err    error
}

func (e *groupError) Error() string { return e.err.Error() }
func (e *groupError) Unwrap() error { return e.err }

func fail(reason string, format string, args ...any) *groupError {
	return &groupError{reason: reason, err: fmt.Errorf(format, args...)}
}

// observation is what one pass saw of one group.
type observation struct {
	jobs []batchv1.Job
	// askedAt is when the pass began to ask Gitea. Claims made after it
	// may be for jobs the snapshot never saw, so they must not be judged
	// by it (see plan.Input.SnapshotAt).
	askedAt time.Time
	queued  []int64
	blocked int
	running int
	// busy maps the group's runners to the Gitea job each runs.
	busy map[string]int64
}

// serve runs one pass over one group and always tries to record the outcome
// on its status, so a failure is visible on the object.
func (s *Scaler) serve(ctx context.Context, rg *v1alpha1.RunnerGroup) (int, error) {
	log := s.Log.With("runnergroup", rg.Namespace+"/"+rg.Name)
	created, obs, err := s.scale(ctx, log, rg)
	s.recordStatus(ctx, log, rg, obs, created, err)
	if err != nil {
		log.Error("pass failed for RunnerGroup", "reason", reasonOf(err), "error", err)
		s.event(ctx, rg, "Warning", reasonOf(err), err.Error())
		return created, err
	}
	return created, nil
}

func (s *Scaler) scale(ctx context.Context, log *slog.Logger, rg *v1alpha1.RunnerGroup) (int, *observation, error) {
	if err := rg.Spec.Validate(); err != nil {
		return 0, nil, fail(ReasonInvalidSpec, "invalid spec: %v", err)
	}
	// Both tokens usually live in one Secret; read each Secret once.
	secrets := map[string]*corev1.Secret{}
	token, err := s.readSecretKey(ctx, secrets, rg.Namespace, "authToken", rg.Spec.AuthToken.SecretRef)
	if err != nil {
		return 0, nil, err
	}
	// The registration token is only referenced by the runner Jobs, never
	// read into the scaler's memory for use; checking it here turns a
	// typo into a condition instead of runner pods stuck in
	// CreateContainerConfigError.
	if _, err := s.readSecretKey(ctx, secrets, rg.Namespace, "registrationToken", rg.Spec.RegistrationToken.SecretRef); err != nil {
		return 0, nil, err
	}
	client, err := s.Gitea(rg.Spec.Gitea.URL, token)
	if err != nil {
		return 0, nil, fail(ReasonGiteaUnavailable, "cannot create Gitea client for %s: %v", rg.Spec.Gitea.URL, err)
	}
	runnerLabels := runnerlabels.NewSet(runnerlabels.Effective(rg.Spec.Labels, s.Config.Runner.DefaultLabels))
	owner := s.stateOwner(rg)
	store := state.Store{Client: s.Kube}

	var obs *observation
	for attempt := 1; ; attempt++ {
		loaded, err := store.Load(ctx, owner)
		if errors.Is(err, state.ErrNotOurs) {
			return 0, obs, fail(ReasonStateNotOwned, "%v", err)
		}
		if err != nil {
			return 0, obs, fail(ReasonKubernetesError, "%v", err)
		}
		if obs, err = s.observe(ctx, rg, client, runnerLabels); err != nil {
			return 0, obs, err
		}
		if loaded.Corrupt != nil {
			// Trusting nothing would spawn a second runner for every job
			// already served; the Jobs themselves say what was served.
			loaded.Claims = state.FromJobs(obs.jobs)
			log.Warn("state ConfigMap unreadable, rebuilt it from the runner Jobs", "configmap", state.ConfigMapName(rg.Name), "error", loaded.Corrupt, "claims", len(loaded.Claims))
			s.event(ctx, rg, "Warning", ReasonStateRebuilt, fmt.Sprintf("state ConfigMap %s was unreadable (%v); rebuilt it from %d runner Jobs", state.ConfigMapName(rg.Name), loaded.Corrupt, len(obs.jobs)))
		}

		p := plan.Make(plan.Input{
			Now:        s.Now(),
			SpawnTTL:   s.Config.SpawnTTL,
			MaxActive:  int(rg.Spec.MaxActiveRunners),
			Jobs:       runnerJobs(obs.jobs),
			Claims:     loaded.Claims,
			Queued:     obs.queued,
			Busy:       obs.busy,
			SnapshotAt: obs.askedAt,
			NewJobName: func() string { return s.NewJobName(rg.Name) },
		})
		log.Debug("planned", "queued", len(obs.queued), "blocked", obs.blocked, "running", obs.running,
			"active", p.Active, "slots", p.Slots, "claims", len(p.New), "waiting", p.Waiting, "dropped", p.Dropped)

		if s.Config.DryRun {
			s.printPlan(rg, p)
			return 0, obs, nil
		}
		if _, err := store.Save(ctx, owner, loaded, p.Claims); err != nil {
			if errors.Is(err, state.ErrConflict) && attempt < maxClaimAttempts {
				log.Debug("state changed under this pass, planning again", "attempt", attempt)
				continue
			}
			if errors.Is(err, state.ErrConflict) {
				return 0, obs, fail(ReasonStateConflict, "state ConfigMap %s kept changing under this pass (%d attempts); the next pass will try again", state.ConfigMapName(rg.Name), attempt)
			}
			return 0, obs, fail(ReasonKubernetesError, "%v", err)
		}
		created, err := s.createJobs(ctx, log, rg, owner, p.New)
		return created, obs, err
	}
}

// observe lists the group's runner Jobs and asks Gitea for its jobs.
func (s *Scaler) observe(ctx context.Context, rg *v1alpha1.RunnerGroup, client gitea.Client, runner runnerlabels.Set) (*observation, error) {
	list, err := s.Kube.BatchV1().Jobs(rg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: runnerjob.Selector(rg.Name)})
	if err != nil {
		return nil, fail(ReasonKubernetesError, "cannot list runner Jobs: %v", err)
	}
	target := targetOf(&rg.Spec)
	askedAt := s.Now()
	snap, err := client.Snapshot(ctx, target)
	if err != nil {
		return nil, fail(giteaReason(err), "cannot list Gitea jobs of %s at %s: %v", target, rg.Spec.Gitea.URL, err)
	}
	obs := &observation{jobs: ownJobs(rg, list.Items), askedAt: askedAt}
	for _, j := range snap.Queued {
		if runner.CanRun(j.Labels) {
			obs.queued = append(obs.queued, j.ID)
		}
	}
	for _, j := range snap.Blocked {
		if runner.CanRun(j.Labels) {
			obs.blocked++
		}
	}
	obs.busy = map[string]int64{}
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

func runnerJobs(jobs []batchv1.Job) []plan.RunnerJob {
	out := make([]plan.RunnerJob, 0, len(jobs))
	for i := range jobs {
		out = append(out, plan.RunnerJob{Name: jobs[i].Name, Active: runnerjob.IsActive(&jobs[i])})
	}
	return out
}

// createJobs creates the claimed runner Jobs. Claims whose Job could not be
// created are released, so the next pass retries them at once instead of
// after the spawn TTL.
func (s *Scaler) createJobs(ctx context.Context, log *slog.Logger, rg *v1alpha1.RunnerGroup, owner state.Owner, claims []plan.Claim) (int, error) {
	created := 0
	var failed []plan.Claim
	var errs []string
	for _, c := range claims {
		job := runnerjob.Build(rg, c.JobName, c.GiteaJobID, s.Config.Runner)
		_, err := s.Kube.BatchV1().Jobs(rg.Namespace).Create(ctx, job, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager})
		if err != nil {
			failed = append(failed, c)
			errs = append(errs, fmt.Sprintf("Job %s for Gitea job %d: %v", c.JobName, c.GiteaJobID, err))
			continue
		}
		created++
		log.Info("created runner Job", "job", c.JobName, "giteaJob", c.GiteaJobID, "retry", c.Retry)
		msg := fmt.Sprintf("Created runner Job %s for Gitea job %d", c.JobName, c.GiteaJobID)
		if c.Retry {
			msg += " (retry: the earlier runner took another job, ended, or did not start within the spawn TTL)"
		}
		s.event(ctx, rg, "Normal", ReasonRunnerCreated, msg)
	}
	if len(failed) == 0 {
		return created, nil
	}
	if err := s.release(ctx, owner, failed); err != nil {
		log.Warn("cannot release failed claims; they expire after the spawn TTL", "error", err)
	}
	return created, fail(ReasonJobCreateFailed, "cannot create %d runner Job(s): %s", len(failed), strings.Join(errs, "; "))
}

// release removes claims from the state, re-reading on conflict.
func (s *Scaler) release(ctx context.Context, owner state.Owner, claims []plan.Claim) error {
	store := state.Store{Client: s.Kube}
	for attempt := 1; ; attempt++ {
		loaded, err := store.Load(ctx, owner)
		if err != nil {
			return err
		}
		next := loaded.Claims.Clone()
		for _, c := range claims {
			if e, ok := next[c.GiteaJobID]; ok && e.JobName == c.JobName {
				delete(next, c.GiteaJobID)
			}
		}
		if _, err = store.Save(ctx, owner, loaded, next); !errors.Is(err, state.ErrConflict) || attempt == maxClaimAttempts {
			return err
		}
	}
}

func (s *Scaler) stateOwner(rg *v1alpha1.RunnerGroup) state.Owner {
	return state.Owner{
		Namespace:  rg.Namespace,
		Name:       rg.Name,
		UID:        string(rg.UID),
		APIVersion: v1alpha1.GroupVersion.String(),
		Kind:       v1alpha1.Kind,
		Labels:     runnerjob.GroupLabels(rg.Name),
	}
}

// readSecretKey returns one key of a Secret in the group's namespace,
// reading the Secret only if read does not hold it yet. Errors name the
// Secret and key, never the value.
func (s *Scaler) readSecretKey(ctx context.Context, read map[string]*corev1.Secret, namespace, field string, ref v1alpha1.SecretRef) (string, error) {
	sec, ok := read[ref.Name]
	if !ok {
		var err error
		sec, err = s.Kube.CoreV1().Secrets(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return "", fail(ReasonSecretNotFound, "spec.%s: Secret %s/%s not found", field, namespace, ref.Name)
		case err != nil:
			return "", fail(ReasonKubernetesError, "spec.%s: cannot read Secret %s/%s: %v", field, namespace, ref.Name, err)
		}
		read[ref.Name] = sec
	}
	v, ok := sec.Data[ref.Key]
	if !ok || len(strings.TrimSpace(string(v))) == 0 {
		return "", fail(ReasonSecretKeyMissing, "spec.%s: Secret %s/%s has no key %q or it is empty", field, namespace, ref.Name, ref.Key)
	}
	return strings.TrimSpace(string(v)), nil
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

func giteaReason(err error) string {
	switch {
	case errors.Is(err, gitea.ErrUnauthorized):
		return ReasonGiteaUnauthorized
	case errors.Is(err, gitea.ErrForbidden):
		return ReasonGiteaForbidden
	case errors.Is(err, gitea.ErrNotFound):
		return ReasonGiteaNotFound
	case errors.Is(err, gitea.ErrTimeout):
		return ReasonGiteaTimeout
	case errors.Is(err, gitea.ErrBadResponse):
		return ReasonGiteaBadResponse
	default:
		return ReasonGiteaUnavailable
	}
}

func reasonOf(err error) string {
	var ge *groupError
	if errors.As(err, &ge) {
		return ge.reason
	}
	return ReasonKubernetesError
}

// recordStatus writes what the pass saw and how it went. What was not
// observed (Gitea failed) keeps its last value, so a Gitea outage does not
// show as an empty queue.
func (s *Scaler) recordStatus(ctx context.Context, log *slog.Logger, rg *v1alpha1.RunnerGroup, obs *observation, created int, passErr error) {
	st := rg.Status
	st.Conditions = append([]metav1.Condition(nil), rg.Status.Conditions...)
	st.ObservedGeneration = rg.Generation
	if obs != nil {
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
		t := metav1.NewTime(obs.askedAt)
		st.LastCheckTime = &t
	}

	// SetStatusCondition keeps the old transition time when the status did
	// not change, and takes ours when it did.
	now := metav1.NewTime(s.Now())
	ready := metav1.Condition{LastTransitionTime: now, Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonReconciled, ObservedGeneration: rg.Generation,
		Message: fmt.Sprintf("%d queued, %d blocked, %d running; %d runner Job(s) created", st.QueuedJobs, st.BlockedJobs, st.RunningJobs, created)}
	if passErr != nil {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, reasonOf(passErr), passErr.Error()
	}
	meta.SetStatusCondition(&st.Conditions, ready)

	scaling := metav1.Condition{LastTransitionTime: now, Type: ConditionScalingActive, Status: metav1.ConditionTrue, Reason: ReasonScaling, ObservedGeneration: rg.Generation,
		Message: fmt.Sprintf("%d of %d runners active", st.ActiveRunners, rg.Spec.MaxActiveRunners)}
	switch {
	case rg.Spec.MaxActiveRunners == 0:
		scaling.Status, scaling.Reason, scaling.Message = metav1.ConditionFalse, ReasonPaused, "maxActiveRunners is 0: the group starts no runners"
	case st.ActiveRunners >= rg.Spec.MaxActiveRunners && st.QueuedJobs > 0:
		scaling.Status, scaling.Reason = metav1.ConditionFalse, ReasonAtCapacity
		scaling.Message += "; queued jobs wait for a free slot"
	}
	meta.SetStatusCondition(&st.Conditions, scaling)

	if s.Config.DryRun {
		return
	}
	rg.Status = st
	if err := s.Groups.PatchStatus(ctx, rg); err != nil {
		log.Error("cannot update RunnerGroup status", "error", err)
	}
}

func (s *Scaler) printPlan(rg *v1alpha1.RunnerGroup, p plan.Result) {
	fmt.Fprintf(s.Out, "runnergroup %s/%s: %d active, %d slot(s), %d waiting\n", rg.Namespace, rg.Name, p.Active, p.Slots, p.Waiting)
	for _, c := range p.New {
		fmt.Fprintf(s.Out, "  would create runner Job %s for Gitea job %d\n", c.JobName, c.GiteaJobID)
	}
	for _, id := range p.Dropped {
		fmt.Fprintf(s.Out, "  would forget Gitea job %d (no longer queued)\n", id)
	}
}
