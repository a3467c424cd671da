package cli

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/kubecache"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/metrics"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scaler"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// run wires the real clients, the metrics and a loop's endpoints and
// caches into the scaler, and runs it.
func (r *RunCmd) run(streams IO) int {
	log := newLogger(streams.Err, r.LogFormat, r.LogLevel)
	cfg, err := r.kubeConfig()
	if err != nil {
		log.Error("cannot load Kubernetes client config", "error", err)
		return ExitFailed
	}
	// The requests are counted in every mode: a pass's summary line
	// reports them even when nothing scrapes.
	m := metrics.New()
	m.SetBuildInfo(version())
	cfg.Wrap(m.KubeTransport)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Error("cannot create Kubernetes client", "error", err)
		return ExitFailed
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		log.Error("cannot create Kubernetes client", "error", err)
		return ExitFailed
	}
	factory, err := r.giteaFactory(m)
	if err != nil {
		log.Error("cannot set up Gitea requests", "error", err)
		return ExitUsage
	}
	stop, ok := r.serveEndpoints(m, log)
	if !ok {
		return ExitFailed
	}
	defer stop()
	deps := scaler.Deps{
		Kube: kube, Groups: runnergroups.Client{Dynamic: dyn, REST: kube.CoreV1().RESTClient()}, Gitea: factory, Log: log, Out: streams.Out,
		Observer: m, Requests: m,
	}
	if r.BenchHeapProfile != "" {
		deps.Observer = &heapProfiler{Metrics: m, dir: r.BenchHeapProfile, log: log}
	}
	if r.Loop {
		stop := watchCaches(&deps, kube, dyn, log, r.ClusterWideReads)
		defer stop()
	}
	return r.runWith(deps)
}

// watchSyncTimeout bounds the wait for the cluster-wide caches' first
// lists when a loop starts.
const watchSyncTimeout = 60 * time.Second

// watchCaches gives a loop its watch caches (package kubecache): every
// RunnerGroup and Namespace where the scaler may watch them cluster-wide,
// and the namespaces it serves as their passes find them enabled. Where a
// watch is not allowed the loop reads as a single pass does.
func watchCaches(deps *scaler.Deps, kube kubernetes.Interface, dyn dynamic.Interface, log *slog.Logger, clusterWide bool) (stop func()) {
	c := kubecache.New(kube, log)
	deps.Cache = c
	ctx, cancel := context.WithTimeout(context.Background(), watchSyncTimeout)
	defer cancel()
	c.WatchNamespaces(ctx)
	if clusterWide {
		if err := c.WatchClusterWide(ctx); err != nil {
			log.Warn("not reading cluster-wide (--cluster-wide-reads); each namespace is watched on its own", "error", err)
		} else {
			log.Info(scaler.ReadingClusterWide)
		}
	}
	err := kubecache.MayWatch(ctx, kube, v1alpha1.GroupVersionResource.Group, v1alpha1.GroupVersionResource.Resource)
	var groups *runnergroups.Watched
	if err == nil {
		groups, err = runnergroups.Watch(runnergroups.Client{Dynamic: dyn, REST: kube.CoreV1().RESTClient()}, watchSyncTimeout)
	}
	if err != nil {
		log.Warn("not watching RunnerGroups; each pass lists them", "error", err)
		return c.Stop
	}
	deps.Groups = groups
	return func() { groups.Stop(); c.Stop() }
}

// kubeConfig is the Kubernetes client config, at the flags' rate.
func (r *RunCmd) kubeConfig() (*rest.Config, error) {
	target, err := r.load()
	if err != nil {
		return nil, err
	}
	cfg := target.config
	cfg.QPS, cfg.Burst = float32(r.KubeQPS), r.KubeBurst
	return cfg, nil
}

// giteaFactory makes the clients of real Gitea instances, their requests
// counted by m (nil counts none), by the rule why follows too
// (giteaClients): one shared HTTP client and transport, so connections
// are reused.
func (r *RunCmd) giteaFactory(m *metrics.Metrics) (gitea.Factory, error) {
	base := r.giteaTransport
	if base == nil {
		var err error
		if base, err = gitea.NewTransport(r.GiteaCAFile); err != nil {
			return nil, err
		}
	}
	var wrap func(http.RoundTripper) http.RoundTripper
	if m != nil {
		wrap = m.GiteaTransport
	}
	return giteaClients(r.allowedGiteaURLs(), base, wrap, gitea.Options{
		Timeout: r.GiteaTimeout, MaxResponseBytes: r.GiteaMaxResponseBytes, UserAgent: userAgent(),
	}), nil
}

// scalerConfig is the scaler's part of the flags.
func (r *RunCmd) scalerConfig() (scaler.Config, error) {
	opts, err := r.runnerOptions()
	opts.Cache = r.cacheOptions()
	return scaler.Config{
		Namespaces: r.Namespace, Selector: r.Selector, ExcludeSelectors: r.ExcludeSelector,
		DryRun: r.DryRun, SpawnTTL: r.SpawnTTL, Workers: r.Workers, GroupTimeout: r.GroupTimeout, Runner: opts,
		RunnerIdleTimeout: r.RunnerIdleTimeout, RunnerStartTimeout: r.RunnerStartTimeout,
		GiteaConcurrency: r.GiteaConcurrency,
		AllowedGiteaURLs: r.allowedGiteaURLs(),
		Tenancy:          tenancy.Names{TenantClusterRole: r.TenantClusterRole, ServiceAccount: r.ServiceAccount},
		PodSecurity: tenancy.Platform{
			TrustUnlabelled:                    r.TrustUnlabelledNamespaces,
			UserNamespacesPodSecurityStandards: r.UserNamespacesPodSecurityStandards,
		},
		AssignmentHold:         r.AssignmentHold,
		RightsRecheck:          r.RightsRecheck,
		ClusterWideReads:       r.ClusterWideReads,
		NewGroupsPerPass:       r.newGroupsPerPass(),
		DeletedNamespaces:      r.deletedNamespaces(),
		KeptRegistrationChecks: r.keptRegistrationChecks(),
	}, err
}
