package cli

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/assign"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// parseCLI parses args as Main would, without running anything.
func parseCLI(t *testing.T, args ...string) (*CLI, error) {
	t.Helper()
	var c CLI
	p, err := kong.New(&c, kong.Exit(func(int) { t.Fatal("unexpected exit") }))
	require.NoError(t, err)
	_, err = p.Parse(args)
	return &c, err
}

func parse(t *testing.T, args ...string) (*RunCmd, error) {
	t.Helper()
	c, err := parseCLI(t, append([]string{"run"}, args...)...)
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
	assert.Equal(t, "gitea/runner:3.1.0-dind-rootless", r.RunnerImage)
	assert.Empty(t, r.RunnerTemplate, "no runner template")
	assert.Empty(t, r.RunnerTemplatePinned)
	assert.Equal(t, 5*time.Minute, r.SpawnTTL)
	assert.Equal(t, 10*time.Minute, r.AssignmentHold, "the listeners' and why's default is assign.DefaultHold")
	assert.Equal(t, assign.DefaultHold, r.AssignmentHold)
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
	assert.InDelta(t, 200, r.KubeQPS, 0)
	assert.Equal(t, 400, r.KubeBurst)
	assert.Equal(t, 4, r.GiteaConcurrency)
	assert.Equal(t, 10*time.Minute, r.RunnerIdleTimeout)
	assert.Equal(t, 10*time.Minute, r.RunnerStartTimeout)
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
		{name: "registration checks not ns/name", args: []string{"--registration-checks", "checks"}, want: "--registration-checks must be namespace/name"},
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
		{name: "unknown default flavour", args: []string{"--default-flavour", "Host"}, want: "--default-flavour"},
		{name: "default flavour not set up", env: map[string]string{"SCALER_DEFAULT_FLAVOUR": "UserNamespaced"}, want: "--default-flavour UserNamespaced needs --user-namespaced-runner-image"},
		{name: "user-namespaced image without a tun resource", args: []string{"--user-namespaced-runner-image", "runner:userns"}, want: "--user-namespaced-runner-image needs --user-namespaced-tun-resource"},
		{name: "tun resource without the image", env: map[string]string{"SCALER_USER_NAMESPACED_TUN_RESOURCE": "squat.ai/tun"}, want: "--user-namespaced-tun-resource is set without --user-namespaced-runner-image"},
		{name: "tun resource without a domain", args: []string{"--user-namespaced-runner-image", "runner:userns", "--user-namespaced-tun-resource", "tun"}, want: `--user-namespaced-tun-resource "tun" is not an extended resource name`},
		{name: "tun resource in kubernetes.io", args: []string{"--user-namespaced-runner-image", "runner:userns", "--user-namespaced-tun-resource", "kubernetes.io/tun"}, want: `--user-namespaced-tun-resource "kubernetes.io/tun" is not an extended resource name`},
		{name: "seccomp profile above the kubelet's folder", args: []string{"--user-namespaced-runner-image", "runner:userns", "--user-namespaced-tun-resource", "squat.ai/tun", "--user-namespaced-seccomp-profile", "../x.json"}, want: `--user-namespaced-seccomp-profile "../x.json" must be a path relative to the kubelet's seccomp folder`},
		{name: "absolute seccomp profile", args: []string{"--user-namespaced-runner-image", "runner:userns", "--user-namespaced-tun-resource", "squat.ai/tun", "--user-namespaced-seccomp-profile", "/x.json"}, want: `--user-namespaced-seccomp-profile "/x.json" must be a path relative`},
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

func TestVersionAndHelp(t *testing.T) {
	var out bytes.Buffer
	assert.Equal(t, ExitOK, Main([]string{"version"}, IO{Out: &out, Err: &out}))
	assert.Equal(t, version()+"\n", out.String())
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

// The UserNamespaced flavour's flags reach the runner Jobs' settings;
// without them the flavour is not set up.
func TestUserNamespacedRunnerFlags(t *testing.T) {
	r, err := parse(t)
	require.NoError(t, err)
	cfg, err := r.scalerConfig()
	require.NoError(t, err)
	assert.False(t, cfg.Runner.UserNamespaced.Enabled(), "off by default")

	t.Setenv("SCALER_USER_NAMESPACED_RUNNER_IMAGE", "registry.example.com/runner:userns")
	t.Setenv("SCALER_USER_NAMESPACED_TUN_RESOURCE", "squat.ai/tun")
	r, err = parse(t, "--user-namespaced-seccomp-profile", "profiles/rootless-dind.json")
	require.NoError(t, err)
	cfg, err = r.scalerConfig()
	require.NoError(t, err)
	assert.Equal(t, runnerjob.UserNamespacedPod{
		Image:          "registry.example.com/runner:userns",
		SeccompProfile: "profiles/rootless-dind.json",
		TunResource:    "squat.ai/tun",
	}, cfg.Runner.UserNamespaced)
	assert.Equal(t, v1alpha1.FlavourAuto, cfg.Runner.DefaultFlavour)
	assert.False(t, cfg.Runner.FlavourPinned)

	t.Setenv("SCALER_DEFAULT_FLAVOUR", "UserNamespaced")
	t.Setenv("SCALER_FLAVOUR_PINNED", "true")
	r, err = parse(t)
	require.NoError(t, err)
	cfg, err = r.scalerConfig()
	require.NoError(t, err)
	assert.Equal(t, v1alpha1.FlavourUserNamespaced, cfg.Runner.DefaultFlavour)
	assert.True(t, cfg.Runner.FlavourPinned)
}
