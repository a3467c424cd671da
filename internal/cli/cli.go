// Package cli is the scaler's command line: flags (each also read from an
// environment variable, which is how the Helm chart configures it), their
// validation, logging, and the wiring of real clients into the scaler,
// whose Run makes the passes.
package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/giteaurl"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/kubecache"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/metrics"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/podtemplate"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerconfig"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerlabels"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scaler"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/selector"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/webhook"
)

// Version is set at build time with -ldflags "-X .../internal/cli.Version=v1.2.3".
var Version = "dev"

// Exit codes.
const (
	ExitOK = 0
	// ExitFailed: a RunnerGroup failed, or the pass could not run at all.
	// The CronJob's Job then shows as failed in its history.
	ExitFailed = 1
	// ExitUsage: bad flags or environment.
	ExitUsage = 2
)

// CLI is the root command.
type CLI struct {
	Run     RunCmd     `cmd:"" help:"Run one scale pass over the selected RunnerGroups (or keep passing with --loop)."`
	Version VersionCmd `cmd:"" help:"Print the version."`
	// RenderRunnerConfig runs in runner pods, as their init container.
	RenderRunnerConfig RenderRunnerConfigCmd `cmd:"" help:"Runner pods' init container (with the shared cache): write the runner config from the rendered ConfigMap and the cache secret in GITEA_RUNNER_CACHE_SECRET."`
	Status             StatusCmd             `cmd:"" help:"Show one line per selected RunnerGroup from its status: demand, runners, last pass, conditions. Read-only."`
	Why                WhyCmd                `cmd:"" help:"Explain why a Gitea job has or has not got a runner: the groups that could serve it, the one assigned, labels no group offers, needs:, capacity, the runner pod. Read-only; asks Gitea with a selected group's API token, read with your own rights, and only where a pass would send it."`
}

// RunCmd is `gitea-runner-scaler run`.
type RunCmd struct {
	KubeFlags       `embed:""`
	Namespace       []string      `short:"n" env:"SCALER_NAMESPACES" placeholder:"NS" help:"Namespace to serve (repeat, or comma-separated in the env var); empty serves all namespaces."`
	Selector        string        `env:"SCALER_SELECTOR" placeholder:"SELECTOR" help:"Label selector over RunnerGroups: 'team=infra,tier in (gpu)', or a JSON LabelSelector such as '{\"matchLabels\":{\"team\":\"infra\"}}'."`
	ExcludeSelector []string      `env:"SCALER_EXCLUDE_SELECTORS" sep:";" placeholder:"SELECTOR" help:"Skip RunnerGroups this selector matches, in either form of --selector (repeat, or ';'-separated in the env var): those belong to another listener."`
	Loop            bool          `env:"SCALER_LOOP" help:"Pass again every --interval until SIGTERM; the pass in flight is finished first."`
	Interval        time.Duration `env:"SCALER_INTERVAL" default:"30s" help:"Time between the starts of passes with --loop."`
	DryRun          bool          `env:"SCALER_DRY_RUN" help:"Plan and print what would be done; write nothing."`
	LogFormat       string        `env:"SCALER_LOG_FORMAT" enum:"json,text" default:"json" help:"Log format: json or text."`
	LogLevel        string        `env:"SCALER_LOG_LEVEL" enum:"debug,info,warn,error" default:"info" help:"Log level: debug, info, warn or error."`
	RunnerImage     string        `env:"SCALER_RUNNER_IMAGE" default:"gitea/runner:1.0.8-dind-rootless" help:"Image of the runner container in the built-in runner pod (a runner template may set another)."`
	DefaultLabels   []string      `env:"SCALER_DEFAULT_LABELS" placeholder:"LABEL" help:"Labels every group gets unless it sets a label of the same name (comma-separated). Default: act_runner's defaults (ubuntu-latest, ubuntu-24.04, ubuntu-22.04)."`
	SpawnTTL        time.Duration `env:"SCALER_SPAWN_TTL" default:"5m" help:"How long a claimed queued job waits for its runner before a retry."`
	GiteaTimeout    time.Duration `env:"SCALER_GITEA_TIMEOUT" default:"10s" help:"Timeout of each request to Gitea."`
	GiteaCAFile     string        `env:"SCALER_GITEA_CA_FILE" placeholder:"PATH" help:"PEM bundle of CAs trusted for Gitea besides the system's (a Gitea behind a private CA). HTTPS_PROXY, HTTP_PROXY and NO_PROXY are honoured."`
	Workers         int           `env:"SCALER_WORKERS" default:"4" help:"RunnerGroups served at once."`
	RunnerJobTTL    int32         `env:"SCALER_RUNNER_JOB_TTL" default:"600" help:"ttlSecondsAfterFinished of runner Jobs."`
	// runnerjob.DefaultTerminationGracePeriodSeconds: the runner's 3h job
	// timeout and 2 minutes to report.
	RunnerTerminationGracePeriod int64         `env:"SCALER_RUNNER_TERMINATION_GRACE_PERIOD" default:"10920" placeholder:"SECONDS" help:"terminationGracePeriodSeconds of the built-in runner pod: how long a runner may finish its job after SIGTERM (a drain, an eviction, a deleted Job); keep it above the runner's shutdown_timeout. runnerTemplate and a group's spec.template may set another."`
	GroupTimeout                 time.Duration `env:"SCALER_GROUP_TIMEOUT" default:"30s" help:"Time one RunnerGroup's part of a pass may take; must be longer than --gitea-timeout."`
	// 2 MiB is gitea.DefaultMaxResponseBytes; see there why.
	GiteaMaxResponseBytes int64 `env:"SCALER_GITEA_MAX_RESPONSE_BYTES" default:"2097152" placeholder:"BYTES" help:"Largest answer read from Gitea; a larger one fails its group (GiteaBadResponse)."`
	// A group costs about 5 requests in a pass that creates nothing (its
	// Secrets, state ConfigMap, Jobs list and status patch), so 500 groups
	// need about 2,500: some 50 s at 50/s, inside a CronJob pass's 100 s.
	// client-go's default of 5/s would take over 8 minutes.
	KubeQPS   float64 `env:"SCALER_KUBE_QPS" default:"50" help:"Requests per second to the Kubernetes API, sustained."`
	KubeBurst int     `env:"SCALER_KUBE_BURST" default:"100" help:"Requests to the Kubernetes API that may be sent at once before --kube-qps paces them."`
	// Groups with the same Gitea, token and target share one listing per
	// pass; this bounds how many distinct listings are read at once.
	GiteaConcurrency int    `env:"SCALER_GITEA_CONCURRENCY" default:"4" help:"Gitea listings (one per distinct Gitea URL, API token and target) read at once in a pass."`
	MetricsAddr      string `env:"SCALER_METRICS_ADDR" placeholder:"HOST:PORT" help:"With --loop, serve Prometheus metrics on this address at /metrics (e.g. ':9090'); empty serves none. A single pass logs the same numbers in its 'pass finished' line."`
	HealthAddr       string `env:"SCALER_HEALTH_ADDR" placeholder:"HOST:PORT" help:"With --loop, serve GET /healthz on this address (e.g. ':8081') for a liveness probe: 503 when no pass ended within --healthz-stale-intervals intervals plus --group-timeout; empty serves none."`
	// 5 intervals: a pass longer than that is stuck, not slow (see
	// healthzStale for the group timeout on top).
	HealthzStaleIntervals int    `env:"SCALER_HEALTHZ_STALE_INTERVALS" default:"5" placeholder:"N" help:"/healthz fails when no full pass ended within N times --interval plus --group-timeout (counted from the start until the first pass ends); at least 2."`
	WebhookAddr           string `env:"SCALER_WEBHOOK_ADDR" placeholder:"HOST:PORT" help:"With --loop, accept Gitea's workflow_job webhook at POST /webhook on this address (e.g. ':8080'): a queued job starts a pass at once. Needs a secret."`
	WebhookSecret         string `env:"SCALER_WEBHOOK_SECRET" placeholder:"SECRET" help:"The webhook's secret (as set in Gitea); prefer the env var or --webhook-secret-file over the flag, which shows in the process list."`
	WebhookSecretFile     string `env:"SCALER_WEBHOOK_SECRET_FILE" placeholder:"PATH" help:"A file holding the webhook's secret (surrounding whitespace is trimmed)."`
	// The benchmark (make bench) tells where a pass's memory goes.
	BenchHeapProfile string `env:"SCALER_BENCH_HEAP_PROFILE" hidden:"" placeholder:"DIR" help:"Benchmark only: after each pass write the heap profile to DIR/heap-<pass>.pprof and log the runtime's memory figures."`

	// The runner lifecycle: idle surplus runners, runner Jobs that never
	// start, orphan registrations.
	RunnerIdleTimeout  time.Duration `env:"SCALER_RUNNER_IDLE_TIMEOUT" default:"10m" help:"How long a runner beyond the queued jobs stays idle before it is disabled in Gitea and its Job deleted; 0 turns that and the removal of orphan registrations off (both need the runners API)."`
	RunnerStartTimeout time.Duration `env:"SCALER_RUNNER_START_TIMEOUT" default:"10m" help:"How long a runner Job's pod may take to start before the Job is deleted and the group says why; 0 never deletes one."`

	// Tenancy: what a RunnerGroup's writer may make the scaler do.
	AllowedGiteaURLs          []string      `name:"allowed-gitea-urls" env:"SCALER_ALLOWED_GITEA_URLS" placeholder:"URL" help:"Gitea URLs a group's API token may be sent to (repeat, or comma-separated in the env var): a group's URL needs an entry's scheme, host and port and a path under the entry's. Empty: any host but loopback, link-local and metadata addresses."`
	TenantClusterRole         string        `env:"SCALER_TENANT_CLUSTER_ROLE" placeholder:"NAME" help:"The ClusterRole that enables a namespace when bound there; named in the message of a group whose namespace is not enabled."`
	ServiceAccount            string        `env:"SCALER_SERVICE_ACCOUNT" placeholder:"NS:NAME" help:"The scaler's ServiceAccount (namespace:name); named in the message of a group whose namespace is not enabled."`
	TrustUnlabelledNamespaces bool          `env:"SCALER_TRUST_UNLABELLED_NAMESPACES" help:"Take a namespace without a pod-security.kubernetes.io/enforce label to admit privileged runner pods (the cluster's default level is privileged)."`
	AssignmentHold            time.Duration `env:"SCALER_ASSIGNMENT_HOLD" default:"10m" help:"How long the groups of one namespace keep a queued job that groups of other namespaces could also run, before it goes in turn to those (give every listener and why the same)."`
	RightsRecheck             time.Duration `env:"SCALER_RIGHTS_RECHECK" default:"0s" help:"With --loop: how long a namespace's rights review that found it enabled is trusted, at most (each for a random half to all of it). 0 reviews every namespace every pass, so a removed RoleBinding is seen by the next pass; more saves one review per namespace per pass, and a removed RoleBinding then waits for the next review."`
	// The platform team's opt-in (the chart's scaler.clusterWideReads):
	// one read per pass for all namespaces instead of one per namespace
	// (scaler.Config.ClusterWideReads).
	ClusterWideReads bool `env:"SCALER_CLUSTER_WIDE_READS" help:"Read once per pass for all namespaces what is otherwise read per namespace, where the chart grants it cluster-wide (scaler.clusterWideReads): the runner Jobs, runner pods, state ConfigMaps and registrations ledgers (a loop: one watch of each; a single pass: one list of each; needs list, and for --loop watch, on Jobs, pods and ConfigMaps in all namespaces; a loop checks at start, a single pass by its list's answer), the rights check from the RoleBindings of --tenant-cluster-role and that role's rules, and the Namespace objects. A read that is refused falls back to one per namespace; only enabled namespaces are served, as without it."`
	// The sweep of the registrations deleted namespaces leave in Gitea
	// (scaler.DeletedNamespaces): the platform team's opt-in.
	DeletedNamespacesMirror   string `env:"SCALER_DELETED_NAMESPACES_MIRROR" placeholder:"NS/NAME" help:"Keep a copy of what each served namespace registered with Gitea in this ConfigMap (the release namespace's, where no tenant writes), and remove the registrations of namespaces that are gone; empty does neither."`
	DeletedNamespacesGiteaURL string `env:"SCALER_DELETED_NAMESPACES_GITEA_URL" placeholder:"URL" help:"The Gitea the sweep's token is for; only registrations recorded on this Gitea are removed, and the token goes nowhere else."`
	DeletedNamespacesToken    string `env:"SCALER_DELETED_NAMESPACES_TOKEN" placeholder:"TOKEN" help:"Gitea API token that may list and delete the runners of the scopes served (the chart reads it from a Secret); empty deletes nothing and reports what is left."`
	DeletedNamespacesPerPass  int    `env:"SCALER_DELETED_NAMESPACES_PER_PASS" default:"4" placeholder:"N" help:"Deleted namespaces swept per pass, at most; the others wait for later passes."`
	// The install-wide runner pod template (the chart's runnerTemplate,
	// mounted from a ConfigMap) and the fields groups may not change.
	RunnerTemplate       string   `env:"SCALER_RUNNER_TEMPLATE" placeholder:"PATH" type:"path" help:"YAML file with a pod template (metadata and spec) merged over the built-in runner pod and under each group's spec.template; empty for none."`
	RunnerTemplatePinned []string `env:"SCALER_RUNNER_TEMPLATE_PINNED" placeholder:"FIELD" help:"Fields a group's spec.template may not set, spec.<pod field> or runner.<container field>, e.g. spec.runtimeClassName,runner.image (repeat, or comma-separated)."`
	// The install-wide layers of every group's runner config (the chart's
	// runnerConfig.defaults and runnerConfig.pinned), as JSON or YAML text.
	RunnerConfigDefaults string `env:"SCALER_RUNNER_CONFIG_DEFAULTS" placeholder:"YAML" help:"Runner config (gitea/runner's keys, the subset of spec.runnerConfig) merged under each group's spec.runnerConfig; empty for none."`
	RunnerConfigPinned   string `env:"SCALER_RUNNER_CONFIG_PINNED" placeholder:"YAML" help:"Runner config merged over each group's spec.runnerConfig; a group that sets one of its fields fails with InvalidRunnerConfig; empty for none."`
	// The shared cache of each served namespace (the chart's runnerCache).
	RunnerCacheURL        string `env:"SCALER_RUNNER_CACHE_URL" placeholder:"URL" help:"Base URL of each namespace's gitea-runner cache-server, {namespace} replaced by the group's namespace, e.g. http://gitea-runner-cache.{namespace}.svc:8088/; runners get it as cache.external_server. Empty: no shared cache, the runners' cache is off."`
	RunnerCacheSecretName string `env:"SCALER_RUNNER_CACHE_SECRET_NAME" default:"gitea-runner-cache" placeholder:"NAME" help:"Secret, in each group's namespace, whose key external_secret is the cache server's shared secret; runner pods read it by secretKeyRef. A namespace without it gets runners with the cache off."`
	RunnerConfigImage     string `env:"SCALER_RUNNER_CONFIG_IMAGE" placeholder:"IMAGE" help:"Image of the runner pods' init container that writes the runner config with the cache secret (this scaler's image; its render-runner-config command). Needed with --runner-cache-url."`

	// giteaTransport sends every Gitea request: built once by Validate
	// from --gitea-ca-file and the proxy variables, shared by all clients.
	giteaTransport http.RoundTripper
}

// validateDeletedNamespaces checks the sweep's flags. Its errors never
// hold the token.
func (r *RunCmd) validateDeletedNamespaces() []error {
	var errs []error
	if r.DeletedNamespacesMirror == "" {
		if r.DeletedNamespacesToken != "" || r.DeletedNamespacesGiteaURL != "" {
			errs = append(errs, errors.New("the sweep's Gitea URL and token (SCALER_DELETED_NAMESPACES_*) need --deleted-namespaces-mirror"))
		}
		return errs
	}
	if ns, name, ok := strings.Cut(r.DeletedNamespacesMirror, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		errs = append(errs, fmt.Errorf("--deleted-namespaces-mirror must be namespace/name, got %q", r.DeletedNamespacesMirror))
	}
	if r.DeletedNamespacesToken != "" && r.DeletedNamespacesGiteaURL == "" {
		errs = append(errs, errors.New("the sweep's token needs --deleted-namespaces-gitea-url, the only Gitea it may be sent to"))
	}
	if r.DeletedNamespacesGiteaURL != "" {
		if p, err := giteaPolicy(r.AllowedGiteaURLs); err == nil {
			if err := p.Check(r.DeletedNamespacesGiteaURL); err != nil {
				errs = append(errs, fmt.Errorf("--deleted-namespaces-gitea-url: %w", err))
			}
		}
	}
	if r.DeletedNamespacesPerPass < 0 {
		errs = append(errs, fmt.Errorf("--deleted-namespaces-per-pass must be 0 (the default, %d) or more, got %d", scaler.DefaultDeletedNamespacesPerPass, r.DeletedNamespacesPerPass))
	}
	return errs
}

// deletedNamespaces is the sweep's configuration, nil when it is off.
func (r *RunCmd) deletedNamespaces() *scaler.DeletedNamespaces {
	if r.DeletedNamespacesMirror == "" {
		return nil
	}
	ns, name, _ := strings.Cut(r.DeletedNamespacesMirror, "/")
	return &scaler.DeletedNamespaces{Namespace: ns, ConfigMap: name, GiteaURL: r.DeletedNamespacesGiteaURL,
		Token: r.DeletedNamespacesToken, MaxPerPass: r.DeletedNamespacesPerPass}
}

// minGiteaResponseBytes is the smallest --gitea-max-response-bytes: below
// it, ordinary pages of jobs or repositories would be refused.
const minGiteaResponseBytes = 64 << 10

// VersionCmd is `gitea-runner-scaler version`.
type VersionCmd struct{}

// Validate runs at parse time, so bad values exit with ExitUsage before
// anything talks to a cluster.
func (r *RunCmd) Validate() error {
	var errs []error
	if r.Loop && r.Interval <= 0 {
		errs = append(errs, fmt.Errorf("--interval must be positive, got %s", r.Interval))
	}
	if r.SpawnTTL <= 0 {
		errs = append(errs, fmt.Errorf("--spawn-ttl must be positive, got %s", r.SpawnTTL))
	}
	if r.RightsRecheck < 0 {
		errs = append(errs, fmt.Errorf("--rights-recheck must be 0 or more, got %s", r.RightsRecheck))
	}
	if r.AssignmentHold <= 0 {
		errs = append(errs, fmt.Errorf("--assignment-hold must be positive, got %s", r.AssignmentHold))
	}
	if r.GiteaTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--gitea-timeout must be positive, got %s", r.GiteaTimeout))
	}
	if r.Workers < 1 || r.Workers > 64 {
		errs = append(errs, fmt.Errorf("--workers must be between 1 and 64, got %d", r.Workers))
	}
	if r.GroupTimeout <= r.GiteaTimeout {
		errs = append(errs, fmt.Errorf("--group-timeout (%s) must be longer than --gitea-timeout (%s), or a group could never finish a slow request", r.GroupTimeout, r.GiteaTimeout))
	}
	if r.GiteaMaxResponseBytes < minGiteaResponseBytes {
		errs = append(errs, fmt.Errorf("--gitea-max-response-bytes must be at least %d, got %d", minGiteaResponseBytes, r.GiteaMaxResponseBytes))
	}
	if r.KubeQPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-qps must be positive, got %g", r.KubeQPS))
	}
	if r.MetricsAddr != "" && !r.Loop {
		errs = append(errs, errors.New("--metrics-addr needs --loop: a single pass logs its numbers in its 'pass finished' line instead"))
	}
	if r.HealthAddr != "" && !r.Loop {
		errs = append(errs, errors.New("--health-addr needs --loop: a single pass is judged by its exit code"))
	}
	if r.HealthzStaleIntervals < 2 {
		errs = append(errs, fmt.Errorf("--healthz-stale-intervals must be at least 2, got %d: one late tick must not restart the scaler", r.HealthzStaleIntervals))
	}
	if r.WebhookAddr != "" && !r.Loop {
		errs = append(errs, errors.New("--webhook-addr needs --loop: a single pass has nobody to trigger"))
	}
	if r.WebhookSecret != "" && r.WebhookSecretFile != "" {
		errs = append(errs, errors.New("give the webhook secret once: --webhook-secret or --webhook-secret-file"))
	}
	if r.WebhookAddr != "" && r.WebhookSecret == "" && r.WebhookSecretFile == "" {
		errs = append(errs, errors.New("--webhook-addr needs a secret (SCALER_WEBHOOK_SECRET or --webhook-secret-file): unsigned deliveries are refused"))
	}
	if r.GiteaConcurrency < 1 || r.GiteaConcurrency > 64 {
		errs = append(errs, fmt.Errorf("--gitea-concurrency must be between 1 and 64, got %d", r.GiteaConcurrency))
	}
	if r.KubeBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-burst must be at least 1, got %d", r.KubeBurst))
	}
	errs = append(errs, r.validateCache()...)
	if r.RunnerIdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("--runner-idle-timeout must be 0 (off) or more, got %s", r.RunnerIdleTimeout))
	}
	if r.RunnerStartTimeout < 0 {
		errs = append(errs, fmt.Errorf("--runner-start-timeout must be 0 (off) or more, got %s", r.RunnerStartTimeout))
	}
	if r.RunnerJobTTL < 0 {
		errs = append(errs, fmt.Errorf("--runner-job-ttl must be 0 or more, got %d", r.RunnerJobTTL))
	}
	if r.RunnerTerminationGracePeriod < 1 {
		errs = append(errs, fmt.Errorf("--runner-termination-grace-period must be at least 1 second, got %d: a runner pod killed at once cannot report its job to Gitea", r.RunnerTerminationGracePeriod))
	}
	if r.GiteaCAFile != "" {
		t, err := gitea.NewTransport(r.GiteaCAFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--gitea-ca-file: %w", err))
		}
		r.giteaTransport = t
	}
	if strings.TrimSpace(r.RunnerImage) == "" {
		errs = append(errs, errors.New("--runner-image must not be empty"))
	}
	if _, err := selector.Parse(r.Selector); err != nil {
		errs = append(errs, fmt.Errorf("--selector %q: %w", r.Selector, err))
	}
	for _, s := range r.ExcludeSelector {
		if _, err := selector.ParseExclude(s); err != nil {
			errs = append(errs, fmt.Errorf("--exclude-selector %q: %w", s, err))
		}
	}
	for _, l := range r.DefaultLabels {
		if strings.TrimSpace(l) == "" || strings.ContainsAny(l, " \t") || runnerlabels.Name(l) == "" {
			errs = append(errs, fmt.Errorf("--default-labels: invalid label %q", l))
		}
	}
	if _, err := giteaPolicy(r.AllowedGiteaURLs); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, r.validateDeletedNamespaces()...)
	if r.ServiceAccount != "" {
		if ns, name, ok := strings.Cut(r.ServiceAccount, ":"); !ok || ns == "" || name == "" {
			errs = append(errs, fmt.Errorf("--service-account must be namespace:name, got %q", r.ServiceAccount))
		}
	}
	if _, err := r.runnerOptions(); err != nil {
		errs = append(errs, err)
	}
	r.Namespace = compact(r.Namespace)
	return errors.Join(errs...)
}

// healthzStale is how long /healthz waits for a pass to end: N
// intervals, plus one group's timeout, so that one slow group never fails
// the probe however short the interval (the demo's is 5 s).
func (r *RunCmd) healthzStale() time.Duration {
	return time.Duration(r.HealthzStaleIntervals)*r.Interval + r.GroupTimeout
}

// runnerOptions are the runner Jobs' settings from the flags, with the
// runner template read and checked: strictly decoded (a misplaced key such
// as tolerations under a container is an error, not silently dropped),
// nothing reserved, and a runner pod that Build accepts.
func (r *RunCmd) runnerOptions() (runnerjob.Options, error) {
	opts := runnerjob.DefaultOptions()
	opts.Image = r.RunnerImage
	opts.TTLSecondsAfterFinished = r.RunnerJobTTL
	opts.TerminationGracePeriodSeconds = r.RunnerTerminationGracePeriod
	if len(r.DefaultLabels) > 0 {
		opts.DefaultLabels = r.DefaultLabels
	}
	pinned, err := podtemplate.ParsePinned(r.RunnerTemplatePinned)
	if err != nil {
		return opts, fmt.Errorf("--runner-template-pinned: %w", err)
	}
	opts.Pinned = pinned
	if opts.Config.Defaults, err = runnerconfig.ParseLayer([]byte(r.RunnerConfigDefaults), "--runner-config-defaults"); err != nil {
		return opts, err
	}
	if opts.Config.Pinned, err = runnerconfig.ParseLayer([]byte(r.RunnerConfigPinned), "--runner-config-pinned"); err != nil {
		return opts, err
	}
	if r.RunnerCacheURL != "" {
		opts.Cache = runnerjob.CacheOptions{URL: cacheURL(r.RunnerCacheURL), SecretName: r.RunnerCacheSecretName, Image: r.RunnerConfigImage}
	}
	if r.RunnerTemplate == "" {
		return opts, nil
	}
	raw, err := os.ReadFile(r.RunnerTemplate)
	if err != nil {
		return opts, fmt.Errorf("--runner-template: %w", err)
	}
	var tmpl corev1.PodTemplateSpec
	if err := yaml.UnmarshalStrict(raw, &tmpl); err != nil {
		return opts, fmt.Errorf("--runner-template %s: not a pod template (metadata, spec): %w", r.RunnerTemplate, err)
	}
	opts.Template = &tmpl
	if err := runnerjob.CheckInstallTemplate(opts); err != nil {
		return opts, fmt.Errorf("--runner-template %s: %w", r.RunnerTemplate, err)
	}
	return opts, nil
}

func compact(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range in {
		s = strings.TrimSpace(s)
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// IO carries the streams, so tests can swap them.
type IO struct {
	Out, Err io.Writer
}

// Main parses args and runs the command; it returns the process exit code.
func Main(args []string, streams IO) int {
	var c CLI
	exit := -1
	parser, err := kong.New(&c,
		kong.Name("gitea-runner-scaler"),
		kong.Description("Starts one ephemeral Gitea act_runner Job per queued Gitea Actions job, within each RunnerGroup's limits."),
		kong.UsageOnError(),
		kong.Writers(streams.Out, streams.Err),
		kong.Exit(func(code int) { exit = code }),
	)
	if err != nil {
		fmt.Fprintf(streams.Err, "gitea-runner-scaler: %v\n", err)
		return ExitUsage
	}
	kctx, err := parser.Parse(args)
	if exit >= 0 { // --help
		return exit
	}
	if err != nil {
		fmt.Fprintf(streams.Err, "gitea-runner-scaler: %v\n", err)
		return ExitUsage
	}
	switch kctx.Command() {
	case "version":
		fmt.Fprintln(streams.Out, Version)
		return ExitOK
	case "status":
		return c.Status.run(streams)
	case "render-runner-config":
		return c.RenderRunnerConfig.run(streams)
	case "why <job>":
		return c.Why.run(streams)
	default:
		return c.Run.run(streams)
	}
}

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
	m.SetBuildInfo(Version)
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
	if r.MetricsAddr != "" {
		stop, err := serveMetrics(r.MetricsAddr, m, log)
		if err != nil {
			log.Error("cannot serve metrics", "addr", r.MetricsAddr, "error", err)
			return ExitFailed
		}
		defer stop()
	}
	if r.HealthAddr != "" {
		stop, err := serveHealth(r.HealthAddr, m, r.healthzStale(), log)
		if err != nil {
			log.Error("cannot serve /healthz", "addr", r.HealthAddr, "error", err)
			return ExitFailed
		}
		defer stop()
	}
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

// serveMetrics serves m at /metrics on addr until stop is called.
func serveMetrics(addr string, m *metrics.Metrics, log *slog.Logger) (stop func(), err error) {
	return serveOne(addr, "/metrics", m.Handler(), "metrics", log)
}

// serveHealth serves the liveness check at /healthz on addr until stop is
// called: a port of its own, since it names no tenant and so needs none
// of the metrics port's NetworkPolicy.
func serveHealth(addr string, m *metrics.Metrics, stale time.Duration, log *slog.Logger) (stop func(), err error) {
	return serveOne(addr, "/healthz", m.Healthz(stale), "health", log)
}

// serveOne serves h at GET path on addr until stop is called.
func serveOne(addr, path string, h http.Handler, what string, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+path, h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(what+" endpoint stopped", "error", err)
		}
	}()
	log.Info("serving "+what, "addr", ln.Addr().String(), "path", path)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
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
func (r *RunCmd) giteaFactory(m *metrics.Metrics) (scaler.GiteaFactory, error) {
	base, ok := r.giteaTransport.(*http.Transport)
	if !ok || base == nil {
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

// allowedGiteaURLs is --allowed-gitea-urls as a policy; Validate has
// refused a list that does not parse.
func (r *RunCmd) allowedGiteaURLs() *giteaurl.Policy {
	p, _ := giteaurl.Parse(r.AllowedGiteaURLs)
	return p
}

// scalerConfig is the scaler's part of the flags.
func (r *RunCmd) scalerConfig() (scaler.Config, error) {
	opts, err := r.runnerOptions()
	return scaler.Config{
		Namespaces: r.Namespace, Selector: r.Selector, ExcludeSelectors: r.ExcludeSelector,
		DryRun: r.DryRun, SpawnTTL: r.SpawnTTL, Workers: r.Workers, GroupTimeout: r.GroupTimeout, Runner: opts,
		RunnerIdleTimeout: r.RunnerIdleTimeout, RunnerStartTimeout: r.RunnerStartTimeout,
		GiteaConcurrency:          r.GiteaConcurrency,
		AllowedGiteaURLs:          r.allowedGiteaURLs(),
		Tenancy:                   tenancy.Names{TenantClusterRole: r.TenantClusterRole, ServiceAccount: r.ServiceAccount},
		TrustUnlabelledNamespaces: r.TrustUnlabelledNamespaces,
		AssignmentHold:            r.AssignmentHold,
		RightsRecheck:             r.RightsRecheck,
		ClusterWideReads:          r.ClusterWideReads,
		NewGroupsPerPass:          newGroupsPerPass(r.KubeQPS),
		DeletedNamespaces:         r.deletedNamespaces(),
	}, err
}

// firstWritesSeconds is how long the first writes of new groups may take
// in one pass: with the rest of the pass, well inside a CronJob pass's 100 s
// (the chart's activeDeadlineSeconds).
const firstWritesSeconds = 30

// newGroupsPerPass is how many new groups a pass serves: each writes one
// state ConfigMap (the typed client) and one status (the dynamic client,
// paced apart), so at --kube-qps Q a pass writes Q × firstWritesSeconds of
// each in that time.
func newGroupsPerPass(qps float64) int {
	return max(1, int(qps*firstWritesSeconds))
}

// runWith runs the scaler on the given clients (tests pass fakes) and
// returns the exit code.
func (r *RunCmd) runWith(deps scaler.Deps) int {
	cfg, err := r.scalerConfig()
	if err != nil {
		deps.Log.Error("invalid configuration", "error", err)
		return ExitUsage
	}
	sc, err := scaler.New(deps, cfg)
	if err != nil {
		deps.Log.Error("invalid configuration", "error", err)
		return ExitUsage
	}
	deps.Log.Info("scaler starting", "version", Version, "loop", r.Loop, "interval", r.Interval, "namespaces", r.Namespace,
		"selector", r.Selector, "excludeSelectors", r.ExcludeSelector, "dryRun", r.DryRun,
		"groupTimeout", r.GroupTimeout, "giteaCAFile", r.GiteaCAFile, "kubeQPS", r.KubeQPS, "kubeBurst", r.KubeBurst, "giteaConcurrency", r.GiteaConcurrency,
		"runnerIdleTimeout", r.RunnerIdleTimeout, "runnerStartTimeout", r.RunnerStartTimeout, "webhookAddr", r.WebhookAddr,
		"runnerTemplate", r.RunnerTemplate, "runnerTemplatePinned", cfg.Runner.Pinned.String(),
		"runnerConfigDefaults", runnerconfig.String(cfg.Runner.Config.Defaults), "runnerConfigPinned", runnerconfig.String(cfg.Runner.Config.Pinned),
		"allowedGiteaURLs", r.AllowedGiteaURLs, "trustUnlabelledNamespaces", r.TrustUnlabelledNamespaces, "clusterWideReads", r.ClusterWideReads,
		"deletedNamespacesMirror", r.DeletedNamespacesMirror, "deletedNamespacesGiteaURL", r.DeletedNamespacesGiteaURL, "deletedNamespacesToken", r.DeletedNamespacesToken != "")
	if len(r.AllowedGiteaURLs) == 0 {
		deps.Log.Warn("no allowed Gitea URLs: a RunnerGroup may send its API token to any host but loopback, link-local and metadata addresses; set --allowed-gitea-urls")
	}
	if r.WebhookAddr != "" {
		stop, err := r.serveWebhook(sc, deps)
		if err != nil {
			deps.Log.Error("cannot serve the webhook", "addr", r.WebhookAddr, "error", err)
			return ExitFailed
		}
		defer stop()
	}
	if err := sc.Run(context.Background(), scaler.RunOptions{Loop: r.Loop, Interval: r.Interval}); err != nil {
		return ExitFailed
	}
	return ExitOK
}

// webhookSecret is the secret from the env var or the file, never logged.
func (r *RunCmd) webhookSecret() ([]byte, error) {
	if r.WebhookSecretFile == "" {
		return []byte(r.WebhookSecret), nil
	}
	raw, err := os.ReadFile(r.WebhookSecretFile)
	if err != nil {
		return nil, fmt.Errorf("cannot read --webhook-secret-file: %w", err)
	}
	secret := bytes.TrimSpace(raw)
	if len(secret) == 0 {
		return nil, fmt.Errorf("--webhook-secret-file %s is empty", r.WebhookSecretFile)
	}
	return secret, nil
}

// serveWebhook accepts Gitea's deliveries at POST /webhook on
// --webhook-addr and hands each queued job to the scaler, until stop.
func (r *RunCmd) serveWebhook(sc *scaler.Scaler, deps scaler.Deps) (stop func(), err error) {
	secret, err := r.webhookSecret()
	if err != nil {
		return nil, err
	}
	h := &webhook.Handler{Secret: secret, Trigger: func(j webhook.Job) {
		sc.Trigger(scaler.QueuedJob{Repo: j.Repo, Labels: j.Labels})
	}}
	if o, ok := deps.Observer.(interface{ WebhookDelivery(outcome string) }); ok {
		h.Outcome = o.WebhookDelivery
	}
	ln, err := net.Listen("tcp", r.WebhookAddr)
	if err != nil {
		return nil, err
	}
	ln = webhook.LimitListener(ln, webhook.MaxConns)
	mux := http.NewServeMux()
	mux.Handle("/webhook", h)
	srv := webhook.NewServer(mux)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			deps.Log.Error("webhook endpoint stopped", "error", err)
		}
	}()
	deps.Log.Info("accepting Gitea webhooks", "addr", ln.Addr().String(), "path", "/webhook")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

func newLogger(w io.Writer, format, level string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level)) // kong's enum already checked it
	opts := &slog.HandlerOptions{Level: lv}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// userAgent names this binary and its version in every request it sends,
// to Kubernetes and to Gitea.
func userAgent() string { return "gitea-runner-scaler/" + Version }
