// Package why answers the question users ask most: why has this Gitea job
// got a runner, or not? It asks Gitea about the job with the token of a
// selected RunnerGroup that can see it, then explains with the scaler's own
// rules (the assignment rule, the label match, the group's recorded
// conditions, the runner Job and its pod), so its answer is the one the
// passes act on. It writes nothing.
package why

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/assign"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/giteaurl"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reason"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerpod"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/selection"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tokenrule"
)

// Verdicts: the one-word answer, for scripts (-o json).
const (
	// VerdictRunning: a runner runs the job.
	VerdictRunning = "Running"
	// VerdictBlocked: the job waits for its needs: (or for approval).
	VerdictBlocked = "Blocked"
	// VerdictNotFound: Gitea lists the job as neither queued, blocked nor
	// running in the scopes asked: it finished, was cancelled, or is
	// outside every selected group.
	VerdictNotFound = "NotFound"
	// VerdictNoGroupInScope: no RunnerGroup on the job's Gitea contains its
	// repository.
	VerdictNoGroupInScope = "NoGroupInScope"
	// VerdictLabelsNotOffered: groups contain the repository but none
	// offers every runs-on label.
	VerdictLabelsNotOffered = "LabelsNotOffered"
	// VerdictGroupPaused: the assigned group's last pass recorded it
	// paused (ScalingActive reason Paused: maxActiveRunners 0 or
	// spec.suspend).
	VerdictGroupPaused = "GroupPaused"
	// VerdictGroupFailing: the assigned group's last pass failed (its
	// Ready condition says why).
	VerdictGroupFailing = "GroupFailing"
	// VerdictAtCapacity: the assigned group runs its maximum of runners,
	// as its last pass recorded (ScalingActive reason AtCapacity, or its
	// active runners at the cap of the spec it read).
	VerdictAtCapacity = "AtCapacity"
	// VerdictRunnerPending: the job's runner Job exists, its pod has not
	// started (the pod's reason says why).
	VerdictRunnerPending = "RunnerPending"
	// VerdictRunnerStarting: the runner's pod runs; its runner registers
	// and takes the job.
	VerdictRunnerStarting = "RunnerStarting"
	// VerdictIdleRunner: the assigned group had idle runners at its last
	// pass (its warm pool, or runners that took no job): Gitea hands the
	// job to one of them, no new runner is needed.
	VerdictIdleRunner = "IdleRunner"
	// VerdictWaitingForPass: the assigned group can serve it and has room;
	// its next pass starts the runner.
	VerdictWaitingForPass = "WaitingForPass"
	// VerdictNotAsked: every group whose token could have asked Gitea is
	// one a pass refuses before it sends that token anywhere (NotAsked
	// says why), so Gitea was not asked; the report says what can be seen
	// without it.
	VerdictNotAsked = "NotAsked"
)

// Job statuses as the report gives them.
const (
	StatusQueued   = "queued"
	StatusBlocked  = "blocked"
	StatusRunning  = "running"
	StatusNotFound = "not found"
	// StatusNotAsked: Gitea was not asked (VerdictNotAsked).
	StatusNotAsked = "not asked"
)

// Config is what why takes from the listener's settings (run's flags of
// the same names), so that its answer is the one the listener's passes
// give.
type Config struct {
	// Namespaces, Selector and ExcludeSelectors pick the groups whose
	// tokens may ask Gitea (package selection).
	Namespaces       []string
	Selector         string
	ExcludeSelectors []string
	// DefaultLabels are the scaler's default runner labels; empty means
	// runnerjob's.
	DefaultLabels []string
	// AssignmentHold is the listeners' --assignment-hold; 0 means
	// assign.DefaultHold.
	AssignmentHold time.Duration
	// AllowedGiteaURLs and Tenancy are the settings of the rule a pass
	// applies before it sends a group's token (tokenrule.Refusal).
	AllowedGiteaURLs *giteaurl.Policy
	Tenancy          tenancy.Names
}

// Deps are the clients why reads with: the user's own, so it can see no
// more than the user may.
type Deps struct {
	Kube   kubernetes.Interface
	Groups selection.Lister
	Gitea  gitea.Factory
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Report is the answer.
type Report struct {
	Job     JobInfo `json:"job"`
	Verdict string  `json:"verdict"`
	// Assigned is the group the assignment rule gives the job to.
	Assigned string `json:"assigned,omitempty"`
	// CouldServe are the groups that contain the repository and offer
	// every label, in the rule's order.
	CouldServe []string `json:"couldServe,omitempty"`
	// Groups are the verdicts of the groups on the job's Gitea.
	Groups []GroupVerdict `json:"groups,omitempty"`
	// Runner is the job's runner Job, when there is one.
	Runner *Runner `json:"runner,omitempty"`
	// Explanation says it in sentences.
	Explanation []string `json:"explanation"`
	// NotAsked are the groups whose API token why did not send to Gitea
	// because a pass would not (tokenrule.Refusal), with the pass's
	// reason and message.
	NotAsked []NotAsked `json:"notAsked,omitempty"`
	// Notes are caveats: groups whose token could not be used, a partial
	// list of groups.
	Notes []string `json:"notes,omitempty"`
}

// NotAsked is a group whose token why did not use, and why.
type NotAsked struct {
	Group   string `json:"group"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// JobInfo is what Gitea said of the job.
type JobInfo struct {
	ID     int64    `json:"id"`
	Gitea  string   `json:"gitea,omitempty"`
	Repo   string   `json:"repo,omitempty"`
	Status string   `json:"status"`
	Labels []string `json:"labels,omitempty"`
	// RunnerName is the runner that runs it.
	RunnerName string `json:"runnerName,omitempty"`
}

// GroupVerdict is how one group stands towards the job.
type GroupVerdict struct {
	Group         string   `json:"group"`
	InScope       bool     `json:"inScope"`
	MissingLabels []string `json:"missingLabels,omitempty"`
	Labels        []string `json:"labels"`
	Eligible      bool     `json:"eligible"`
	Assigned      bool     `json:"assigned,omitempty"`
}

// Runner is the runner Job started for the job, and its pod.
type Runner struct {
	Group   string `json:"group"`
	Job     string `json:"job"`
	Pod     string `json:"pod,omitempty"`
	Started bool   `json:"started"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Explain answers for ref. cfg selects the groups whose tokens may be used
// to ask Gitea (the namespaces and selectors of the `run` flags) and gives
// the scaler's default runner labels. The assignment is computed over
// every RunnerGroup the user can list, as the passes compute it.
func Explain(ctx context.Context, d Deps, cfg Config, ref Ref) (*Report, error) {
	if d.Now == nil {
		d.Now = time.Now
	}
	listener, err := selection.New(cfg.Namespaces, cfg.Selector, cfg.ExcludeSelectors)
	if err != nil {
		return nil, err
	}
	sel, err := selection.List(ctx, d.Groups, listener, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	selected := sel.Served
	rep := &Report{Job: JobInfo{ID: ref.JobID, Gitea: ref.Base, Repo: ref.Repository()}}
	for _, ns := range sel.FailedNamespaces {
		rep.note("the RunnerGroups of namespace %s could not be listed", ns)
	}
	all, _, err := selection.ListShared(ctx, d.Groups, metav1.NamespaceAll, "")
	if err != nil {
		// The rule's answer then holds among the selected groups only.
		all = selected
		rep.note("cannot list the RunnerGroups of every namespace (%v): the answer weighs only the selected groups", err)
	}
	defaults := cfg.DefaultLabels
	if len(defaults) == 0 {
		defaults = runnerjob.DefaultOptions().DefaultLabels
	}

	found, err := findJob(ctx, d, cfg, selected, ref, rep)
	if err != nil {
		return nil, err
	}
	if found == nil {
		return rep, nil
	}
	hold := cfg.AssignmentHold
	if hold == 0 {
		hold = assign.DefaultHold
	}
	rule := assign.FromGroups(all, assign.Options{DefaultLabels: defaults, Hold: hold, Now: d.Now}, nil)
	byKey := map[string]*v1alpha1.RunnerGroup{}
	for _, rg := range all {
		byKey[rg.Key()] = rg
	}
	rep.explain(ctx, d, rule, byKey, found)
	return rep, nil
}

// foundJob is the job as a group's listing showed it.
type foundJob struct {
	job  gitea.Job
	base string
	// running maps the runners of the listing's running jobs to their job.
	running map[string]int64
}

// findJob asks Gitea about the job with the token of each selected group
// that could see it, until one listing has it. For a URL these are the
// groups on that Gitea whose scope contains the repository, asked for the
// repository alone (the smallest listing); for a bare ID every selected
// group, asked for its own scope. A job absent from the queued, blocked and
// running listings is reported as not found: the scaler never sees it.
//
// A group's token is read and sent only where a pass would send it: a
// group tokenrule.Refusal refuses (its Gitea URL not allowed, its
// namespace not enabled or not granted that URL and target) is not asked,
// and the report says why (NotAsked). When no group may ask, the report
// says what is seen without Gitea.
func findJob(ctx context.Context, d Deps, cfg Config, selected []*v1alpha1.RunnerGroup, ref Ref, rep *Report) (*foundJob, error) {
	var inScope map[string]bool
	if ref.Base != "" {
		sameInstance, anyInstance := map[string]bool{}, map[string]bool{}
		rule := assign.FromGroups(selected, assign.Options{}, nil)
		for _, v := range rule.Explain(ref.Base, assign.Job{Repo: ref.Repository()}) {
			sameInstance[v.Key] = v.SameInstance && v.InScope
			anyInstance[v.Key] = v.InScope
		}
		inScope = sameInstance
		if !anyTrue(sameInstance) && anyTrue(anyInstance) {
			// Groups often reach Gitea by an in-cluster URL while people
			// copy the public one: ask the groups whose scope contains the
			// repository, each on its own URL.
			inScope = anyInstance
			rep.note("no selected group uses %s; asked the groups whose scope contains %s, each at its own Gitea URL", ref.Base, ref.Repository())
		}
	}
	asked := map[string]bool{}
	var tried []string
	var failures []error
	var refused []*v1alpha1.RunnerGroup
	facts := map[string]tokenrule.NamespaceFacts{}
	for _, rg := range selected {
		key := rg.Key()
		if rg.Spec.Validate() != nil || (inScope != nil && !inScope[key]) {
			continue
		}
		// Before the token is read, and before the group counts as asked,
		// so a refused group never stands in for one that may ask.
		f, ok := facts[rg.Namespace]
		if !ok {
			f = namespaceFacts(ctx, d, cfg, rg.Namespace)
			facts[rg.Namespace] = f
		}
		if err := tokenrule.Refusal(cfg.AllowedGiteaURLs, cfg.Tenancy, rg, f); err != nil {
			rep.notAsked(key, err)
			refused = append(refused, rg)
			continue
		}
		target := scope.Of(&rg.Spec)
		base := rg.Spec.Gitea.URL
		if ref.Base != "" {
			target = scope.New(base, gitea.ScopeRepo, ref.Owner, ref.Repo)
		}
		ask := target.Stored() + " " + rg.Namespace + "/" + rg.Spec.AuthToken.SecretRef.Name + "/" + rg.Spec.AuthToken.SecretRef.Key
		if asked[ask] {
			continue
		}
		asked[ask] = true
		token, err := tokenrule.APIToken(ctx, d.Kube, rg)
		if err != nil {
			failures = append(failures, fmt.Errorf("group %s: %w", key, err))
			continue
		}
		client, err := d.Gitea(base, token)
		if err != nil {
			failures = append(failures, fmt.Errorf("group %s: %w", key, err))
			continue
		}
		snap, err := client.Snapshot(ctx, target)
		if err != nil {
			failures = append(failures, fmt.Errorf("group %s: cannot list the jobs of %s: %w", key, target, err))
			continue
		}
		tried = append(tried, fmt.Sprintf("%s (with group %s's token)", target, key))
		for _, l := range []struct {
			jobs   []gitea.Job
			status string
		}{{snap.Queued, StatusQueued}, {snap.Blocked, StatusBlocked}, {snap.Running, StatusRunning}} {
			for _, j := range l.jobs {
				if j.ID != ref.JobID {
					continue
				}
				if j.Repo == "" && target.Scope() == gitea.ScopeRepo {
					j.Repo = target.Owner() + "/" + target.Repo()
				}
				rep.Job = JobInfo{ID: j.ID, Gitea: base, Repo: j.Repo, Status: l.status, Labels: j.Labels, RunnerName: j.RunnerName}
				for _, f := range failures {
					rep.note("%v", f)
				}
				running := map[string]int64{}
				for _, r := range snap.Running {
					running[r.RunnerName] = r.ID
				}
				return &foundJob{job: j, base: base, running: running}, nil
			}
		}
	}
	for _, f := range failures {
		rep.note("%v", f)
	}
	switch {
	case len(tried) == 0 && len(refused) > 0:
		rep.withoutGitea(ctx, d, refused, ref)
		return nil, nil
	case len(asked) == 0 && ref.Base != "":
		rep.Job.Status = StatusNotFound
		rep.Verdict = VerdictNoGroupInScope
		rep.say("No selected RunnerGroup on %s contains repository %s, so no runner is started for its jobs, and there is no group token to ask Gitea about job %d with.", ref.Base, ref.Repository(), ref.JobID)
		return nil, nil
	case len(asked) == 0:
		return nil, errors.New("no selected RunnerGroup has a valid spec to ask Gitea with; select groups with -n or --selector")
	case len(tried) == 0:
		return nil, fmt.Errorf("could not ask Gitea about job %d: %w", ref.JobID, errors.Join(failures...))
	}
	rep.Job.Status = StatusNotFound
	rep.Verdict = VerdictNotFound
	rep.say("Gitea lists job %d as neither queued, blocked nor running in %s: it has finished or was cancelled, or it is outside every selected group's scope.", ref.JobID, strings.Join(tried, ", "))
	return nil, nil
}

// namespaceFacts are what why can tell of a namespace, with its user's
// rights, for tokenrule.Refusal: whether the scaler holds its rights
// there (asked for the scaler's ServiceAccount, cfg.Tenancy), and the
// Namespace object with its grant. What cannot be told refuses the group.
func namespaceFacts(ctx context.Context, d Deps, cfg Config, name string) tokenrule.NamespaceFacts {
	var f tokenrule.NamespaceFacts
	if cfg.Tenancy.ServiceAccount == "" {
		f.ReviewErr = fmt.Errorf("why cannot tell whether namespace %s is enabled for the scaler: give the scaler's ServiceAccount with --service-account (SCALER_SERVICE_ACCOUNT, namespace:name, set in the listener's environment by the chart)", name)
		return f
	}
	who, err := tenancy.ServiceAccountIdentity(cfg.Tenancy.ServiceAccount)
	if err != nil {
		f.ReviewErr = fmt.Errorf("why cannot tell whether namespace %s is enabled for the scaler: %w", name, err)
		return f
	}
	if f.Missing, err = tenancy.MissingFor(ctx, d.Kube, name, who); err != nil {
		f.ReviewErr = fmt.Errorf("why cannot tell whether namespace %s is enabled for the scaler: %w", name, err)
		return f
	}
	if len(f.Missing) > 0 {
		return f
	}
	f.Namespace, f.NamespaceErr = d.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	return f
}

// notAsked records a group whose token why does not send, and why.
func (rep *Report) notAsked(key string, err error) {
	why, msg := reason.Of(err), err.Error()
	if why == v1alpha1.ReasonGiteaURLNotAllowed {
		msg += "; why takes that list from --allowed-gitea-urls (SCALER_ALLOWED_GITEA_URLS), which should be the listener's"
	}
	rep.NotAsked = append(rep.NotAsked, NotAsked{Group: key, Reason: why, Message: msg})
	rep.note("did not ask Gitea with the API token of %s: a pass refuses that group too (%s): %s", key, why, msg)
}

// withoutGitea answers when every group that could have asked Gitea is
// refused: the job's status is not known, and those groups start no
// runner while a pass refuses them; a runner Job started for the job
// before is still shown.
func (rep *Report) withoutGitea(ctx context.Context, d Deps, refused []*v1alpha1.RunnerGroup, ref Ref) {
	rep.Job.Status = StatusNotAsked
	keys := make([]string, 0, len(refused))
	for _, rg := range refused {
		keys = append(keys, rg.Key())
	}
	rep.say("why did not ask Gitea about job %d: every selected group whose API token could have asked (%s) is one a pass refuses before it sends that token anywhere, so its token was not read; the notes say why for each. While a pass refuses them, these groups start no runner.",
		ref.JobID, strings.Join(keys, ", "))
	for _, rg := range refused {
		jobs, err := d.Kube.BatchV1().Jobs(rg.Namespace).List(ctx, metav1.ListOptions{
			LabelSelector: runnerjob.Selector(rg.Name) + "," + v1alpha1.LabelGiteaJobID + "=" + strconv.FormatInt(ref.JobID, 10),
		})
		if err != nil {
			rep.note("cannot list the runner Jobs of %s: %v", rg.Key(), err)
			continue
		}
		if j := newestActive(jobs.Items); j != nil {
			rep.runnerJob(ctx, d, rg.Key(), j)
			break
		}
	}
	rep.Verdict = VerdictNotAsked
}

// explain fills the report for a job Gitea listed.
func (rep *Report) explain(ctx context.Context, d Deps, rule *assign.Rule, groups map[string]*v1alpha1.RunnerGroup, f *foundJob) {
	j := f.job
	rep.say("Gitea job %d in %s (runs-on: %s) is %s.", j.ID, orUnknown(j.Repo), strings.Join(j.Labels, ", "), rep.Job.Status)
	var owner *assign.Verdict
	var inScope []assign.Verdict
	for _, v := range rule.Explain(f.base, assign.Job{Repo: j.Repo, Labels: j.Labels, Created: j.Created}) {
		if !v.SameInstance {
			continue
		}
		rep.Groups = append(rep.Groups, GroupVerdict{Group: v.Key, InScope: v.InScope, MissingLabels: v.Missing,
			Labels: v.Labels, Eligible: v.Eligible, Assigned: v.Owner})
		if !v.InScope {
			continue
		}
		inScope = append(inScope, v)
		if v.CanRun {
			rep.CouldServe = append(rep.CouldServe, v.Key)
		}
		if v.Owner {
			owner = &v
		}
	}

	if rep.Job.Status == StatusRunning {
		rep.Verdict = VerdictRunning
		rep.running(j.RunnerName, groups)
		return
	}
	if owner == nil {
		rep.noOwner(j, inScope)
		return
	}
	rep.Assigned = owner.Key
	if len(rep.CouldServe) > 1 {
		rep.say("Groups that can run it: %s; the assignment rule gives it to %s (most specific scope, then fewest labels, then name; a group that cannot serve, or that no listener has served lately, comes last; a job queued longer than the assignment hold goes in turn to the best group of each namespace that can run it).", strings.Join(rep.CouldServe, ", "), owner.Key)
	} else {
		rep.say("Group %s can run it and is assigned it.", owner.Key)
	}
	if rep.Job.Status == StatusBlocked {
		rep.Verdict = VerdictBlocked
		rep.say("It waits for the jobs it needs (needs:) or for approval: Gitea reports it as waiting. No runner is started for a blocked job; once it is queued, %s's next pass starts one.", owner.Key)
		return
	}
	rep.queued(ctx, d, groups[owner.Key], j.ID, f.running)
}

// running names the runner and, when it is one of a group's, its runner Job.
func (rep *Report) running(runnerName string, groups map[string]*v1alpha1.RunnerGroup) {
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if job, ok := runnerjob.JobOfRunner(groups[k], runnerName); ok {
			rep.Runner = &Runner{Group: k, Job: job, Started: true}
			rep.say("It already runs on runner %s, started by runner Job %s/%s of group %s.", runnerName, groups[k].Namespace, job, k)
			return
		}
	}
	rep.say("It already runs on runner %s, which no RunnerGroup started (another runner registered with Gitea took it).", orUnknown(runnerName))
}

// noOwner explains a job no group can run.
func (rep *Report) noOwner(j gitea.Job, inScope []assign.Verdict) {
	if rep.Job.Status == StatusBlocked {
		rep.say("It waits for the jobs it needs (needs:) or for approval; but even once it is queued, no group will run it:")
	}
	if len(inScope) == 0 {
		rep.Verdict = VerdictNoGroupInScope
		rep.say("No RunnerGroup on %s contains repository %s.", rep.Job.Gitea, orUnknown(j.Repo))
		return
	}
	rep.Verdict = VerdictLabelsNotOffered
	if len(j.Labels) == 0 {
		rep.say("It has no runs-on labels, and Gitea gives such a job to no runner.")
		return
	}
	// The labels no group offers, and the group that lacks the fewest.
	lacking := map[string]int{}
	nearest := inScope[0]
	for _, v := range inScope {
		for _, l := range v.Missing {
			lacking[l]++
		}
		if len(v.Missing) < len(nearest.Missing) {
			nearest = v
		}
	}
	var none []string
	for _, l := range j.Labels {
		if lacking[l] == len(inScope) {
			none = append(none, l)
		}
	}
	if len(none) > 0 {
		rep.say("No RunnerGroup whose scope contains %s offers the label(s) %s.", j.Repo, strings.Join(none, ", "))
	} else {
		rep.say("Every label is offered by some group, but no one group whose scope contains %s offers them all.", j.Repo)
	}
	rep.say("The nearest group, %s, lacks %s; it offers: %s.", nearest.Key, strings.Join(nearest.Missing, ", "), strings.Join(nearest.Labels, ", "))
}

// queued explains a queued job the rule gives to rg. running maps the
// runners of running jobs to their job: Gitea gives a queued job to any
// idle runner that fits, so the runner Job started for this job may run
// another, which leaves this one waiting for a slot like any other.
func (rep *Report) queued(ctx context.Context, d Deps, rg *v1alpha1.RunnerGroup, id int64, running map[string]int64) {
	key := rg.Key()
	jobs, err := d.Kube.BatchV1().Jobs(rg.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: runnerjob.Selector(rg.Name) + "," + v1alpha1.LabelGiteaJobID + "=" + strconv.FormatInt(id, 10),
	})
	if err != nil {
		rep.note("cannot list the runner Jobs of %s: %v", key, err)
	} else if j := newestActive(jobs.Items); j != nil {
		other, busy := running[runnerjob.RunnerNameOf(j)]
		if !busy {
			rep.runnerJob(ctx, d, key, j)
			return
		}
		rep.say("Runner Job %s/%s was started for it, but its runner took job %d instead (Gitea gives a queued job to any idle runner whose labels fit), so this one waits for another runner.", j.Namespace, j.Name, other)
	}

	// The verdict is the one the group's last pass recorded (its Ready and
	// ScalingActive conditions and counts), not one derived again from
	// the spec: a spec changed since is said to be news to the passes.
	ready := meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionReady)
	scaling := meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionScalingActive)
	changed := rg.Status.ObservedGeneration != rg.Generation
	pass := lastPass(rg, d.Now())
	switch {
	case rg.Status.IdleRunners > 0:
		rep.Verdict = VerdictIdleRunner
		rep.say("At its last pass %s had %d idle runner(s) (%d kept by its warm pool): Gitea gives a queued job to an idle runner whose labels fit when that runner next asks, so this job needs no new runner.", key, rg.Status.IdleRunners, rg.Status.WarmRunners)
	case isFalse(scaling, v1alpha1.ReasonPaused) && changed:
		rep.Verdict = VerdictGroupPaused
		rep.say("%s was paused when %s recorded it (%s); its spec has changed since (generation %d), so its next pass serves it by the new spec: %s.", key, pass, scaling.Message, rg.Generation, pausedBy(&rg.Spec))
	case isFalse(scaling, v1alpha1.ReasonPaused):
		rep.Verdict = VerdictGroupPaused
		rep.say("%s is paused (%s) and is the only group that can run it, so it waits until the group is resumed.", key, pausedBy(&rg.Spec))
		rep.say("%s recorded it.", capitalized(pass))
	case ready != nil && ready.Status == metav1.ConditionFalse:
		rep.Verdict = VerdictGroupFailing
		rep.say("%s's last pass failed: %s: %s. Fix that and the next pass starts a runner (see `status` and the troubleshooting table, charts/gitea-runner-operator/docs/troubleshooting.md).", key, ready.Reason, ready.Message)
	case isFalse(scaling, v1alpha1.ReasonAtCapacity), !changed && rg.Status.LastCheckTime != nil && rg.Status.ActiveRunners >= rg.Spec.MaxActiveRunners:
		// Without the condition the pass saw no queued job, but its count
		// of active runners already filled the cap of the spec it read.
		rep.Verdict = VerdictAtCapacity
		rep.say("%s is at capacity: %d of %d runners active. The job gets a runner when one of them finishes, or when maxActiveRunners is raised.", key, rg.Status.ActiveRunners, rg.Spec.MaxActiveRunners)
		rep.say("%s recorded it.", capitalized(pass))
	default:
		rep.Verdict = VerdictWaitingForPass
		switch {
		case rg.Status.LastCheckTime == nil:
			rep.say("%s has room but no pass has served it yet: is a listener serving namespace %s (helm values watchNamespaces and listeners)?", key, rg.Namespace)
		case changed:
			rep.say("%s has no runner Job for it yet, and its spec has changed since %s (generation %d): its next pass reads the new spec and decides.", key, pass, rg.Generation)
		default:
			rep.say("%s has room (%d of %d runners active) and no runner Job for it yet; its next pass starts one (last pass %s ago).", key, rg.Status.ActiveRunners, rg.Spec.MaxActiveRunners, d.Now().Sub(rg.Status.LastCheckTime.Time).Round(time.Second))
		}
	}
}

// isFalse says whether c is False for reason.
func isFalse(c *metav1.Condition, reason string) bool {
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason
}

// lastPass names the pass that recorded the group's status: how long ago,
// and the generation of the spec it read.
func lastPass(rg *v1alpha1.RunnerGroup, now time.Time) string {
	if rg.Status.LastCheckTime == nil {
		return fmt.Sprintf("its last pass (at generation %d)", rg.Status.ObservedGeneration)
	}
	return fmt.Sprintf("its last pass (%s ago, at generation %d)", now.Sub(rg.Status.LastCheckTime.Time).Round(time.Second), rg.Status.ObservedGeneration)
}

// capitalized is s with its first letter upper-cased, to start a sentence.
func capitalized(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// pausedBy says which field pauses a spec, or that none does.
func pausedBy(spec *v1alpha1.RunnerGroupSpec) string {
	switch {
	case spec.Suspend:
		return "spec.suspend: true"
	case spec.MaxActiveRunners == 0:
		return "maxActiveRunners: 0"
	}
	return fmt.Sprintf("not paused, maxActiveRunners: %d", spec.MaxActiveRunners)
}

// runnerJob explains a queued job that has its runner Job.
func (rep *Report) runnerJob(ctx context.Context, d Deps, key string, j *batchv1.Job) {
	r := &Runner{Group: key, Job: j.Name}
	rep.Runner = r
	pods, err := d.Kube.CoreV1().Pods(j.Namespace).List(ctx, metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(j.UID)})
	switch {
	case err != nil:
		r.Reason, r.Message = "Unknown", fmt.Sprintf("cannot list its pods: %v", err)
	case len(pods.Items) == 0:
		r.Reason, r.Message = runnerpod.FailedCreate(ctx, d.Kube, j)
	default:
		p := newestPod(pods.Items)
		r.Pod = p.Name
		r.Started, r.Reason, r.Message = runnerpod.Started(p)
	}
	if r.Started {
		rep.Verdict = VerdictRunnerStarting
		rep.say("Runner Job %s/%s was started for it and its pod %s runs: its runner registers with Gitea and takes a queued job its labels fit.", j.Namespace, j.Name, r.Pod)
		return
	}
	rep.Verdict = VerdictRunnerPending
	rep.say("Runner Job %s/%s was started for it, but its pod has not started: %s: %s.", j.Namespace, j.Name, r.Reason, r.Message)
}

func newestActive(jobs []batchv1.Job) *batchv1.Job {
	var out *batchv1.Job
	for i := range jobs {
		j := &jobs[i]
		if runnerjob.IsActive(j) && (out == nil || out.CreationTimestamp.Before(&j.CreationTimestamp)) {
			out = j
		}
	}
	return out
}

func newestPod(pods []corev1.Pod) *corev1.Pod {
	out := &pods[0]
	for i := range pods {
		if out.CreationTimestamp.Before(&pods[i].CreationTimestamp) {
			out = &pods[i]
		}
	}
	return out
}

func (rep *Report) say(format string, args ...any) {
	rep.Explanation = append(rep.Explanation, fmt.Sprintf(format, args...))
}

func (rep *Report) note(format string, args ...any) {
	rep.Notes = append(rep.Notes, fmt.Sprintf(format, args...))
}

func anyTrue(m map[string]bool) bool {
	for _, v := range m {
		if v {
			return true
		}
	}
	return false
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown repository)"
	}
	return s
}
