package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/giteaurl"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/metrics"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scaler"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

func parse(t *testing.T, args ...string) (*RunCmd, error) {
	t.Helper()
	var c CLI
	p, err := kong.New(&c, kong.Exit(func(int) { t.Fatal("unexpected exit") }))
	require.NoError(t, err)
	_, err = p.Parse(append([]string{"run"}, args...))
	return &c.Run, err
}

func TestFlagsFromEnvironment(t *testing.T) {
	t.Setenv("SCALER_NAMESPACES", "a, b,a")
	t.Setenv("SCALER_EXCLUDE_SELECTORS", "pool=gpu,tier in (x,y);team")
	t.Setenv("SCALER_DEFAULT_LABELS", "ubuntu-latest:docker://img,linux")
	t.Setenv("SCALER_LOOP", "true")
	t.Setenv("SCALER_INTERVAL", "15s")
	t.Setenv("SCALER_SPAWN_TTL", "2m")
	t.Setenv("SCALER_LOG_FORMAT", "text")

	r, err := parse(t)
	require.NoError(t, err)

	assert.Equal(t, []string{"a", "b"}, r.Namespace)
	assert.Equal(t, []string{"pool=gpu,tier in (x,y)", "team"}, r.ExcludeSelector, "selectors hold commas, so the env var splits on ';'")
	assert.Equal(t, []string{"ubuntu-latest:docker://img", "linux"}, r.DefaultLabels)
	assert.True(t, r.Loop)
	assert.Equal(t, 15*time.Second, r.Interval)
	assert.Equal(t, 2*time.Minute, r.SpawnTTL)
	assert.Equal(t, "text", r.LogFormat)
}

// The chart passes selectors as JSON LabelSelectors; their commas do not
// split the env var, whose separator is ';'.
func TestJSONSelectorsFromEnvironment(t *testing.T) {
	t.Setenv("SCALER_SELECTOR", `{"matchLabels":{"team":"infra"}}`)
	t.Setenv("SCALER_EXCLUDE_SELECTORS", `{"matchExpressions":[{"key":"pool","operator":"In","values":["gpu","arm"]}]};tier=x`)

	r, err := parse(t)
	require.NoError(t, err)

	assert.Equal(t, `{"matchLabels":{"team":"infra"}}`, r.Selector)
	assert.Equal(t, []string{`{"matchExpressions":[{"key":"pool","operator":"In","values":["gpu","arm"]}]}`, "tier=x"}, r.ExcludeSelector)
}

func TestDefaults(t *testing.T) {
	r, err := parse(t)
	require.NoError(t, err)
	assert.Equal(t, "gitea/runner:1.0.8-dind-rootless", r.RunnerImage)
	assert.Empty(t, r.RunnerTemplate, "no runner template")
	assert.Empty(t, r.RunnerTemplatePinned)
	assert.Equal(t, 5*time.Minute, r.SpawnTTL)
	assert.Equal(t, 10*time.Minute, r.AssignmentHold, "the listeners' and why's default is scaler.DefaultAssignmentHold")
	assert.Equal(t, scaler.DefaultAssignmentHold, r.AssignmentHold)
	assert.Equal(t, 10*time.Second, r.GiteaTimeout)
	assert.Equal(t, 30*time.Second, r.Interval)
	assert.EqualValues(t, 600, r.RunnerJobTTL)
	assert.EqualValues(t, runnerjob.DefaultTerminationGracePeriodSeconds, r.RunnerTerminationGracePeriod, "the runner's 3h job timeout and 2 minutes to report")
	assert.Equal(t, 4, r.Workers)
	assert.Equal(t, "json", r.LogFormat)
	assert.Equal(t, "info", r.LogLevel)
	assert.Empty(t, r.Namespace, "all namespaces")
	assert.Equal(t, 30*time.Second, r.GroupTimeout)
	assert.EqualValues(t, gitea.DefaultMaxResponseBytes, r.GiteaMaxResponseBytes)
	assert.InDelta(t, 50, r.KubeQPS, 0)
	assert.Equal(t, 100, r.KubeBurst)
	assert.Equal(t, 4, r.GiteaConcurrency)
	assert.Equal(t, 10*time.Minute, r.RunnerIdleTimeout)
	assert.Equal(t, 10*time.Minute, r.RunnerStartTimeout)
}

func TestLifecycleFlags(t *testing.T) {
	t.Setenv("SCALER_RUNNER_IDLE_TIMEOUT", "0")
	t.Setenv("SCALER_RUNNER_START_TIMEOUT", "90s")
	r, err := parse(t)
	require.NoError(t, err)
	cfg, err := r.scalerConfig()
	require.NoError(t, err)
	assert.Zero(t, cfg.RunnerIdleTimeout, "0 turns idle reaping off")
	assert.Equal(t, 90*time.Second, cfg.RunnerStartTimeout)

	_, err = parse(t, "--runner-start-timeout=-1s")
	require.ErrorContains(t, err, "--runner-start-timeout must be 0 (off) or more")
	_, err = parse(t, "--runner-idle-timeout=-1s")
	require.ErrorContains(t, err, "--runner-idle-timeout must be 0 (off) or more")
}

func TestTenancyFlagsFromEnvironment(t *testing.T) {
	t.Setenv("SCALER_ALLOWED_GITEA_URLS", "https://gitea.example.com, http://127.0.0.1:3000")
	t.Setenv("SCALER_TENANT_CLUSTER_ROLE", "gro-gitea-runner-operator-gitea-runners-tenant")
	t.Setenv("SCALER_SERVICE_ACCOUNT", "gitea-runners:gro-gitea-runner-operator")
	t.Setenv("SCALER_TRUST_UNLABELLED_NAMESPACES", "true")
	r, err := parse(t)
	require.NoError(t, err)
	cfg, err := r.scalerConfig()
	require.NoError(t, err)
	assert.NoError(t, cfg.AllowedGiteaURLs.Check("https://gitea.example.com/sub"))
	assert.NoError(t, cfg.AllowedGiteaURLs.Check("http://127.0.0.1:3000"))
	assert.Error(t, cfg.AllowedGiteaURLs.Check("https://other.example.com"))
	assert.Equal(t, tenancy.Names{TenantClusterRole: "gro-gitea-runner-operator-gitea-runners-tenant", ServiceAccount: "gitea-runners:gro-gitea-runner-operator"}, cfg.Tenancy)
	assert.True(t, cfg.TrustUnlabelledNamespaces)
	assert.False(t, cfg.ClusterWideReads, "off unless the chart grants the reads")
}

func TestClusterWideReadsFlag(t *testing.T) {
	t.Setenv("SCALER_CLUSTER_WIDE_READS", "true")
	r, err := parse(t)
	require.NoError(t, err)
	cfg, err := r.scalerConfig()
	require.NoError(t, err)
	assert.True(t, cfg.ClusterWideReads)
}

// The sweep of deleted namespaces: on with its mirror's namespace/name;
// the platform token needs the Gitea URL it is for, which the allowed
// Gitea URLs must allow; a token without the sweep is refused.
func TestDeletedNamespacesFlags(t *testing.T) {
	t.Setenv("SCALER_DELETED_NAMESPACES_MIRROR", "gitea-runners/gro-registrations")
	t.Setenv("SCALER_DELETED_NAMESPACES_GITEA_URL", "https://gitea.example.com")
	t.Setenv("SCALER_DELETED_NAMESPACES_TOKEN", "pl4tf0rm")
	t.Setenv("SCALER_DELETED_NAMESPACES_PER_PASS", "7")
	r, err := parse(t)
	require.NoError(t, err)
	cfg, err := r.scalerConfig()
	require.NoError(t, err)
	assert.Equal(t, &scaler.DeletedNamespaces{Namespace: "gitea-runners", ConfigMap: "gro-registrations",
		GiteaURL: "https://gitea.example.com", Token: "pl4tf0rm", MaxPerPass: 7}, cfg.DeletedNamespaces)
}

func TestDeletedNamespacesFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{name: "mirror not ns/name", args: []string{"--deleted-namespaces-mirror", "registrations"}, wantErr: "--deleted-namespaces-mirror must be namespace/name"},
		{name: "token without URL", args: []string{"--deleted-namespaces-mirror", "a/b"}, env: map[string]string{"SCALER_DELETED_NAMESPACES_TOKEN": "t"}, wantErr: "--deleted-namespaces-gitea-url"},
		{name: "URL not allowed", args: []string{"--deleted-namespaces-mirror", "a/b", "--deleted-namespaces-gitea-url", "https://other.example.com", "--allowed-gitea-urls", "https://gitea.example.com"}, wantErr: "not allowed"},
		{name: "token without sweep", env: map[string]string{"SCALER_DELETED_NAMESPACES_TOKEN": "t"}, wantErr: "need --deleted-namespaces-mirror"},
		{name: "negative bound", args: []string{"--deleted-namespaces-mirror", "a/b", "--deleted-namespaces-per-pass", "-1"}, wantErr: "--deleted-namespaces-per-pass"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := parse(t, tc.args...)
			require.ErrorContains(t, err, tc.wantErr)
			assert.NotContains(t, err.Error(), "pl4tf0rm")
		})
	}
}

// The real Gitea clients refuse, at dial time, a loopback address that no
// allowed URL names, and reach one that an entry names.
func TestGiteaClientsDialOnlyAllowedSpecialAddresses(t *testing.T) {
	srv := giteatest.New()
	t.Cleanup(srv.Close)
	srv.AddToken("tok", "root", true)

	// snapshot lists the fake Gitea through the client the flags make.
	snapshot := func(args ...string) error {
		r, err := parse(t, args...)
		require.NoError(t, err)
		factory, err := r.giteaFactory(nil)
		require.NoError(t, err)
		c, err := factory(srv.URL, "tok")
		if err != nil {
			return err
		}
		_, err = c.Snapshot(t.Context(), gitea.Target{Scope: gitea.ScopeGlobal})
		return err
	}
	require.ErrorIs(t, snapshot(), giteaurl.ErrNotAllowed, "the fake Gitea is on loopback: refused before a client exists")
	assert.Zero(t, len(srv.Requests()), "nothing was sent")
	assert.NoError(t, snapshot("--allowed-gitea-urls", srv.URL))
}

func TestRobustnessFlagsFromEnvironment(t *testing.T) {
	t.Setenv("SCALER_GROUP_TIMEOUT", "45s")
	t.Setenv("SCALER_GITEA_MAX_RESPONSE_BYTES", "1048576")
	t.Setenv("SCALER_KUBE_QPS", "12.5")
	t.Setenv("SCALER_KUBE_BURST", "25")
	t.Setenv("SCALER_GITEA_CONCURRENCY", "9")

	r, err := parse(t)
	require.NoError(t, err)
	cfg, err := r.scalerConfig()
	require.NoError(t, err)
	assert.Equal(t, 9, cfg.GiteaConcurrency, "the scaler gets the listings' bound")

	assert.Equal(t, 45*time.Second, r.GroupTimeout)
	assert.EqualValues(t, 1<<20, r.GiteaMaxResponseBytes)
	assert.Equal(t, 45*time.Second, cfg.GroupTimeout, "the scaler gets the group timeout")
	assert.InDelta(t, 12.5, r.KubeQPS, 0)
	assert.Equal(t, 25, r.KubeBurst)
}

// The Kubernetes client runs at --kube-qps and --kube-burst, not at
// client-go's default 5 requests/s, which made 500 groups take minutes.
func TestKubeClientRate(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	r, err := parse(t, "--kubeconfig", kubeconfig, "--kube-qps", "75", "--kube-burst", "150")
	require.NoError(t, err)

	cfg, err := r.kubeConfig()

	require.NoError(t, err)
	assert.InDelta(t, 75, cfg.QPS, 0)
	assert.Equal(t, 150, cfg.Burst)
	assert.Equal(t, "gitea-runner-scaler/"+Version, cfg.UserAgent)
}

// The Gitea clients read at most --gitea-max-response-bytes of an answer.
func TestGiteaClientsBoundAnswers(t *testing.T) {
	srv := giteatest.New()
	t.Cleanup(srv.Close)
	srv.AddToken("tok", "root", true)
	srv.InjectFault(3, giteatest.Fault{LargeBody: 100 << 10})
	r, err := parse(t, "--gitea-max-response-bytes", "65536", "--allowed-gitea-urls", srv.URL)
	require.NoError(t, err)
	factory, err := r.giteaFactory(nil)
	require.NoError(t, err)
	c, err := factory(srv.URL, "tok")
	require.NoError(t, err)

	_, err = c.Snapshot(t.Context(), gitea.Target{Scope: gitea.ScopeGlobal})

	require.ErrorIs(t, err, gitea.ErrBadResponse)
	assert.ErrorContains(t, err, "response larger than 65536 bytes")
}

func TestBadFlagsExitWithUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{name: "unknown flag", args: []string{"--nope"}, want: "unknown flag --nope"},
		{name: "bad log format", args: []string{"--log-format", "xml"}, want: "--log-format must be one of"},
		{name: "bad duration", args: []string{"--spawn-ttl", "soon"}, want: "--spawn-ttl"},
		{name: "zero spawn ttl", args: []string{"--spawn-ttl", "0s"}, want: "--spawn-ttl must be positive"},
		{name: "zero assignment hold", args: []string{"--assignment-hold", "0s"}, want: "--assignment-hold must be positive"},
		{name: "zero interval with loop", args: []string{"--loop", "--interval", "0s"}, want: "--interval must be positive"},
		{name: "workers", args: []string{"--workers", "0"}, want: "--workers must be between 1 and 64"},
		{name: "selector", args: []string{"--selector", "a in ("}, want: `--selector "a in ("`},
		{name: "empty exclude selector", args: []string{"--exclude-selector", " "}, want: "would exclude every RunnerGroup"},
		{name: "JSON exclude selector selecting everything", env: map[string]string{"SCALER_EXCLUDE_SELECTORS": "pool=gpu;{}"}, want: `--exclude-selector "{}": would exclude every RunnerGroup`},
		{name: "misspelt JSON selector", args: []string{"--selector", `{"matchLabel":{"a":"b"}}`}, want: `--selector "{\"matchLabel\":{\"a\":\"b\"}}": invalid JSON label selector`},
		{name: "bad default label", args: []string{"--default-labels", "has space"}, want: `invalid label "has space"`},
		{name: "bad env value", env: map[string]string{"SCALER_WORKERS": "many"}, want: "--workers"},
		{name: "negative job ttl", args: []string{"--runner-job-ttl=-1"}, want: "--runner-job-ttl must be 0 or more"},
		{name: "no termination grace", env: map[string]string{"SCALER_RUNNER_TERMINATION_GRACE_PERIOD": "0"},
			want: "--runner-termination-grace-period must be at least 1 second, got 0: a runner pod killed at once cannot report its job to Gitea"},
		{name: "group timeout not above the Gitea timeout", args: []string{"--group-timeout", "10s", "--gitea-timeout", "10s"},
			want: "--group-timeout (10s) must be longer than --gitea-timeout (10s)"},
		{name: "group timeout from env below the Gitea timeout", env: map[string]string{"SCALER_GITEA_TIMEOUT": "1m"},
			want: "--group-timeout (30s) must be longer than --gitea-timeout (1m0s)"},
		{name: "small response limit", args: []string{"--gitea-max-response-bytes", "1000"}, want: "--gitea-max-response-bytes must be at least 65536, got 1000"},
		{name: "zero QPS", args: []string{"--kube-qps", "0"}, want: "--kube-qps must be positive, got 0"},
		{name: "metrics without a loop", args: []string{"--metrics-addr", ":9090"}, want: "--metrics-addr needs --loop"},
		{name: "health without a loop", args: []string{"--health-addr", ":8081"}, want: "--health-addr needs --loop"},
		{name: "healthz judged on one interval", args: []string{"--loop", "--healthz-stale-intervals", "1"}, want: "--healthz-stale-intervals must be at least 2, got 1"},
		{name: "no Gitea listing at once", args: []string{"--gitea-concurrency", "0"}, want: "--gitea-concurrency must be between 1 and 64, got 0"},
		{name: "too many Gitea listings at once from env", env: map[string]string{"SCALER_GITEA_CONCURRENCY": "65"}, want: "--gitea-concurrency must be between 1 and 64, got 65"},
		{name: "negative QPS from env", env: map[string]string{"SCALER_KUBE_QPS": "-1"}, want: "--kube-qps must be positive, got -1"},
		{name: "burst below 1", args: []string{"--kube-burst", "0"}, want: "--kube-burst must be at least 1, got 0"},
		{name: "allowed Gitea URL without a scheme", env: map[string]string{"SCALER_ALLOWED_GITEA_URLS": "https://ok.example.com,gitea.example.com"},
			want: `--allowed-gitea-urls: allowed Gitea URL "gitea.example.com": scheme must be http or https`},
		{name: "allowed Gitea URL with credentials", args: []string{"--allowed-gitea-urls", "https://u:secretpw@gitea.example.com"}, want: "must not carry credentials"},
		{name: "service account without its namespace", args: []string{"--service-account", "scaler"}, want: `--service-account must be namespace:name, got "scaler"`},
		{name: "missing runner template", args: []string{"--runner-template", "/nonexistent/runner.yaml"}, want: "--runner-template: open /nonexistent/runner.yaml"},
		{name: "runner template with a misplaced key", env: map[string]string{"SCALER_RUNNER_TEMPLATE": writeFile(t, "spec:\n  containers:\n  - name: runner\n    tolerations: []\n")},
			want: `not a pod template (metadata, spec): error unmarshaling JSON: while decoding JSON: json: unknown field "tolerations"`},
		{name: "runner template that sets reserved env", env: map[string]string{"SCALER_RUNNER_TEMPLATE": writeFile(t, "spec:\n  containers:\n  - name: runner\n    env:\n    - name: GITEA_RUNNER_LABELS\n      value: x\n")},
			want: `env GITEA_RUNNER_LABELS in container "runner" is reserved`},
		{name: "runner template over the runner's state", env: map[string]string{"SCALER_RUNNER_TEMPLATE": writeFile(t, "spec:\n  containers:\n  - name: runner\n    volumeMounts:\n    - name: x\n      mountPath: /data\n")},
			want: "would keep act_runner's state file"},
		{name: "runner config with a typo", env: map[string]string{"SCALER_RUNNER_CONFIG_DEFAULTS": "runner:\n  fetch_intervall: 1s\n"}, want: `--runner-config-defaults: json: unknown field "fetch_intervall"`},
		{name: "pinned runner config that the scaler owns", env: map[string]string{"SCALER_RUNNER_CONFIG_PINNED": `{"runner":{"capacity":3}}`}, want: "--runner-config-pinned.runner.capacity must be 1"},
		{name: "runner cache URL without a scheme", args: []string{"--runner-cache-url", "cache.{namespace}.svc:8088"}, want: `--runner-cache-url "cache.{namespace}.svc:8088": must be an http or https URL`},
		{name: "runner cache URL with credentials", args: []string{"--runner-cache-url", "http://u:p@cache:8088/"}, want: "--runner-cache-url must not carry credentials"},
		{name: "runner cache without its config image", args: []string{"--runner-cache-url", "http://cache.{namespace}.svc:8088/", "--runner-config-image", ""}, want: "--runner-cache-url needs --runner-config-image"},
		{name: "runner cache Secret that is no name", args: []string{"--runner-cache-url", "http://cache:8088/", "--runner-cache-secret-name", "Not_A_Name"}, want: `--runner-cache-secret-name "Not_A_Name" is not a Secret name`},
		{name: "unknown pinned field", env: map[string]string{"SCALER_RUNNER_TEMPLATE_PINNED": "spec.runtimeClassName,spec.nodeSelectors"}, want: `--runner-template-pinned: pinned field "spec.nodeSelectors": the pod spec has no field "nodeSelectors"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var out, errb bytes.Buffer
			code := Main(append([]string{"run"}, tt.args...), IO{Out: &out, Err: &errb})
			assert.Equal(t, ExitUsage, code)
			assert.Contains(t, errb.String(), tt.want)
		})
	}
}

// A command line with errors in several groups of flags gets them all in
// one answer, not one group per attempt.
func TestBadFlagsOfSeveralGroupsAreReportedTogether(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main([]string{"run", "--spawn-ttl", "0s", "--kube-qps", "0", "--webhook-addr", ":8080", "--runner-cache-url", "x",
		"--group-timeout", "1s"}, IO{Out: &out, Err: &errb})
	assert.Equal(t, ExitUsage, code)
	for _, want := range []string{
		"--spawn-ttl must be positive",
		"--kube-qps must be positive",
		"--webhook-addr needs --loop",
		"--webhook-addr needs a secret",
		"--runner-cache-url \"x\": must be an http or https URL",
		"--group-timeout (1s) must be longer than --gitea-timeout (10s)",
	} {
		assert.Contains(t, errb.String(), want)
	}
}

// writeFile writes content to a file in a fresh temporary directory and
// returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "file.yaml")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// The chart mounts runnerTemplate as a file and names it and the pinned
// fields in the environment; the scaler reads both into its runner
// options.
func TestRunnerTemplateFlags(t *testing.T) {
	t.Setenv("SCALER_RUNNER_TEMPLATE", writeFile(t, `
metadata:
  labels:
    tier: ci
spec:
  runtimeClassName: sysbox-runc
  imagePullSecrets:
  - name: mirror
  containers:
  - name: runner
    image: mirror.example.com/act_runner:0.2.13-dind-rootless
`))
	t.Setenv("SCALER_RUNNER_TEMPLATE_PINNED", "spec.runtimeClassName,runner.image")
	r, err := parse(t)
	require.NoError(t, err)
	cfg, err := r.scalerConfig()
	require.NoError(t, err)
	require.NotNil(t, cfg.Runner.Template)
	assert.Equal(t, "sysbox-runc", *cfg.Runner.Template.Spec.RuntimeClassName)
	assert.Equal(t, "ci", cfg.Runner.Template.Labels["tier"])
	assert.Equal(t, "mirror.example.com/act_runner:0.2.13-dind-rootless", cfg.Runner.Template.Spec.Containers[0].Image)
	assert.Equal(t, []string{"spec.runtimeClassName", "runner.image"}, []string(cfg.Runner.Pinned))
}

// The chart passes runnerConfig.defaults and runnerConfig.pinned as JSON in
// the environment; the scaler reads both into its runner options.
func TestRunnerConfigFlags(t *testing.T) {
	t.Setenv("SCALER_RUNNER_CONFIG_DEFAULTS", `{"runner":{"fetch_interval":"500ms","envs":{"HTTP_PROXY":"http://proxy"}}}`)
	t.Setenv("SCALER_RUNNER_CONFIG_PINNED", "container:\n  docker_host: '-'\n")
	r, err := parse(t)
	require.NoError(t, err)
	cfg, err := r.scalerConfig()
	require.NoError(t, err)
	require.NotNil(t, cfg.Runner.Config.Defaults)
	assert.Equal(t, "500ms", *cfg.Runner.Config.Defaults.Runner.FetchInterval)
	assert.Equal(t, map[string]string{"HTTP_PROXY": "http://proxy"}, cfg.Runner.Config.Defaults.Runner.Envs)
	require.NotNil(t, cfg.Runner.Config.Pinned)
	assert.Equal(t, "-", *cfg.Runner.Config.Pinned.Container.DockerHost)
}

// TestRunnerCacheFlags: the chart's runnerCache reaches the runner
// options; a URL without a trailing slash gets one, since the runner hands
// it to jobs as ACTIONS_CACHE_URL, to which the cache client appends
// "_apis/...".
func TestRunnerCacheFlags(t *testing.T) {
	t.Setenv("SCALER_RUNNER_CACHE_URL", "http://gitea-runner-cache.{namespace}.svc:8088")
	t.Setenv("SCALER_RUNNER_CONFIG_IMAGE", "ghcr.io/x/gitea-runner-scaler:1")
	r, err := parse(t)
	require.NoError(t, err)
	cfg, err := r.scalerConfig()
	require.NoError(t, err)
	assert.Equal(t, "http://gitea-runner-cache.{namespace}.svc:8088/", cfg.Runner.Cache.URL)
	assert.Equal(t, "gitea-runner-cache", cfg.Runner.Cache.SecretName)
	assert.Equal(t, "ghcr.io/x/gitea-runner-scaler:1", cfg.Runner.Cache.Image)
}

// TestRenderRunnerConfig is the runner pod's init container: the rendered
// ConfigMap plus the secret from its env, written where CONFIG_FILE points;
// the secret is never printed.
func TestRenderRunnerConfig(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.yaml")
	out := filepath.Join(dir, "out", "config.yaml")
	require.NoError(t, os.Mkdir(filepath.Dir(out), 0o755))
	require.NoError(t, os.WriteFile(in, []byte("runner:\n  capacity: 1\ncache:\n  enabled: true\n  external_server: http://c:8088/\n"), 0o644))
	t.Setenv("GITEA_RUNNER_CONFIG_TEMPLATE", in)
	t.Setenv("GITEA_RUNNER_CONFIG_OUT", out)

	t.Run("with the secret", func(t *testing.T) {
		t.Setenv("GITEA_RUNNER_CACHE_SECRET", "hunter2")
		var stdout, stderr bytes.Buffer
		require.Equal(t, ExitOK, Main([]string{"render-runner-config"}, IO{Out: &stdout, Err: &stderr}), stderr.String())
		got, err := os.ReadFile(out)
		require.NoError(t, err)
		assert.Contains(t, string(got), "external_secret: hunter2")
		assert.Contains(t, string(got), "external_server: http://c:8088/")
		assert.NotContains(t, stdout.String()+stderr.String(), "hunter2")
		assert.Contains(t, stderr.String(), "shared cache on")
	})
	t.Run("without it", func(t *testing.T) {
		t.Setenv("GITEA_RUNNER_CACHE_SECRET", "")
		var stdout, stderr bytes.Buffer
		require.Equal(t, ExitOK, Main([]string{"render-runner-config"}, IO{Out: &stdout, Err: &stderr}), stderr.String())
		got, err := os.ReadFile(out)
		require.NoError(t, err)
		assert.Contains(t, string(got), "enabled: false")
		assert.NotContains(t, string(got), "external_server")
		assert.Contains(t, stderr.String(), "shared cache off")
	})
	t.Run("a template that is not there", func(t *testing.T) {
		t.Setenv("GITEA_RUNNER_CONFIG_TEMPLATE", filepath.Join(dir, "missing.yaml"))
		var stdout, stderr bytes.Buffer
		assert.Equal(t, ExitFailed, Main([]string{"render-runner-config"}, IO{Out: &stdout, Err: &stderr}))
		assert.Contains(t, stderr.String(), "missing.yaml")
	})
}

func TestVersionAndHelp(t *testing.T) {
	var out bytes.Buffer
	assert.Equal(t, ExitOK, Main([]string{"version"}, IO{Out: &out, Err: &out}))
	assert.Equal(t, Version+"\n", out.String())
	out.Reset()
	assert.Equal(t, ExitOK, Main([]string{"run", "--help"}, IO{Out: &out, Err: &out}))
	assert.Contains(t, out.String(), "--exclude-selector")
}

// Every flag can come from the environment (that is how the chart sets
// them), and the chart ignores exactly those names in a listenerTemplate.
// The chart reads its list from files/reserved-env.txt; this test fails when
// a flag is added here without its env var being listed there, or the file
// lists a name no flag has.
func TestChartReservedEnvMatchesScalerFlags(t *testing.T) {
	var flagEnv []string
	var walk func(typ reflect.Type)
	walk = func(typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			switch _, embedded := f.Tag.Lookup("embed"); {
			case !f.IsExported():
				continue // not a flag
			case f.Type == reflect.TypeOf(KubeFlags{}):
				// client-go's loading rules read KUBECONFIG; --context is
				// for a terminal (kubectl has no variable for it either),
				// never for the chart.
				flagEnv = append(flagEnv, "KUBECONFIG")
			case embedded:
				walk(f.Type) // a group of flags
			default:
				env := f.Tag.Get("env")
				require.NotEmpty(t, env, "flag %s has no env var", f.Name)
				flagEnv = append(flagEnv, env)
			}
		}
	}
	walk(reflect.TypeOf(RunCmd{}))

	// The file's format, as the chart reads it: one name per line; blank
	// lines and lines starting with # are ignored.
	f, err := os.Open("../../charts/gitea-runner-operator/files/reserved-env.txt")
	require.NoError(t, err)
	defer f.Close()
	var reserved []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			reserved = append(reserved, line)
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, reserved)
	sort.Strings(flagEnv)
	sort.Strings(reserved)
	assert.Equal(t, flagEnv, reserved)
}

// A run returns ExitFailed when a group failed, so the CronJob's Job shows
// as failed, and ExitOK when every group was served.
func TestRunExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		giteaErr error
		want     int
	}{
		{name: "all groups served", want: ExitOK},
		{name: "a group failed", giteaErr: &gitea.APIError{Kind: gitea.ErrServer, URL: "/x", Status: 502}, want: ExitFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube, groups := oneGlobalGroup()
			factory := func(string, string) (gitea.Client, error) { return fixedGitea{tc.giteaErr}, nil }
			r, err := parse(t)
			require.NoError(t, err)
			var out bytes.Buffer
			code := r.runWith(scaler.Deps{Kube: kube, Groups: groups, Gitea: factory, Log: slog.New(slog.NewTextHandler(&out, nil)), Out: &out})
			assert.Equal(t, tc.want, code, out.String())
		})
	}
}

type staticGroups []v1alpha1.RunnerGroup

// oneGlobalGroup is a cluster with one valid global RunnerGroup and its Secret.
func oneGlobalGroup() (*fake.Clientset, staticGroups) {
	kube := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{tenancy.LabelEnforce: tenancy.LevelPrivileged}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Labels: map[string]string{tenancy.SecretLabel: "true"},
			Annotations: map[string]string{tenancy.AnnotationRegistrationKeys: "reg", tenancy.AnnotationAPIKeys: "k"}},
			Data: map[string][]byte{"k": []byte("tok"), "reg": []byte("reg-tok")}},
	)
	// The namespace is enabled: the scaler may do anything there.
	kube.PrependReactor("create", "selfsubjectrulesreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		rr := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectRulesReview).DeepCopy()
		rr.Status.ResourceRules = []authorizationv1.ResourceRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}
		return true, rr, nil
	})
	return kube, staticGroups{{
		ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ns", UID: "u"},
		Spec: v1alpha1.RunnerGroupSpec{
			Scope: v1alpha1.ScopeGlobal, Gitea: v1alpha1.GiteaSpec{URL: "http://gitea.test:1"}, MaxActiveRunners: 1,
			RegistrationToken: &v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "s", Key: "reg"}},
			AuthToken:         v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "s", Key: "k"}},
		},
	}}
}

func (s staticGroups) List(context.Context, string, string) ([]v1alpha1.RunnerGroup, []runnergroups.Broken, error) {
	return s, nil, nil
}
func (staticGroups) PatchStatus(context.Context, *v1alpha1.RunnerGroup) error { return nil }

type fixedGitea struct{ err error }

func (f fixedGitea) Snapshot(context.Context, gitea.Target) (gitea.Snapshot, error) {
	if f.err != nil {
		return gitea.Snapshot{}, f.err
	}
	return gitea.Snapshot{}, nil
}

// countingGitea sends SIGTERM to the process during the first pass and
// makes that pass outlast the interval, so when it ends both the stop and
// the next tick are due.
type countingGitea struct {
	calls atomic.Int32
}

func (c *countingGitea) Snapshot(context.Context, gitea.Target) (gitea.Snapshot, error) {
	if c.calls.Add(1) == 1 {
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		time.Sleep(100 * time.Millisecond)
	}
	return gitea.Snapshot{}, nil
}

// Regression (found end to end): with --loop, a SIGTERM during a pass
// longer than --interval could start one more pass. This runs it with the
// flags and a real signal; internal/scaler's loop tests cover the rest.
func TestLoopStopsAfterThePassInFlight(t *testing.T) {
	for round := range 5 {
		kube, groups := oneGlobalGroup()
		g := &countingGitea{}
		r, err := parse(t, "--loop", "--interval", "10ms")
		require.NoError(t, err)
		var out bytes.Buffer
		code := r.runWith(scaler.Deps{Kube: kube, Groups: groups, Gitea: func(string, string) (gitea.Client, error) { return g, nil },
			Log: slog.New(slog.NewTextHandler(&out, nil)), Out: &out})
		assert.Equal(t, ExitOK, code)
		assert.EqualValues(t, 1, g.calls.Load(), "round %d: a pass started after SIGTERM", round)
	}
}

// In loop mode the metrics are served at /metrics on --metrics-addr, and
// stop with the scaler.
func TestServeMetrics(t *testing.T) {
	r, err := parse(t, "--loop", "--metrics-addr", "127.0.0.1:0")
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:0", r.MetricsAddr)

	m := metrics.New()
	m.ObservePass(passreport.Summary{Created: 2}, time.Second, nil)
	logs := &bytes.Buffer{}
	stop, err := serveMetrics("127.0.0.1:0", m, newLogger(logs, "json", "info"))
	require.NoError(t, err)
	var line struct{ Addr string }
	require.NoError(t, json.Unmarshal([]byte(strings.Split(logs.String(), "\n")[0]), &line))
	resp, err := http.Get("http://" + line.Addr + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), "gitea_runner_scaler_runners_created_total 2")

	stop()
	_, err = http.Get("http://" + line.Addr + "/metrics")
	assert.Error(t, err, "stopped")
}

// In loop mode /healthz is served on --health-addr: 200 while passes end,
// 503 once none has for --healthz-stale-intervals intervals and a group's
// timeout.
func TestServeHealth(t *testing.T) {
	r, err := parse(t, "--loop", "--interval", "2s", "--health-addr", "127.0.0.1:0", "--healthz-stale-intervals", "4")
	require.NoError(t, err, "an interval far below --group-timeout is fine")
	assert.Equal(t, 8*time.Second+30*time.Second, r.healthzStale(), "4 intervals and one group's timeout")

	m := metrics.New()
	logs := &bytes.Buffer{}
	get := func(stale time.Duration) int {
		logs.Reset()
		stop, err := serveHealth("127.0.0.1:0", m, stale, newLogger(logs, "json", "info"))
		require.NoError(t, err)
		defer stop()
		var line struct{ Addr, Path string }
		require.NoError(t, json.Unmarshal([]byte(strings.Split(logs.String(), "\n")[0]), &line))
		assert.Equal(t, "/healthz", line.Path)
		resp, err := http.Get("http://" + line.Addr + "/healthz")
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, get(time.Hour), "within the limit since the start")
	assert.Equal(t, http.StatusServiceUnavailable, get(-time.Second), "past the limit, no pass ended")
}

func TestWebhookFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(file, []byte("  from-file\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantErr    string
		wantSecret string
		secretErr  string
	}{
		{name: "secret from the env", args: []string{"--loop", "--webhook-addr", ":8080"}, env: map[string]string{"SCALER_WEBHOOK_SECRET": "s3"}, wantSecret: "s3"},
		{name: "secret from a file, trimmed", args: []string{"--loop", "--webhook-addr", ":8080", "--webhook-secret-file", file}, wantSecret: "from-file"},
		{name: "an empty file", args: []string{"--loop", "--webhook-addr", ":8080", "--webhook-secret-file", empty}, secretErr: "is empty"},
		{name: "a missing file", args: []string{"--loop", "--webhook-addr", ":8080", "--webhook-secret-file", filepath.Join(dir, "nope")}, secretErr: "cannot read --webhook-secret-file"},
		{name: "no secret", args: []string{"--loop", "--webhook-addr", ":8080"}, wantErr: "--webhook-addr needs a secret"},
		{name: "two secrets", args: []string{"--loop", "--webhook-addr", ":8080", "--webhook-secret-file", file}, env: map[string]string{"SCALER_WEBHOOK_SECRET": "s3"}, wantErr: "give the webhook secret once"},
		{name: "no loop", args: []string{"--webhook-addr", ":8080"}, env: map[string]string{"SCALER_WEBHOOK_SECRET": "s3"}, wantErr: "--webhook-addr needs --loop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			r, err := parse(t, tt.args...)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			secret, err := r.webhookSecret()
			if tt.secretErr != "" {
				require.ErrorContains(t, err, tt.secretErr)
				assert.NotContains(t, err.Error(), "from-file")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantSecret, string(secret))
		})
	}
}

// pacedGitea counts passes and answers with nothing queued.
type pacedGitea struct{ calls atomic.Int32 }

func (p *pacedGitea) Snapshot(context.Context, gitea.Target) (gitea.Snapshot, error) {
	p.calls.Add(1)
	return gitea.Snapshot{}, nil
}

// A recorded queued delivery, signed with the hook's secret, starts a pass
// of a looping scaler at once; one with a wrong signature gets 401 and
// starts none. The deliveries are counted by outcome.
func TestWebhookTriggersAPass(t *testing.T) {
	raw, err := os.ReadFile("../webhook/testdata/webhook-workflow-job-queued.json")
	require.NoError(t, err)
	var rec struct {
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	}
	require.NoError(t, json.Unmarshal(raw, &rec))
	t.Setenv("SCALER_WEBHOOK_SECRET", "fixture-secret")
	r, err := parse(t, "--loop", "--interval", "1h", "--webhook-addr", "127.0.0.1:0")
	require.NoError(t, err)

	kube, groups := oneGlobalGroup()
	g := &pacedGitea{}
	m := metrics.New()
	logs := &lockedLog{}
	done := make(chan int, 1)
	go func() {
		done <- r.runWith(scaler.Deps{Kube: kube, Groups: groups, Gitea: func(string, string) (gitea.Client, error) { return g, nil },
			Log: slog.New(slog.NewJSONHandler(logs, nil)), Observer: m})
	}()
	addr := ""
	for deadline := time.Now().Add(5 * time.Second); addr == "" || g.calls.Load() < 1; time.Sleep(5 * time.Millisecond) {
		require.False(t, time.Now().After(deadline), "the webhook endpoint and the first pass")
		for _, l := range strings.Split(logs.String(), "\n") {
			var line struct{ Msg, Addr string }
			if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "accepting Gitea webhooks" {
				addr = line.Addr
			}
		}
	}
	post := func(sig string) int {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/webhook", strings.NewReader(rec.Body))
		require.NoError(t, err)
		for k, v := range rec.Headers {
			req.Header.Set(k, v)
		}
		req.Header.Set("X-Gitea-Signature", sig)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}

	assert.Equal(t, http.StatusUnauthorized, post(strings.Repeat("0", 64)))
	time.Sleep(300 * time.Millisecond)
	assert.EqualValues(t, 1, g.calls.Load(), "no pass for a delivery that is not signed by the secret")
	assert.Equal(t, http.StatusAccepted, post(rec.Headers["X-Gitea-Signature"]))
	for deadline := time.Now().Add(5 * time.Second); g.calls.Load() < 2; time.Sleep(5 * time.Millisecond) {
		require.False(t, time.Now().After(deadline), "a pass triggered by the delivery")
	}

	_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	select {
	case code := <-done:
		assert.Equal(t, ExitOK, code)
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not stop")
	}
	assert.NotContains(t, logs.String(), "fixture-secret", "the secret is never logged")
	var body strings.Builder
	resp := httptest.NewRecorder()
	m.Handler().ServeHTTP(resp, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body.WriteString(resp.Body.String())
	assert.Contains(t, body.String(), `gitea_runner_scaler_webhook_deliveries_total{outcome="triggered"} 1`)
	assert.Contains(t, body.String(), `gitea_runner_scaler_webhook_deliveries_total{outcome="unauthorized"} 1`)
}

type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The new groups a pass serves follow --kube-qps: their first writes take
// about 30 s at any rate.
func TestNewGroupsPerPassFollowsTheKubeRate(t *testing.T) {
	tests := []struct {
		args []string
		want int
	}{
		{nil, 1500},
		{[]string{"--kube-qps", "200"}, 6000},
		{[]string{"--kube-qps", "0.01"}, 1},
	}
	for _, tt := range tests {
		r, err := parse(t, tt.args...)
		require.NoError(t, err)
		cfg, err := r.scalerConfig()
		require.NoError(t, err)
		assert.Equal(t, tt.want, cfg.NewGroupsPerPass, "%v", tt.args)
	}
}
