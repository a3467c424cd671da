package scaler

import (
	"context"
	"errors"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/assign"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reason"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerconfig"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerlabels"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tokenrule"
)

// groupRun is one RunnerGroup within a pass: what its steps share.
type groupRun struct {
	rg    *v1alpha1.RunnerGroup
	log   *slog.Logger
	store state.Store
	owner state.Owner
	// gitea and runnerLabels are set by validate.
	gitea gitea.Client
	// runnerLabels are the label names the group's runners offer Gitea.
	runnerLabels runnerlabels.Set
	// flavour is the group's runner pods' (flavour.go), set by validate.
	flavour v1alpha1.RunnerFlavour
	// rule says which group serves a job that several groups could run.
	rule *assign.Rule
	// key names the group's Gitea listing (set by validate); shared is
	// what the pass gathered for every group (nil: the group reads its
	// own), and sharedUsed says the first observation took it, so that
	// observing again after a lost race reads afresh.
	key        listingKey
	shared     *gathered
	sharedUsed bool
	// preloaded is the state gather read for the first attempt of claim
	// (hasPreload says it did), with the error of reading it.
	preloaded  state.Loaded
	preloadErr error
	hasPreload bool
	// state is the group's state as claim last read or wrote it, and
	// seenAtWork the runner Jobs this pass saw at work (atwork.go).
	state      state.Loaded
	seenAtWork []types.UID
	// fromCache says the first attempt's runner Jobs (and, mostly, its
	// state) come from a loop's watch caches, which may lag the API
	// server: claim then writes nothing that lag could make wrong.
	fromCache bool
	// queuedAt is the last observation's queuedAt, and queuedToJob the
	// time from each served job's creation in Gitea to its runner Job.
	queuedAt    map[int64]time.Time
	queuedToJob []time.Duration
	// stats is the group's line in the pass's Summary, set by record.
	stats passreport.GroupStats
	// invalid is why the validate step failed, if it did.
	invalid error
	// regCheck is the RegistrationToken condition the validate step
	// found (nil: it did not get that far, and the last one stays).
	regCheck *metav1.Condition
	// place is where the group's new runners register, and placeKnown
	// whether the scaler knows it (place.go); set by validate.
	place      scope.Place
	placeKnown bool
	// cacheCheck is the Cache condition (nil: no shared cache, or the
	// validate step did not get that far).
	cacheCheck *metav1.Condition
	// regs are the runners registered in each place the group's runners
	// register in, listed once per group and pass (registrationsAt), and
	// running the jobs that run in a place other than the group's own
	// scope (runningAt).
	regs    map[scope.Place]listedRunners
	running map[scope.Place]runningJobs
	// namespaces are the pass's answers on the groups' namespaces, and
	// checks its registration token checks (onePass).
	namespaces *namespaces
	checks     *regChecks
	// regToken is the group's registration token, read by validate, with
	// which the scaler registers its runners (register.go). A secret: it
	// is never logged, and only ever sent to the group's Gitea.
	regToken string
}

// passGroup takes one group through every step of a pass on its own.
func (s *Scaler) passGroup(ctx context.Context, rg *v1alpha1.RunnerGroup, rule *assign.Rule) (int, error) {
	g := s.prepare(ctx, rg, &onePass{namespaces: newNamespaces(), checks: s.mem.checks()})
	g.rule = rule
	return s.finish(ctx, g)
}

// prepare starts a group's part of the pass: the validate step. Its outcome
// is kept in the groupRun for finish, and tells the assignment rule whether
// the group can serve.
//
// p is what the groups of the pass share (onePass).
func (s *Scaler) prepare(ctx context.Context, rg *v1alpha1.RunnerGroup, p *onePass) *groupRun {
	g := &groupRun{
		rg:         rg,
		log:        s.log.With("runnergroup", rg.Key()),
		store:      state.Store{Client: s.kube},
		owner:      stateOwner(rg),
		namespaces: p.namespaces,
		checks:     p.checks,
	}
	g.invalid = s.validate(ctx, g, p.secrets)
	if g.invalid != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		g.invalid = outOfTime(s.cfg.GroupTimeout, g.invalid)
	}
	return g
}

// finish takes a prepared group through claim (which observes, and observes
// again whenever it loses a race for the state), create and lifecycle
// (runner Jobs that never started, idle runners, orphans), and always
// records the outcome on the group, so a failure is visible on the object.
// It returns how many runner Jobs it created.
func (s *Scaler) finish(ctx context.Context, g *groupRun) (int, error) {
	created, obs, err := 0, (*observation)(nil), g.invalid
	if err == nil {
		var claims []plan.Claim
		if claims, obs, err = s.claim(ctx, g); err == nil {
			g.queuedAt = obs.queuedAt
			created, err = s.create(ctx, g, claims, obs)
			if lerr := s.lifecycle(ctx, g, obs); err == nil {
				err = lerr
			}
			s.keepAtWork(ctx, g, obs)
		}
	}
	// record writes on a short context of its own, so a cancelled pass or
	// a group out of time still shows why.
	s.record(ctx, g, obs, created, err)
	return created, err
}

// validate checks, in this order, the spec, that its Gitea URL is allowed,
// that the namespace is enabled, that its Pod Security admits the runner
// pod, and both token Secrets; then it makes the group's Gitea client with
// the API token. The checks that need no request come first, and nothing
// is read in a namespace that is not enabled. A group without
// spec.registrationToken gets its registration token minted (regtoken.go).
func (s *Scaler) validate(ctx context.Context, g *groupRun, shared *passSecrets) error {
	spec := &g.rg.Spec
	if err := s.checkSpec(g.rg); err != nil {
		return err
	}
	if err := s.tenantChecks(ctx, g); err != nil {
		return err
	}
	g.cacheCheck = s.checkCache(ctx, g)
	// Both tokens usually live in one Secret; read each Secret once.
	secrets := map[string]*corev1.Secret{}
	regRef := g.rg.RegistrationTokenRef()
	if shared != nil {
		shared.preload(ctx, s, g.rg.Namespace, secrets, spec.AuthToken.SecretRef.Name, regRef.Name)
	}
	// A group that has the scaler mint needs the API key declared for
	// minting, checked before the token is read at all.
	token, err := tokenrule.SecretKey(ctx, s.kube, secrets, g.rg.Namespace, "authToken", spec.AuthToken.SecretRef, tokenrule.APITokenUse(g.rg))
	if err != nil {
		return err
	}
	if g.gitea, err = s.gitea(spec.Gitea.URL, token); err != nil {
		return reason.Errorf(v1alpha1.ReasonGiteaUnavailable, "cannot create Gitea client for %s: %w", spec.Gitea.URL, err)
	}
	if g.rg.MintsRegistrationToken() {
		if err := s.ensureRegistrationToken(ctx, g, secrets); err != nil {
			return err
		}
		g.regCheck = mintedRegistrationToken(g.rg)
		g.setPlace(scope.Of(spec), true)
	} else {
		// The registration token reaches Gitea only from the runner pods
		// (secretKeyRef). The scaler reads it to turn a typo into a
		// condition instead of runner pods stuck in
		// CreateContainerConfigError, and to compare it with the scope's
		// own (regcheck.go).
		reg, err := tokenrule.SecretKey(ctx, s.kube, secrets, g.rg.Namespace, "registrationToken", regRef, tenancy.UseRegistration)
		if err != nil {
			return err
		}
		if err := s.checkRegistrationToken(ctx, g, token, reg); err != nil {
			return err
		}
		g.regToken = reg
	}
	g.key = newListingKey(spec, token)
	g.runnerLabels = runnerlabels.NewSet(runnerlabels.ForGroup(spec, s.cfg.Runner.DefaultLabels))
	return nil
}

// checkSpec checks what depends on the group's spec alone: the spec, its
// template (by building the runner Job), its runner config and its Gitea
// URL. A loop keeps the verdict until the spec changes (verdicts).
func (s *Scaler) checkSpec(rg *v1alpha1.RunnerGroup) error {
	check := func() error {
		spec := &rg.Spec
		if err := spec.Validate(); err != nil {
			return reason.Errorf(v1alpha1.ReasonInvalidSpec, "invalid spec: %w", err)
		}
		if err := runnerjob.CheckTemplate(rg, s.cfg.Runner); err != nil {
			return reason.Errorf(v1alpha1.ReasonInvalidTemplate, "spec.template: %w", err)
		}
		if err := runnerconfig.CheckGroup(spec.RunnerConfig, s.cfg.Runner.Config.Pinned); err != nil {
			return reason.Errorf(v1alpha1.ReasonInvalidRunnerConfig, "%w", err)
		}
		return tokenrule.CheckGiteaURL(s.cfg.AllowedGiteaURLs, rg)
	}
	if s.mem == nil {
		return check()
	}
	return s.mem.verdicts.spec(rg, check)
}

// tenantChecks refuses a group whose namespace is not enabled, whose
// Gitea URL or scope is outside its namespace's grant, or whose
// namespace's Pod Security would not admit its runner pod; it sets the
// group's flavour (flavour.go).
func (s *Scaler) tenantChecks(ctx context.Context, g *groupRun) error {
	f := g.namespaces.facts(ctx, s, g.rg.Namespace)
	if err := tokenrule.CheckNamespace(s.cfg.Tenancy, g.rg, tokenrule.NamespaceFacts{Missing: f.missing, ReviewErr: f.err, Namespace: f.ns, NamespaceErr: f.nsErr}); err != nil {
		return err
	}
	var err error
	if s.mem == nil {
		g.flavour, err = s.podChecks(g, f.ns)
	} else {
		g.flavour, err = s.mem.verdicts.pod(g.rg, f.ns, func() (v1alpha1.RunnerFlavour, error) { return s.podChecks(g, f.ns) })
	}
	if err != nil {
		return err
	}
	if g.flavour == v1alpha1.FlavourUserNamespaced && s.nodesRunUserNamespaces(ctx) == nodesLack {
		return reason.Errorf(v1alpha1.ReasonNodesLackUserNamespaces, "the group's runner pods are user-namespaced (flavour UserNamespaced), and no node says its container runtime runs pods in user namespaces (status.runtimeHandlers[].features.userNamespaces): "+
			"such a pod would never start; the nodes need containerd 2 with runc 1.2 or newer and Linux 6.3 or later; until then run the group with spec.flavour Privileged in a namespace that admits privileged pods")
	}
	return nil
}

// podChecks picks the group's flavour, whose runner pod the namespace's
// Pod Security admits, and refuses a group whose runner config gives job
// containers what that flavour or the namespace's level does not.
func (s *Scaler) podChecks(g *groupRun, ns *corev1.Namespace) (v1alpha1.RunnerFlavour, error) {
	flavour, err := s.pickFlavour(g, ns)
	if err != nil {
		return "", err
	}
	// What the runner config gives job containers is judged by the same
	// level: a privileged job container goes only where a privileged
	// runner pod would.
	merged := runnerconfig.Merge(s.cfg.Runner.Config.Defaults, g.rg.Spec.RunnerConfig, s.cfg.Runner.Config.Pinned)
	if err := flavourFits(flavour, merged); err != nil {
		return "", err
	}
	if why := tenancy.RunnerConfigRights(ns, runnerconfig.NeedsPrivileged(merged), s.cfg.PodSecurity); why != "" {
		return "", reason.Errorf(v1alpha1.ReasonPodSecurityForbidsRunner, "%s", why)
	}
	return flavour, nil
}

// stateOwner is the group as owner of its state ConfigMap.
func stateOwner(rg *v1alpha1.RunnerGroup) state.Owner {
	return state.Owner{
		Namespace:  rg.Namespace,
		Name:       rg.Name,
		UID:        string(rg.UID),
		APIVersion: v1alpha1.GroupVersion.String(),
		Kind:       v1alpha1.Kind,
		Labels:     runnerjob.GroupLabels(rg.Name),
	}
}
