// Package scaler runs passes: for every selected RunnerGroup a pass asks
// Gitea for queued jobs, claims the ones it will serve in the group's state
// ConfigMap, creates one runner Job per claim, and writes the group's status.
//
// A pass is short-lived and stateless apart from the ConfigMaps, so a
// CronJob pass, a manual `kubectl create job --from=cronjob/...` pass and a
// looping Deployment can all run at once: claims are written under the
// ConfigMap's resourceVersion before any Job is created, and a pass that
// loses the race re-reads everything and plans again.
//
// The files follow a pass from top to bottom (TestEveryFileMapNamesEveryFile
// keeps this map whole):
//
//	scaler.go   building a Scaler (New)
//	loop.go     one pass, or one every interval until a signal (Run)
//	trigger.go  a loop's pass brought forward by a webhook delivery
//	pass.go     the groups of a pass and the workers that serve them
//	assign.go   which group serves a job several could run (the rule's input)
//	namespaces.go  what a pass learns once of each namespace: enabled, labels
//	group.go    one group's steps, and the first of them: validate
//	flavour.go  the flavour of the group's runner pods (spec.flavour):
//	            the one its namespace's Pod Security admits
//	usernsnodes.go  whether the nodes can run user-namespaced pods
//	regcheck.go the check that a registration token is its scope's, and
//	            which scope's it is
//	regcheckkept.go  those checks' verdicts kept for the next pass, in
//	            the release namespace's ConfigMap
//	regtoken.go the registration token the scaler mints for a group
//	register.go the runners the scaler registers itself: each with its
//	            credentials Secret, unregistered when it never starts
//	cachecheck.go  whether the group's runners get the shared cache
//	gather.go   what a pass reads once for all groups: each namespace's
//	            runner Jobs and pods, each distinct Gitea listing
//	clusterwide.go  with Config.ClusterWideReads, a single pass's one list
//	            of each kind for every namespace, and the ledgers
//	boundrights.go  with Config.ClusterWideReads, the rights read once for
//	            every namespace
//	observe.go  what the group's runner Jobs and Gitea say
//	claim.go    the claims: load, plan, store under resourceVersion
//	create.go   a runner Job per claim; a claim whose Job failed is released
//	runnerconfig.go  the runner config ConfigMap, a key per pod grace
//	lifecycle.go  the runner Jobs' pods, and the lifecycle decisions on them
//	place.go    where each runner registers (its registration token's scope)
//	reap.go     runner Jobs that never started or whose runner has ended,
//	            and the reaper (package reaper) for a group's runners
//	formerscope.go  runners left where the group no longer is
//	leftbehind.go  the namespace's ledger, and the registrations deleted
//	            groups left behind
//	record.go   the group's status, conditions and events
//	stats.go    what a pass saw, for the summary and the metrics
//	jobtimes.go  the group's jobs' startup and execution times, from the
//	            listings and the webhook's deliveries, each job once
//	deletedns.go  after the groups, with cleanup.deletedNamespaces: the
//	            mirror of what each namespace registered, and the removal of
//	            the registrations of namespaces that are gone
//	reasons.go  the group error, and the condition reason it carries
//	atwork.go   when a pass last saw each runner at work, kept in the
//	            group's state, whence its idle time counts
//	memory.go   what a loop keeps between passes, in one value that a
//	            single pass has none of (nil): the pieces below
//	verdicts.go a loop's verdicts on each group's spec and runner pod
//	passkept.go what a loop keeps from one pass to the next, by key: the
//	            verdicts' and the rendered runner configs' store
//	watched.go  a loop's watch caches, and the rights and Secrets it
//	            trusts beside them
package scaler

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	psaapi "k8s.io/pod-security-admission/api"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/assign"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/giteaurl"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/selection"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// GroupClient reads RunnerGroups and writes their status.
type GroupClient interface {
	selection.Lister
	PatchStatus(ctx context.Context, rg *v1alpha1.RunnerGroup) error
}

// Deps are what a Scaler talks to. Kube, Groups and Gitea are required; the
// others have defaults.
type Deps struct {
	Kube   kubernetes.Interface
	Groups GroupClient
	Gitea  gitea.Factory
	// Log receives the scaler's logs; nil discards them.
	Log *slog.Logger
	// Out receives the dry-run plan; nil discards it.
	Out io.Writer
	// Now is the clock (default time.Now) and NewJobName names runner Jobs
	// (default runnerjob.NewName); tests replace them.
	Now        func() time.Time
	NewJobName func(group string) string
	// Observer hears about each finished pass (the metrics endpoint);
	// Requests counts the requests to Gitea and Kubernetes for each pass's
	// summary line. Nil hears nothing and counts none.
	Observer passreport.Observer
	Requests passreport.RequestCounter
	// Cache is a loop's watch caches (see Cache); nil reads the API
	// server for everything, as a single pass does.
	Cache Cache
}

// Config is what the scaler's flags set.
type Config struct {
	// Namespaces to serve; empty serves all namespaces.
	Namespaces []string
	// Selector picks RunnerGroups by label, in either form package
	// selector reads; empty picks all.
	Selector string
	// ExcludeSelectors skip RunnerGroups that any of them matches (same
	// forms); an additional listener takes those groups.
	ExcludeSelectors []string
	// DryRun plans and prints, and writes nothing.
	DryRun bool
	// SpawnTTL is how long a claim keeps a queued job from a second runner.
	SpawnTTL time.Duration
	// Workers is how many groups are served at once; less than 1 means 1.
	Workers int
	// GroupTimeout bounds one group's steps in a pass, so a slow group or a
	// slow Gitea cannot hold a worker for the rest of the pass; the group's
	// outcome is still recorded. 0 means DefaultGroupTimeout.
	GroupTimeout time.Duration
	// Runner configures the runner Jobs.
	Runner runnerjob.Options
	// RunnerIdleTimeout is how long a surplus runner stays idle before it
	// is reaped; 0 turns off reaping and the removal of orphan
	// registrations, which both need the runners API.
	RunnerIdleTimeout time.Duration
	// RunnerStartTimeout is how long a runner Job's pod may take to start
	// before the Job is deleted; 0 never deletes one.
	RunnerStartTimeout time.Duration
	// GiteaConcurrency bounds the Gitea listings a pass reads at once
	// (one per distinct Gitea URL, API token and target); less than 1
	// means DefaultGiteaConcurrency.
	GiteaConcurrency int
	// AllowedGiteaURLs are where a group's API token may go; nil is the
	// empty list (any host but loopback, link-local and metadata ones).
	// The Gitea factory's HTTP client must apply the same policy at dial
	// time and on redirects.
	AllowedGiteaURLs *giteaurl.Policy
	// Tenancy names how a namespace is enabled, for the message of a group
	// whose namespace is not.
	Tenancy tenancy.Names
	// PodSecurity is what the platform says of the cluster's Pod Security
	// that the API does not show: whether a namespace without an enforce
	// label admits privileged runner pods, and whether the API server
	// relaxes Pod Security for user-namespaced pods.
	PodSecurity tenancy.Platform
	// NewGroupsPerPass bounds how many groups a pass serves for the first
	// time (each costs a state ConfigMap and a status write); the others
	// wait for later passes, so a pass over thousands of new groups stays
	// within a CronJob's period. 0 means no bound.
	NewGroupsPerPass int
	// AssignmentHold is how long the groups of one namespace keep a
	// queued job that groups of other namespaces could also run, before
	// it goes in turn to those (assign.Rule.Holding); 0 means
	// assign.DefaultHold.
	AssignmentHold time.Duration
	// RightsRecheck is how long a loop trusts a namespace's rights review
	// that found it enabled, at most (see review); 0, the default, reviews
	// every namespace every pass, so a removed RoleBinding is seen by the
	// next pass and the loop's watches there stop.
	RightsRecheck time.Duration
	// ClusterWideReads lets a pass read, once for all namespaces, what it
	// would otherwise ask per namespace, where the chart grants it
	// cluster-wide: the RoleBindings of the tenant ClusterRole (the rights
	// check, see tenancy.Bound), the Namespace objects, and, in a single
	// pass, the runner Jobs, pods and state ConfigMaps (readClusterWide; a
	// loop gets those from its Cache, kubecache.WatchClusterWide). Where a
	// read is refused the pass asks per namespace, as without it.
	ClusterWideReads bool
	// DeletedNamespaces, when set, keeps a copy of what each served
	// namespace registered and removes the registrations of namespaces
	// that are gone (see DeletedNamespaces); nil does neither.
	DeletedNamespaces *DeletedNamespaces
	// KeptRegistrationChecks names the ConfigMap, in the release
	// namespace, where passes keep the registration token checks'
	// verdicts for the next (regcheckkept.go); nil keeps them in a loop's
	// memory only.
	KeptRegistrationChecks *types.NamespacedName
}

// DefaultGroupTimeout is Config.GroupTimeout's default: room for a few
// Gitea requests at their default 10 s timeout, and short against the 100 s
// a CronJob pass has.
const DefaultGroupTimeout = 30 * time.Second

// DefaultGiteaConcurrency is Config.GiteaConcurrency's default: a few
// listings at once cut a pass over many targets without flooding Gitea
// (each listing has up to three requests of its own in flight).
const DefaultGiteaConcurrency = 4

// Scaler runs passes. Make one with New: the zero value has nothing to talk
// to, and its Pass says so.
type Scaler struct {
	kube       kubernetes.Interface
	groups     GroupClient
	gitea      gitea.Factory
	log        *slog.Logger
	out        io.Writer
	now        func() time.Time
	newJobName func(group string) string
	cfg        Config
	observer   passreport.Observer
	requests   passreport.RequestCounter
	// trig holds the webhook's queued jobs until a pass serves them.
	trig triggers
	// mem is what a loop keeps between passes; nil for a single pass.
	mem *memory

	// selection is cfg's namespaces and selectors, parsed once.
	selection selection.Rule

	// turns counts the passes made, to rotate the order of their groups
	// (see Pass); firstMinute is the minute of the first.
	mu          sync.Mutex
	turns       int64
	firstMinute int64

	// server is the API server's version, read once, for judging
	// user-namespaced runner pods as its Pod Security does.
	server struct {
		once    sync.Once
		version psaapi.Version
	}
	// nodes is whether the nodes run user-namespaced pods (usernsnodes.go).
	nodes nodeSupport
}

// serverVersion is the API server's Kubernetes version, read once per
// process and only for a group whose runner pod is user-namespaced: Pod
// Security relaxes for those from policy version 1.35
// (tenancy.Platform.Server). When it cannot be read, the zero Version: the
// pre-check then refuses what such a server would admit, never the other
// way round.
func (s *Scaler) serverVersion() psaapi.Version {
	s.server.once.Do(func() {
		info, err := s.kube.Discovery().ServerVersion()
		if err == nil {
			s.server.version, err = tenancy.ParseServerVersion(info.Major, info.Minor)
		}
		if err != nil {
			s.log.Warn("cannot read the API server's version; user-namespaced runner pods are judged by Pod Security before 1.35", "error", err)
		}
	})
	return s.server.version
}

// New checks the dependencies and the configuration and returns a Scaler.
func New(deps Deps, cfg Config) (*Scaler, error) {
	switch {
	case deps.Kube == nil:
		return nil, errors.New("scaler: no Kubernetes client")
	case deps.Groups == nil:
		return nil, errors.New("scaler: no RunnerGroup client")
	case deps.Gitea == nil:
		return nil, errors.New("scaler: no Gitea client factory")
	case cfg.SpawnTTL <= 0:
		return nil, errors.New("the spawn TTL must be positive")
	case cfg.GroupTimeout < 0:
		return nil, errors.New("the group timeout must not be negative")
	case cfg.RunnerIdleTimeout < 0 || cfg.RunnerStartTimeout < 0:
		return nil, errors.New("the runner idle and start timeouts must not be negative")
	case cfg.AssignmentHold < 0:
		return nil, errors.New("the assignment hold must not be negative")
	}
	if d := cfg.DeletedNamespaces; d != nil {
		switch {
		case d.Namespace == "" || d.ConfigMap == "":
			return nil, errors.New("the sweep of deleted namespaces needs the namespace and name of its ConfigMap")
		case d.Token != "" && d.GiteaURL == "":
			return nil, errors.New("the sweep of deleted namespaces needs the Gitea URL its token is for")
		case d.MaxPerPass < 0:
			return nil, errors.New("the deleted namespaces swept per pass must not be negative")
		}
	}
	s := &Scaler{
		kube: deps.Kube, groups: deps.Groups, gitea: deps.Gitea,
		log: deps.Log, out: deps.Out, now: deps.Now, newJobName: deps.NewJobName,
		cfg: cfg, observer: deps.Observer, requests: deps.Requests, mem: newMemory(deps.Cache),
	}
	s.trig.wake = make(chan struct{}, 1)
	var err error
	if s.selection, err = selection.New(cfg.Namespaces, cfg.Selector, cfg.ExcludeSelectors); err != nil {
		return nil, err
	}
	s.cfg.Workers = max(cfg.Workers, 1)
	if s.cfg.AllowedGiteaURLs == nil {
		s.cfg.AllowedGiteaURLs = &giteaurl.Policy{}
	}
	if s.cfg.GiteaConcurrency < 1 {
		s.cfg.GiteaConcurrency = DefaultGiteaConcurrency
	}
	if s.cfg.GroupTimeout == 0 {
		s.cfg.GroupTimeout = DefaultGroupTimeout
	}
	if s.cfg.AssignmentHold == 0 {
		s.cfg.AssignmentHold = assign.DefaultHold
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.out == nil {
		s.out = io.Discard
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.newJobName == nil {
		s.newJobName = runnerjob.NewName
	}
	if s.observer == nil {
		s.observer = unobserved{}
	}
	if s.requests == nil {
		s.requests = uncounted{}
	}
	return s, nil
}

// detachedTimeout bounds the clean-up a pass does after its context ended.
const detachedTimeout = 10 * time.Second

// detached returns a context that outlives ctx's cancellation for a short
// clean-up (releasing claims, recording the status), so a pass cut off by
// SIGTERM or a deadline leaves the group in a state the next pass can use.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), detachedTimeout)
}
