package v1alpha1

// RunnerConfig is the part of gitea/runner's config.yaml that a RunnerGroup
// may set (spec.runnerConfig). The keys are the runner's own (snake_case,
// as in its config.example.yaml), so a block can be copied from a runner's
// config file; what the runner reads but is left out here is either owned
// by the scaler or of no use in a one-job runner pod.
//
// The scaler renders the final config.yaml from three layers, one rule per
// field (internal/runnerconfig): the chart's runnerConfig.defaults < the
// group's spec.runnerConfig < the chart's runnerConfig.pinned. A group may
// not set a field the platform pinned.
//
// Owned by the scaler and refused here, each naming the field: runner.file
// (the registration), runner.labels (spec.labels), runner.capacity other
// than 1 (one job per runner), runner.env_file (a file of the runner
// container), runner.shutdown_timeout (it follows the runner pod's
// terminationGracePeriodSeconds) and the cache section.
//
// +kubebuilder:validation:XValidation:rule="!has(self.cache)",message="spec.runnerConfig.cache is owned by the scaler: it points every runner of the group at the shared cache, or turns the runner's own cache off",fieldPath=".cache",reason=FieldValueForbidden
type RunnerConfig struct {
	// Log is the runner's own logging.
	// +optional
	Log *RunnerLogConfig `json:"log,omitempty"`
	// Runner is the runner section: job env, timeouts, polling.
	// +optional
	Runner *RunnerRunnerConfig `json:"runner,omitempty"`
	// Container is how job containers are started. Privileged job
	// containers, host networking, volumes that are not named Docker
	// volumes, another docker_host, and container.options other than a
	// short list of harmless docker flags are allowed only in namespaces
	// whose Pod Security level is privileged (the chart's docs/runner-config.md).
	// +optional
	Container *RunnerContainerConfig `json:"container,omitempty"`
	// Cache is owned by the scaler: refused here.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	Cache *RawSection `json:"cache,omitempty"`
}

// RawSection is a config section the schema keeps as written, so that a
// rule can refuse it by name instead of pruning it without a word.
type RawSection struct {
	Raw []byte `json:"-"`
}

// MarshalJSON writes the section as it was read.
func (r RawSection) MarshalJSON() ([]byte, error) {
	if len(r.Raw) == 0 {
		return []byte("{}"), nil
	}
	return r.Raw, nil
}

// UnmarshalJSON keeps the section as it is written.
func (r *RawSection) UnmarshalJSON(b []byte) error {
	r.Raw = append(r.Raw[:0], b...)
	return nil
}

// RunnerLogConfig is the runner's log section.
type RunnerLogConfig struct {
	// Level of the runner's own log: trace, debug, info, warn or error.
	// +optional
	// +kubebuilder:validation:Enum=trace;debug;info;warn;error
	Level *string `json:"level,omitempty"`
}

// RunnerRunnerConfig is the runner section of the runner's config.
//
// +kubebuilder:validation:XValidation:rule="!has(self.file)",message="spec.runnerConfig.runner.file is owned by the scaler: the runner's registration lives in its own container and is never kept",fieldPath=".file",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.labels)",message="spec.runnerConfig.runner.labels is owned by the scaler: set the group's spec.labels",fieldPath=".labels",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.capacity) || self.capacity == 1",message="spec.runnerConfig.runner.capacity must be 1: each runner pod takes one job and goes (ephemeral); raise spec.maxActiveRunners for more jobs at once",fieldPath=".capacity",reason=FieldValueInvalid
// +kubebuilder:validation:XValidation:rule="!has(self.env_file)",message="spec.runnerConfig.runner.env_file is owned by the scaler: it would read a file of the runner container into every job; use spec.runnerConfig.runner.envs",fieldPath=".env_file",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.shutdown_timeout)",message="spec.runnerConfig.runner.shutdown_timeout is owned by the scaler: it follows the runner pod's terminationGracePeriodSeconds (set that in spec.template.spec)",fieldPath=".shutdown_timeout",reason=FieldValueForbidden
type RunnerRunnerConfig struct {
	// Envs are extra environment variables of every job, by name: at
	// most 100, values of at most 4096 characters. Names are letters,
	// digits and '_', not starting with a digit; the scaler checks them
	// (InvalidRunnerConfig), since a rule on a map's keys costs the API
	// server more than a CRD may spend.
	// +optional
	// +kubebuilder:validation:MaxProperties=100
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 4096)",message="spec.runnerConfig.runner.envs values are at most 4096 characters"
	Envs map[string]string `json:"envs,omitempty"`
	// Timeout of a job (a Go duration, e.g. 3h); Gitea's own job timeout
	// (3h by default) applies too.
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	Timeout *string `json:"timeout,omitempty"`
	// Insecure skips verifying Gitea's TLS certificate.
	// +optional
	Insecure *bool `json:"insecure,omitempty"`
	// FetchTimeout bounds one request for a task (a Go duration).
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	FetchTimeout *string `json:"fetch_timeout,omitempty"`
	// FetchInterval is how often an idle runner asks for a task (a Go
	// duration).
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	FetchInterval *string `json:"fetch_interval,omitempty"`
	// FetchIntervalMax is the longest interval the idle runner backs off
	// to (a Go duration).
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	FetchIntervalMax *string `json:"fetch_interval_max,omitempty"`
	// GithubMirror replaces https://github.com in the actions a job uses.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	GithubMirror *string `json:"github_mirror,omitempty"`

	// File is owned by the scaler: refused.
	// +optional
	File *string `json:"file,omitempty"`
	// Labels are owned by the scaler (spec.labels): refused.
	// +optional
	Labels []string `json:"labels,omitempty"`
	// Capacity is 1, the only value allowed: one job per runner.
	// +optional
	Capacity *int32 `json:"capacity,omitempty"`
	// EnvFile is owned by the scaler: refused.
	// +optional
	EnvFile *string `json:"env_file,omitempty"`
	// ShutdownTimeout is owned by the scaler: refused.
	// +optional
	ShutdownTimeout *string `json:"shutdown_timeout,omitempty"`
}

// RunnerContainerConfig is the container section of the runner's config:
// how the runner starts job containers.
type RunnerContainerConfig struct {
	// Network of job containers: empty (a network per job), bridge, a
	// network's name; host only in a privileged namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`
	Network *string `json:"network,omitempty"`
	// Privileged job containers; true only in a privileged namespace.
	// +optional
	Privileged *bool `json:"privileged,omitempty"`
	// Options are more docker run flags for job containers. Outside
	// privileged namespaces only these, without quotes: --add-host, --env
	// (-e), --label (-l), --memory (-m), --memory-reservation,
	// --memory-swap, --cpus, --cpu-shares (-c), --cpuset-cpus, --shm-size,
	// --ulimit, --dns, --dns-search, --dns-option, --hostname (-h), --user
	// (-u), --workdir (-w), --tmpfs, --pids-limit, --init, --platform,
	// --stop-timeout, --stop-signal.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Options *string `json:"options,omitempty"`
	// ValidVolumes are the volumes job containers may mount (globs).
	// Outside privileged namespaces only named Docker volumes (no '/', no
	// glob), never host paths.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MaxLength=512
	ValidVolumes []string `json:"valid_volumes,omitempty"`
	// DockerHost for job containers: empty (the runner pod's own daemon)
	// or "-" (the same, not mounted into job containers); another value
	// only in a privileged namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	DockerHost *string `json:"docker_host,omitempty"`
	// ForcePull pulls job images even when present.
	// +optional
	ForcePull *bool `json:"force_pull,omitempty"`
	// RequireDocker waits for a Docker daemon even for host-label jobs.
	// +optional
	RequireDocker *bool `json:"require_docker,omitempty"`
	// DockerTimeout is how long to wait for the Docker daemon (a Go
	// duration).
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	DockerTimeout *string `json:"docker_timeout,omitempty"`
}
