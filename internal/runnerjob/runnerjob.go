// Package runnerjob builds the batch/v1 Job that runs one ephemeral
// act_runner for one queued Gitea job: named after the group, labelled with
// the group and the Gitea job, controlled by the group, its runner
// registered with Gitea under the Job's name plus a tag of the group's UID
// (RunnerName).
// The README's "The runner Job" section describes the same shape for users.
//
// The files:
//
//	runnerjob.go  the settings of runner Jobs (Options) and their constants
//	names.go      the names the scaler gives, and reads back: Jobs, runners,
//	              owner tags, the runner config's keys, scopes
//	build.go      the runner Job (Build), its pod, and its runner config
//	owned.go      the other objects a group owns: the minted registration
//	              token Secret, the runner config ConfigMap
//	credentials.go a runner the scaler registered: its state file Secret,
//	              owned by its Job, and the pod's read-only mount of it
//	check.go      the templates the scaler accepts, checked before any Job
//	read.go       what a runner Job says of itself once made
package runnerjob

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/podtemplate"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerconfig"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerlabels"
)

// Settings of the runner Job. The label and annotation keys it carries are
// in internal/api/v1alpha1/wellknown.go, with the other names the scaler
// writes on objects.
const (
	// ContainerName is the runner container's name.
	ContainerName = podtemplate.RunnerContainer
	// DefaultImage is a released Gitea runner (gitea/runner, act_runner's
	// name since v1.0.0) with its own rootless Docker daemon: pinned, so
	// that every runner of a pool runs the same code and an upgrade is a
	// reviewed change, not whatever nightly was pushed last. It is the
	// release the test bed runs for real (built from its source, through
	// the image's entrypoint script run.sh): the newest whose source builds
	// here. Pinned by tag, not digest: the digest of a registry's image can
	// only be read from the registry, which these machines cannot reach, and
	// a digest written without reading it would be invented.
	DefaultImage = "gitea/runner:3.1.0-dind-rootless"
	// HostRunScript is the runner's entrypoint script in every flavour of
	// Gitea's image (the archive's scripts/run.sh): the basic image runs
	// it under tini, the dind images under s6 beside the Docker daemon.
	HostRunScript = "/usr/local/bin/run.sh"
	// runnerService is the runner's s6 service in Gitea's dind images.
	runnerService = "/etc/s6/gitea-runner"
	// DockerDataVolume is the emptyDir that holds the rootless Docker
	// daemon's data (images, containers, build caches), mounted at
	// DockerDataDir.
	DockerDataVolume = "docker-data"
	// DockerDataDir is the rootless Docker daemon's data root in the
	// dind-rootless image.
	DockerDataDir = "/home/rootless/.local/share/docker"
	// DefaultDockerDataSizeLimit bounds Docker's data: past it the kubelet
	// evicts the pod, instead of the node's disk filling up.
	DefaultDockerDataSizeLimit = "20Gi"
	// DefaultTerminationGracePeriodSeconds is how long a runner pod has
	// after SIGTERM (a deleted Job, a drained node, an eviction) before it
	// is killed: the runner's job timeout (gitea-runner's runner.timeout
	// and Gitea's own ENDLESS_TASK_TIMEOUT are both 3h by default), so a
	// runner whose shutdown_timeout lets its job finish is not killed
	// mid-job, plus ReportGraceSeconds for it to report the result and
	// the last log lines to Gitea. A runner that has no job exits at once
	// on SIGTERM, so the bound costs nothing when it is idle.
	DefaultTerminationGracePeriodSeconds = 3*60*60 + ReportGraceSeconds
	// ReportGraceSeconds is the part of the grace period left for the
	// runner to cancel its task and report it after its shutdown_timeout.
	ReportGraceSeconds = int64(runnerconfig.ReportGrace / time.Second)
	// DefaultTTLSecondsAfterFinished is how long a finished Job stays for
	// inspection before the TTL controller deletes it.
	DefaultTTLSecondsAfterFinished = 600
	// RunnerStateDir is where the act_runner image keeps its .runner state
	// file (the image's working directory). See Build.
	RunnerStateDir = "/data"
	// suffixLen is the length of the random part of a Job name.
	suffixLen = 5
	// ConfigVolume is the runner pod's volume of the group's rendered
	// runner config (the ConfigMap ConfigMapName), mounted read-only at
	// ConfigDir in the runner container; CONFIG_FILE names ConfigPath.
	ConfigVolume = "gitea-runner-config"
	// ConfigDir is where the runner container sees its config.
	ConfigDir = "/etc/gitea-runner"
	// ConfigKey is the config's file name in the runner container. In
	// the ConfigMap each grace period has a key of its own
	// (ConfigKeyFor); ConfigKey is also the one key of Jobs made before
	// that (MountedConfigKey).
	ConfigKey = "config.yaml"
	// ConfigPath is the runner's CONFIG_FILE.
	ConfigPath = ConfigDir + "/" + ConfigKey
	// With the shared cache (CacheOptions), the runner reads the config
	// from RenderedConfigPath instead: the init container
	// ConfigInitContainer writes it there, on the memory-backed emptyDir
	// RenderedConfigVolume, from ConfigPath and the cache Secret
	// (runnerconfig.WithSecret), since the runner reads
	// cache.external_secret only from its config file and Secrets reach
	// pods only through secretKeyRef.
	ConfigInitContainer  = "runner-config"
	RenderedConfigVolume = "gitea-runner-config-rendered"
	RenderedConfigDir    = "/run/gitea-runner"
	RenderedConfigPath   = RenderedConfigDir + "/" + ConfigKey
	// CacheSecretKey is the key of cache.external_secret in the cache
	// Secret (CacheOptions.SecretName).
	CacheSecretKey = "external_secret"
	// Env of the config init container: where it reads and writes.
	renderTemplateEnv = "GITEA_RUNNER_CONFIG_TEMPLATE"
	renderOutEnv      = "GITEA_RUNNER_CONFIG_OUT"
)

// CacheOptions are the shared cache of each served namespace (the chart's
// runnerCache): one gitea-runner cache-server per namespace, which its
// runners register each job's token with.
type CacheOptions struct {
	// URL is the cache server's base URL; "{namespace}" in it is replaced
	// by the group's namespace. Empty: no shared cache, and the runner's
	// cache is off.
	URL string
	// SecretName names the Secret, in the group's namespace, with the
	// server's shared secret under CacheSecretKey. A namespace without it
	// gets runners with the cache off (the reference is optional).
	SecretName string
	// Image runs ConfigInitContainer: the scaler's own image, whose
	// render-runner-config command writes the config.
	Image string
}

// Enabled says whether runners use a shared cache server.
func (c CacheOptions) Enabled() bool { return c.URL != "" }

// URLFor is the cache server's URL for runners in namespace.
func (c CacheOptions) URLFor(namespace string) string {
	return strings.ReplaceAll(c.URL, "{namespace}", namespace)
}

// Options are the scaler-wide settings of runner Jobs.
type Options struct {
	Image                   string
	DefaultLabels           []string
	TTLSecondsAfterFinished int32
	// TerminationGracePeriodSeconds is the built-in pod's grace period
	// (the chart's scaler.runnerTerminationGracePeriodSeconds); templates
	// may replace it.
	TerminationGracePeriodSeconds int64
	// Template is the install-wide runner template (the chart's
	// runnerTemplate), merged over the built-in pod and under each group's
	// spec.template; nil for none.
	Template *corev1.PodTemplateSpec
	// Pinned are the fields a group's spec.template may not set (the
	// chart's runnerTemplatePinned).
	Pinned podtemplate.Pinned
	// Config are the platform's layers of every group's runner config
	// (the chart's runnerConfig).
	Config runnerconfig.Layers
	// Cache is the shared cache of each namespace (the chart's
	// runnerCache); zero for none.
	Cache CacheOptions
	// SelfRegistration hands runner pods the scope's registration token
	// and lets them register (the chart's
	// scaler.runnerSelfRegistration), for a runner image whose entrypoint
	// must register itself. Off: the scaler registers each runner and the
	// pod gets only that runner's credentials (credentials.go).
	SelfRegistration bool
	// UserNamespaced is the platform's setup of the UserNamespaced flavour
	// (the chart's userNamespacedRunners); zero where it is not set up.
	UserNamespaced UserNamespacedPod
	// DefaultFlavour is the flavour of a group that leaves spec.flavour
	// unset (the chart's runnerFlavour.default): Auto, Privileged or
	// UserNamespaced; empty is Auto. FlavourPinned refuses a group that
	// sets another (runnerFlavour.pinned).
	DefaultFlavour v1alpha1.RunnerFlavour
	FlavourPinned  bool
	// Flavour is the built-in pod the Job starts from, as the scaler
	// chose it for the group (scaler/flavour.go); empty is Privileged.
	Flavour v1alpha1.RunnerFlavour
}

// UserNamespacedPod is what the built-in pod of the UserNamespaced flavour
// takes from the platform: what only the cluster's nodes and registry
// can provide.
type UserNamespacedPod struct {
	// Image is a dind-rootless runner image made ready for a user
	// namespace of 65536 ids: newuidmap and newgidmap with file
	// capabilities, subordinate ids within the pod's range (the chart's
	// docs/runner-pods.md has the Dockerfile). Empty: not set up.
	Image string
	// SeccompProfile is the Localhost profile on every node, relative to
	// the kubelet's seccomp folder (policies/seccomp/rootless-dind.json
	// installed there): containerd's default lets no process unshare or
	// mount, which rootlesskit and the runc inside the pod must.
	SeccompProfile string
	// TunResource is the extended resource by which a device plugin hands
	// pods /dev/net/tun, which the daemon's slirp4netns needs to give job
	// containers a network.
	TunResource corev1.ResourceName
}

// Enabled says whether the platform set the flavour up.
func (u UserNamespacedPod) Enabled() bool { return u.Image != "" }

// DefaultOptions are the settings the scaler uses when no flag changes them.
func DefaultOptions() Options {
	return Options{
		Image:                         DefaultImage,
		DefaultLabels:                 runnerlabels.DefaultLabels,
		TTLSecondsAfterFinished:       DefaultTTLSecondsAfterFinished,
		TerminationGracePeriodSeconds: DefaultTerminationGracePeriodSeconds,
		// Off: no pod holds a registration token (credentials.go).
		SelfRegistration: false,
	}
}

// RunnerFirstStop is the runner container's preStop hook. On a drain the
// kubelet's SIGTERM goes to the image's PID 1; in Gitea's dind images that
// is s6-svscan, which stops every service at once, and the Docker daemon
// then kills the job's containers while the runner waits for them. The
// hook stops the runner's service alone and waits until it is down: the
// runner finishes its job within shutdown_timeout, and its finish script
// then stops the rest. An image without that service skips it and gets the
// SIGTERM as before.
var RunnerFirstStop = []string{"/bin/sh", "-c",
	"[ -d " + runnerService + "/supervise ] || exit 0; s6-svc -d " + runnerService + " && s6-svwait -d " + runnerService}
