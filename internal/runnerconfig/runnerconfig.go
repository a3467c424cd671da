// Package runnerconfig renders the config.yaml of a group's runners
// (gitea/runner's CONFIG_FILE) from three layers, one written rule per
// field, and says what of it a namespace's Pod Security level does not
// allow.
//
// The layers, each merged over the one before by Merge:
//
//	the chart's runnerConfig.defaults < the group's spec.runnerConfig < the chart's runnerConfig.pinned
//
// The rules (the README's "Runner configuration" section has the same
// table):
//
//   - every scalar (a string, a bool, a duration) a later layer sets
//     replaces the earlier value;
//   - runner.envs is merged name by name, the later layer's value winning;
//   - container.valid_volumes is a list and is replaced whole;
//   - a group may not set a field that runnerConfig.pinned sets (for
//     runner.envs: a name that pinned sets): CheckGroup says which.
//
// Then Render adds what the scaler owns and no layer may set: runner.capacity
// 1, runner.shutdown_timeout from the runner pod's grace period
// (ShutdownTimeout), and the cache section. runner.file and runner.labels
// are left to the runner: its registration lives in its container and its
// labels come from GITEA_RUNNER_LABELS (the group's spec.labels).
package runnerconfig

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// Layers are the platform's parts of every group's runner config, from the
// chart.
type Layers struct {
	// Defaults are merged under each group's spec.runnerConfig.
	Defaults *v1alpha1.RunnerConfig
	// Pinned are merged over it; a group may not set these fields.
	Pinned *v1alpha1.RunnerConfig
}

// Merge returns the config of the three layers by the package's rules.
// None of its arguments is changed.
func Merge(defaults, group, pinned *v1alpha1.RunnerConfig) v1alpha1.RunnerConfig {
	var out v1alpha1.RunnerConfig
	for _, layer := range []*v1alpha1.RunnerConfig{defaults, group, pinned} {
		if layer == nil {
			continue
		}
		if l := layer.Log; l != nil {
			if out.Log == nil {
				out.Log = &v1alpha1.RunnerLogConfig{}
			}
			set(&out.Log.Level, l.Level)
		}
		if r := layer.Runner; r != nil {
			if out.Runner == nil {
				out.Runner = &v1alpha1.RunnerRunnerConfig{}
			}
			o := out.Runner
			if r.Envs != nil {
				if o.Envs == nil {
					o.Envs = map[string]string{}
				}
				maps.Copy(o.Envs, r.Envs)
			}
			set(&o.Timeout, r.Timeout)
			set(&o.Insecure, r.Insecure)
			set(&o.FetchTimeout, r.FetchTimeout)
			set(&o.FetchInterval, r.FetchInterval)
			set(&o.FetchIntervalMax, r.FetchIntervalMax)
			set(&o.GithubMirror, r.GithubMirror)
		}
		if c := layer.Container; c != nil {
			if out.Container == nil {
				out.Container = &v1alpha1.RunnerContainerConfig{}
			}
			o := out.Container
			set(&o.Network, c.Network)
			set(&o.Privileged, c.Privileged)
			set(&o.Options, c.Options)
			if c.ValidVolumes != nil {
				o.ValidVolumes = slices.Clone(c.ValidVolumes)
			}
			set(&o.DockerHost, c.DockerHost)
			set(&o.ForcePull, c.ForcePull)
			set(&o.RequireDocker, c.RequireDocker)
			set(&o.DockerTimeout, c.DockerTimeout)
		}
	}
	return out
}

// set copies a later layer's value when it sets one.
func set[T any](dst **T, src *T) {
	if src != nil {
		v := *src
		*dst = &v
	}
}

// CheckReserved reports what a layer sets that the scaler owns. The CRD
// refuses the same for a group at admission; this holds for the chart's
// layers and for groups admitted under an older CRD.
func CheckReserved(c *v1alpha1.RunnerConfig, prefix string) error {
	if c == nil {
		return nil
	}
	var errs []error
	if c.Cache != nil {
		errs = append(errs, fmt.Errorf("%scache is owned by the scaler", prefix))
	}
	if r := c.Runner; r != nil {
		if r.File != nil {
			errs = append(errs, fmt.Errorf("%srunner.file is owned by the scaler: the runner's registration lives in its own container", prefix))
		}
		if r.Labels != nil {
			errs = append(errs, fmt.Errorf("%srunner.labels is owned by the scaler: the group's spec.labels are the runner's labels", prefix))
		}
		if r.Capacity != nil && *r.Capacity != 1 {
			errs = append(errs, fmt.Errorf("%srunner.capacity must be 1: each runner pod takes one job", prefix))
		}
		if r.EnvFile != nil {
			errs = append(errs, fmt.Errorf("%srunner.env_file is owned by the scaler: use runner.envs", prefix))
		}
		if r.ShutdownTimeout != nil {
			errs = append(errs, fmt.Errorf("%srunner.shutdown_timeout is owned by the scaler: it follows the runner pod's terminationGracePeriodSeconds", prefix))
		}
	}
	return errors.Join(errs...)
}

// Check is every check of one layer that needs no namespace: reserved
// fields, and values the runner would refuse (durations).
func Check(c *v1alpha1.RunnerConfig, prefix string) error {
	if c == nil {
		return nil
	}
	errs := []error{CheckReserved(c, prefix)}
	duration := func(field string, v *string) {
		if v == nil {
			return
		}
		if d, err := time.ParseDuration(*v); err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("%s%s %q is not a duration such as 30s or 3h", prefix, field, *v))
		}
	}
	if r := c.Runner; r != nil {
		duration("runner.timeout", r.Timeout)
		duration("runner.fetch_timeout", r.FetchTimeout)
		duration("runner.fetch_interval", r.FetchInterval)
		duration("runner.fetch_interval_max", r.FetchIntervalMax)
		for _, k := range slices.Sorted(maps.Keys(r.Envs)) {
			if !envName.MatchString(k) {
				errs = append(errs, fmt.Errorf("%srunner.envs: %q is not an environment variable name", prefix, k))
			}
		}
	}
	if c.Container != nil {
		duration("container.docker_timeout", c.Container.DockerTimeout)
	}
	return errors.Join(errs...)
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckGroup is every check a group's spec.runnerConfig must pass before
// any namespace is read: Check, and no field that the platform pinned.
func CheckGroup(group *v1alpha1.RunnerConfig, pinned *v1alpha1.RunnerConfig) error {
	if group == nil {
		return nil
	}
	errs := []error{Check(group, "spec.runnerConfig.")}
	for _, f := range setFields(group) {
		if slices.Contains(setFields(pinned), f) {
			errs = append(errs, fmt.Errorf("spec.runnerConfig.%s is pinned by the platform (chart value runnerConfig.pinned): the group may not set it", f))
		}
	}
	return errors.Join(errs...)
}

// setFields names the fields a layer sets, runner.envs name by name.
func setFields(c *v1alpha1.RunnerConfig) []string {
	if c == nil {
		return nil
	}
	var out []string
	add := func(name string, isSet bool) {
		if isSet {
			out = append(out, name)
		}
	}
	if l := c.Log; l != nil {
		add("log.level", l.Level != nil)
	}
	if r := c.Runner; r != nil {
		for _, k := range slices.Sorted(maps.Keys(r.Envs)) {
			out = append(out, "runner.envs."+k)
		}
		add("runner.timeout", r.Timeout != nil)
		add("runner.insecure", r.Insecure != nil)
		add("runner.fetch_timeout", r.FetchTimeout != nil)
		add("runner.fetch_interval", r.FetchInterval != nil)
		add("runner.fetch_interval_max", r.FetchIntervalMax != nil)
		add("runner.github_mirror", r.GithubMirror != nil)
	}
	if k := c.Container; k != nil {
		add("container.network", k.Network != nil)
		add("container.privileged", k.Privileged != nil)
		add("container.options", k.Options != nil)
		add("container.valid_volumes", k.ValidVolumes != nil)
		add("container.docker_host", k.DockerHost != nil)
		add("container.force_pull", k.ForcePull != nil)
		add("container.require_docker", k.RequireDocker != nil)
		add("container.docker_timeout", k.DockerTimeout != nil)
	}
	return out
}

// ReportGrace is what a runner pod keeps of its grace period after the
// runner's shutdown_timeout: the runner then cancels the job and reports
// its result and last log lines to Gitea (each report attempt has the
// runner's report_close_timeout, 10s, and is retried), before the kubelet
// kills it. The runner pod's default grace is the job timeout plus this
// (runnerjob.DefaultTerminationGracePeriodSeconds).
const ReportGrace = 120 * time.Second

// ShutdownTimeout is the runner's shutdown_timeout for a runner pod with
// the grace period grace: the grace less ReportGrace for the cancel and the
// final report (half the grace when the grace is under twice that),
// so that a job that ends within the grace is not cancelled, and one that
// does not is cancelled and reported before the kubelet's SIGKILL.
func ShutdownTimeout(grace time.Duration) time.Duration {
	if grace <= 0 {
		return 0
	}
	return grace - min(ReportGrace, grace/2)
}

// Cache says what Render writes in the cache section.
type Cache struct {
	// ExternalServer is the shared cache server's URL; empty turns the
	// runner's cache off.
	ExternalServer string
}

// Render writes the runner's config.yaml: the merged layers, and what the
// scaler owns. The output is deterministic, so an unchanged group renders
// the same bytes.
func Render(c v1alpha1.RunnerConfig, grace time.Duration, cache Cache) ([]byte, error) {
	out := file{
		Runner: runnerSection{
			Capacity:        1,
			ShutdownTimeout: ShutdownTimeout(grace).String(),
		},
	}
	if c.Log != nil && c.Log.Level != nil {
		out.Log = &logSection{Level: *c.Log.Level}
	}
	if r := c.Runner; r != nil {
		out.Runner.Envs = r.Envs
		out.Runner.Timeout = deref(r.Timeout)
		out.Runner.Insecure = r.Insecure
		out.Runner.FetchTimeout = deref(r.FetchTimeout)
		out.Runner.FetchInterval = deref(r.FetchInterval)
		out.Runner.FetchIntervalMax = deref(r.FetchIntervalMax)
		out.Runner.GithubMirror = deref(r.GithubMirror)
	}
	// An ephemeral runner's own cache server holds entries for its one
	// job and goes with its pod: a save would cost the job time for
	// nothing and a restore never hits. Without a shared server the cache
	// is off, and actions/cache skips at once.
	enabled := cache.ExternalServer != ""
	out.Cache = cacheSection{Enabled: &enabled, ExternalServer: cache.ExternalServer}
	if k := c.Container; k != nil {
		out.Container = &containerSection{
			Network:       deref(k.Network),
			Privileged:    k.Privileged,
			Options:       deref(k.Options),
			ValidVolumes:  k.ValidVolumes,
			DockerHost:    deref(k.DockerHost),
			ForcePull:     k.ForcePull,
			RequireDocker: k.RequireDocker,
			DockerTimeout: deref(k.DockerTimeout),
		}
	}
	var buf bytes.Buffer
	buf.WriteString("# Rendered by gitea-runner-scaler from the chart's runnerConfig and the\n# RunnerGroup's spec.runnerConfig; edits are overwritten.\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// file is the runner's config.yaml as the scaler writes it: the runner's
// own keys (gitea/runner internal/pkg/config), only those the scaler sets.
type file struct {
	Log       *logSection       `yaml:"log,omitempty"`
	Runner    runnerSection     `yaml:"runner"`
	Cache     cacheSection      `yaml:"cache"`
	Container *containerSection `yaml:"container,omitempty"`
}

type logSection struct {
	Level string `yaml:"level,omitempty"`
}

type runnerSection struct {
	Capacity         int               `yaml:"capacity"`
	ShutdownTimeout  string            `yaml:"shutdown_timeout"`
	Envs             map[string]string `yaml:"envs,omitempty"`
	Timeout          string            `yaml:"timeout,omitempty"`
	Insecure         *bool             `yaml:"insecure,omitempty"`
	FetchTimeout     string            `yaml:"fetch_timeout,omitempty"`
	FetchInterval    string            `yaml:"fetch_interval,omitempty"`
	FetchIntervalMax string            `yaml:"fetch_interval_max,omitempty"`
	GithubMirror     string            `yaml:"github_mirror,omitempty"`
}

type cacheSection struct {
	Enabled        *bool  `yaml:"enabled"`
	ExternalServer string `yaml:"external_server,omitempty"`
}

type containerSection struct {
	Network       string   `yaml:"network,omitempty"`
	Privileged    *bool    `yaml:"privileged,omitempty"`
	Options       string   `yaml:"options,omitempty"`
	ValidVolumes  []string `yaml:"valid_volumes,omitempty"`
	DockerHost    string   `yaml:"docker_host,omitempty"`
	ForcePull     *bool    `yaml:"force_pull,omitempty"`
	RequireDocker *bool    `yaml:"require_docker,omitempty"`
	DockerTimeout string   `yaml:"docker_timeout,omitempty"`
}

// ParseLayer reads one of the chart's layers (YAML or JSON, the runner's
// keys), refusing keys the subset does not have, so a typo in the chart's
// values stops the scaler instead of being dropped.
func ParseLayer(raw []byte, name string) (*v1alpha1.RunnerConfig, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var c v1alpha1.RunnerConfig
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	var node yaml.Node
	if err := dec.Decode(&node); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := decodeStrict(&node, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := Check(&c, name+"."); err != nil {
		return nil, err
	}
	return &c, nil
}

// decodeStrict decodes a YAML node into the JSON-tagged API type by way of
// JSON, refusing unknown keys.
func decodeStrict(node *yaml.Node, out *v1alpha1.RunnerConfig) error {
	var generic any
	if err := node.Decode(&generic); err != nil {
		return err
	}
	return strictJSON(generic, out)
}

// String names a layer for log lines: which fields it sets.
func String(c *v1alpha1.RunnerConfig) string {
	return strings.Join(setFields(c), ",")
}
