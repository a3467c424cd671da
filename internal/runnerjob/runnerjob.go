// Package runnerjob builds the batch/v1 Job that runs one ephemeral
// act_runner for one queued Gitea job: named after the group, labelled with
// the group and the Gitea job, controlled by the group, registering with
// Gitea under the Job's name plus a tag of the group's UID (RunnerName). The README's "The runner Job" section
// describes the same shape for users.
package runnerjob

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/assign"
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
	DefaultImage = "gitea/runner:1.0.8-dind-rootless"
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

// ConfigMapName names the ConfigMap that holds the runner config the scaler
// renders for the group named group; the group owns it. RunnerGroup names
// are at most 50 characters, so the name stays a valid ConfigMap name.
func ConfigMapName(group string) string {
	return group + "-runner-config"
}

// ConfigKeyFor is the key, in the group's runner config ConfigMap, of the
// config made for runner pods with the grace period grace, e.g.
// "config-grace-10920s.yaml". Each runner Job mounts the key of its own
// pod's grace, and the runner reads the shutdown_timeout made from it
// (runnerconfig.ShutdownTimeout), whatever grace the group has when the
// pod starts or its runner restarts: one config for every grace would
// give a pod made before a grace change a timeout made for another
// grace, which either cancels a job its own grace would let finish or
// outlives that grace and is killed before it reports. The rest of the
// config is the group's, the same under every key.
func ConfigKeyFor(grace time.Duration) string {
	return "config-grace-" + strconv.FormatInt(int64(grace/time.Second), 10) + "s.yaml"
}

// MountedConfigKey is the key of the group's runner config ConfigMap that
// the runner Job j's pods mount, and false when they mount none of it (a
// Job that is not the group's).
func MountedConfigKey(group string, j *batchv1.Job) (string, bool) {
	for _, v := range j.Spec.Template.Spec.Volumes {
		if v.Name != ConfigVolume || v.ConfigMap == nil || v.ConfigMap.Name != ConfigMapName(group) || len(v.ConfigMap.Items) != 1 {
			continue
		}
		return v.ConfigMap.Items[0].Key, true
	}
	return "", false
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
}

// DefaultOptions are the settings the scaler uses when no flag changes them.
func DefaultOptions() Options {
	return Options{
		Image:                         DefaultImage,
		DefaultLabels:                 runnerlabels.DefaultLabels,
		TTLSecondsAfterFinished:       DefaultTTLSecondsAfterFinished,
		TerminationGracePeriodSeconds: DefaultTerminationGracePeriodSeconds,
	}
}

// NewName returns "{group}-{5 random characters}". The scaler names Jobs
// itself, instead of leaving it to generateName, because the runner's name
// (GITEA_RUNNER_NAME, see RunnerName) is made from the Job's and that env is
// part of the object being created.
func NewName(group string) string {
	return group + "-" + utilrand.String(suffixLen)
}

// ownerTagLen is the length of OwnerTag: 8 hex digits, 32 bits, so two
// groups on one Gitea share a tag once in about 4 billion pairs.
const ownerTagLen = 8

// OwnerTag is a short digest of the group's UID. It is part of every runner
// name the group registers with Gitea, because a group's name alone is not
// unique: group "ci" in namespace a and group "ci" in namespace b (or in
// another cluster on the same Gitea) would otherwise count, reap and delete
// each other's runners. A UID is unique per object, so the tag is certain
// where the name is not; a group deleted and created again gets a new tag,
// and never adopts the registrations of the old one.
func OwnerTag(uid types.UID) string {
	sum := sha256.Sum256([]byte(uid))
	return hex.EncodeToString(sum[:])[:ownerTagLen]
}

// RunnerName is the name a runner Job's runner registers with in Gitea:
// "{Job name}-{OwnerTag}", e.g. "ci-x2v7k-3f9a1c2b". The Job's own name
// stays short (a group may have 50 characters); Gitea allows 255.
func RunnerName(rg *v1alpha1.RunnerGroup, jobName string) string {
	return jobName + "-" + OwnerTag(rg.UID)
}

// JobOfRunner says whether a Gitea runner name is one this group registers
// and, if so, the name of its runner Job: the group's prefix, exactly one
// random suffix and the group's own OwnerTag. The fixed suffix length keeps
// group "ci" from claiming the runners of group "ci-gpu"; the tag keeps it
// from claiming those of another namespace's "ci".
func JobOfRunner(rg *v1alpha1.RunnerGroup, runnerName string) (string, bool) {
	jobName, tag, ok := cutLast(runnerName, "-")
	if !ok || tag != OwnerTag(rg.UID) || !IsJobName(rg.Name, jobName) {
		return "", false
	}
	return jobName, true
}

// IsJobName reports whether name is one NewName makes for the group: the
// group's prefix followed by exactly one random suffix.
func IsJobName(group, name string) bool {
	suffix, ok := strings.CutPrefix(name, group+"-")
	if !ok || len(suffix) != suffixLen {
		return false
	}
	for _, r := range suffix {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Scope names one Gitea runners listing: a Gitea URL and a target, e.g.
// "https://gitea.example.com org acme", "https://gitea.example.com repo
// acme/app", "https://gitea.example.com global".
func Scope(url, scope, owner, repo string) string {
	where := url + " " + scope
	if owner != "" {
		where += " " + owner
	}
	if repo != "" {
		where += "/" + repo
	}
	return where
}

// ScopeOf is where a group's runners register now (Scope), with the
// Gitea URL normalised (assign.Instance): a URL spelt another way is the
// same place, not a move.
func ScopeOf(spec *v1alpha1.RunnerGroupSpec) string {
	owner := spec.Owner()
	if spec.Scope == v1alpha1.ScopeGlobal {
		owner = ""
	}
	return Scope(assign.Instance(spec.Gitea.URL), string(spec.Scope), owner, spec.Repo)
}

// ScopeOfJob is where a runner Job's runner registers (Scope), from its
// annotation; "" for a Job made before the annotation, whose runner
// registered where its group is now.
func ScopeOfJob(j *batchv1.Job) string { return j.Annotations[v1alpha1.AnnotationRunnerScope] }

// ScopeKnown says whether the scaler knew, when it made the Job, that its
// runner registers in ScopeOfJob (see AnnotationRunnerScopeKnown).
func ScopeKnown(j *batchv1.Job) bool {
	return j.Annotations[v1alpha1.AnnotationRunnerScopeKnown] == "true"
}

// MarkScope records on a runner Job where its runner registers (Scope) and
// whether the scaler knows it.
func MarkScope(j *batchv1.Job, scope string, known bool) {
	if j.Annotations == nil {
		j.Annotations = map[string]string{}
	}
	j.Annotations[v1alpha1.AnnotationRunnerScope] = scope
	j.Annotations[v1alpha1.AnnotationRunnerScopeKnown] = strconv.FormatBool(known)
}

// ParseScope splits a Scope back into its parts; ok is false for a
// string Scope did not make.
func ParseScope(s string) (url, scope, owner, repo string, ok bool) {
	parts := strings.Split(s, " ")
	switch {
	case len(parts) == 2 && parts[1] == string(v1alpha1.ScopeGlobal):
		return parts[0], parts[1], "", "", parts[0] != ""
	case len(parts) != 3 || parts[0] == "" || parts[2] == "":
		return "", "", "", "", false
	}
	url, scope, owner = parts[0], parts[1], parts[2]
	if scope == string(v1alpha1.ScopeRepo) {
		var found bool
		if owner, repo, found = strings.Cut(owner, "/"); !found || owner == "" || repo == "" {
			return "", "", "", "", false
		}
		return url, scope, owner, repo, true
	}
	return url, scope, owner, "", (scope == string(v1alpha1.ScopeOrg) || scope == string(v1alpha1.ScopeUser)) && !strings.Contains(owner, "/")
}

// RunnerNameOf is the name a runner Job's runner registered with: its
// annotation, or, for a Job made before runner names carried the owner tag,
// the Job's own name.
func RunnerNameOf(j *batchv1.Job) string {
	if n := j.Annotations[v1alpha1.AnnotationRunnerName]; n != "" {
		return n
	}
	return j.Name
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+len(sep):], true
}

// Selector returns the label selector of a group's runner Jobs.
func Selector(group string) string { return v1alpha1.LabelRunnerGroupName + "=" + group }

// GroupLabels are the labels that tie an object to its RunnerGroup.
func GroupLabels(group string) map[string]string {
	return map[string]string{v1alpha1.LabelRunnerGroupName: group, v1alpha1.LabelManagedBy: v1alpha1.ManagedBy}
}

// Build returns the runner Job for one Gitea job, or for the warm pool when
// giteaJobID is negative. Its pod is built in
// layers (internal/podtemplate has the merge rules): the built-in pod
// (DefaultPod) < the install-wide template (opts.Template) < the group's
// spec.template; then what the scaler reserves is put back (reserve), so no
// layer can change it.
//
// Restarts never reuse a spent ephemeral identity: Gitea revokes an
// ephemeral runner's credentials once it takes a task, so a restarted
// container that found the old .runner file would fail for ever. The state
// file lives in the container's own writable layer (RunnerStateDir) and no
// volume may be mounted there or above it (checkStateDir), so every
// container start, including a restart under restartPolicy OnFailure,
// begins without it and registers afresh with the (reusable) registration
// token. Docker's data is on an emptyDir (DockerDataDir), which survives a
// container restart, but it holds only images and build caches. Newer
// act_runner images also delete the file themselves when
// GITEA_RUNNER_EPHEMERAL is set.
func Build(rg *v1alpha1.RunnerGroup, name string, giteaJobID int64, opts Options) (*batchv1.Job, error) {
	jobLabels := GroupLabels(rg.Name)
	// A warm runner (giteaJobID < 0, package plan) was started for no
	// Gitea job: its label says 0.
	jobLabels[v1alpha1.LabelGiteaJobID] = strconv.FormatInt(max(giteaJobID, 0), 10)
	jobLabels["app.kubernetes.io/name"] = "gitea-runner"
	jobLabels["app.kubernetes.io/component"] = "runner"
	jobLabels["app.kubernetes.io/managed-by"] = v1alpha1.ManagedBy

	pod, err := podtemplate.Merge(DefaultPod(opts), opts.Template)
	if err != nil {
		return nil, fmt.Errorf("runner template: %w", err)
	}
	if pod, err = podtemplate.Merge(pod, rg.Spec.Template); err != nil {
		return nil, fmt.Errorf("spec.template: %w", err)
	}
	reserve(&pod, rg, name, jobLabels, opts)
	if err := checkStateDir(&pod); err != nil {
		return nil, err
	}

	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: rg.Namespace,
			Labels:    jobLabels,
			// The scaler reads the runner's name back from here, to tell
			// which Gitea runner is this Job's.
			Annotations: map[string]string{
				v1alpha1.AnnotationRunnerName:  RunnerName(rg, name),
				v1alpha1.AnnotationRunnerScope: ScopeOf(&rg.Spec),
			},
			OwnerReferences: []metav1.OwnerReference{rg.ControllerRef()},
		},
		Spec: batchv1.JobSpec{
			TTLSecondsAfterFinished: ptr.To(opts.TTLSecondsAfterFinished),
			Template:                pod,
		},
	}, nil
}

// CheckTemplate tells, before any Job is created, whether the group's
// spec.template is one the scaler accepts: nothing reserved, no Secret or
// ServiceAccount, no pinned field (podtemplate.CheckGroup), and, merged
// over the install-wide template, a runner pod that Build accepts.
func CheckTemplate(rg *v1alpha1.RunnerGroup, opts Options) error {
	if err := podtemplate.CheckGroup(rg.Spec.Template, opts.Pinned); err != nil {
		return err
	}
	_, err := Build(rg, NewName(rg.Name), 1, opts)
	return err
}

// CheckInstallTemplate tells whether the install-wide template
// (opts.Template) is one the scaler accepts: nothing reserved, and merged
// over the built-in pod, a runner pod Build accepts. It may reference
// Secrets and ServiceAccounts: the platform team writes it.
func CheckInstallTemplate(opts Options) error {
	if err := podtemplate.CheckReserved(opts.Template); err != nil {
		return err
	}
	pod, err := podtemplate.Merge(DefaultPod(opts), opts.Template)
	if err != nil {
		return err
	}
	return checkStateDir(&pod)
}

// DefaultPod is the built-in runner pod, before any template: the
// dind-rootless act_runner, privileged (its Docker daemon needs it), with
// requests and limits a typical CI job fits in, Docker's data on a
// size-limited emptyDir, no ServiceAccount token and a grace period for
// act_runner to report a cancelled job. The README's "Runner pods" section
// says why each value.
//
// DOCKER_HOST is left unset: the dind-rootless image starts its own Docker
// daemon and serves it on a unix socket that act_runner finds by default.
func DefaultPod(opts Options) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Annotations: map[string]string{v1alpha1.AnnotationSafeToEvict: "false"},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyOnFailure,
			// Runners talk to Gitea, not to the Kubernetes API: a token
			// would only hand CI jobs the namespace's default
			// ServiceAccount.
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(cmp.Or(opts.TerminationGracePeriodSeconds, DefaultTerminationGracePeriodSeconds)),
			Containers: []corev1.Container{{
				Name:  ContainerName,
				Image: opts.Image,
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{
						corev1.ResourceCPU:              resource.MustParse("500m"),
						corev1.ResourceMemory:           resource.MustParse("1Gi"),
						corev1.ResourceEphemeralStorage: resource.MustParse("4Gi"),
					},
					Limits: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse("2"),
						corev1.ResourceMemory: resource.MustParse("4Gi"),
						// The pod's ephemeral storage is its containers'
						// layers and logs plus its emptyDirs: 20Gi of
						// Docker data and 4Gi for the rest.
						corev1.ResourceEphemeralStorage: resource.MustParse("24Gi"),
					},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: DockerDataVolume, MountPath: DockerDataDir}},
				// The dind-rootless image runs its own Docker daemon,
				// which needs a privileged container; runner namespaces
				// must therefore admit privileged pods, unless a template
				// runs the runner without privilege (see the README).
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			}},
			Volumes: []corev1.Volume{{
				Name: DockerDataVolume,
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
					SizeLimit: ptr.To(resource.MustParse(DefaultDockerDataSizeLimit)),
				}},
			}},
		},
	}
}

// reserve puts back what belongs to the scaler, over every template: the
// labels it finds its pods by, restartPolicy, the runner container's name
// and its GITEA_* env (removed from every container, then set on the
// runner's first). The CRD refuses a group template that sets them; this
// holds for the install-wide template and for groups admitted under an
// older CRD as well.
func reserve(pod *corev1.PodTemplateSpec, rg *v1alpha1.RunnerGroup, name string, jobLabels map[string]string, opts Options) {
	labels := map[string]string{}
	for k, v := range pod.Labels {
		if !podtemplate.IsReservedLabel(k) {
			labels[k] = v
		}
	}
	for k, v := range jobLabels {
		labels[k] = v
	}
	pod.Labels = labels
	pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure

	// The token is only ever referenced, never copied into the Job: the
	// Secret is spec.registrationToken's or the one the scaler minted.
	regToken := rg.RegistrationTokenRef()
	ours := []corev1.EnvVar{
		{Name: "GITEA_INSTANCE_URL", Value: rg.Spec.Gitea.URL},
		{Name: "GITEA_RUNNER_REGISTRATION_TOKEN", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: regToken.Name},
				Key:                  regToken.Key,
			},
		}},
		{Name: "GITEA_RUNNER_EPHEMERAL", Value: "true"},
		{Name: "GITEA_RUNNER_NAME", Value: RunnerName(rg, name)},
		{Name: "GITEA_RUNNER_LABELS", Value: strings.Join(runnerlabels.ForGroup(&rg.Spec, opts.DefaultLabels), ",")},
	}
	strip := func(cs []corev1.Container) {
		for i := range cs {
			cs[i].Env = slices.DeleteFunc(cs[i].Env, func(e corev1.EnvVar) bool { return podtemplate.IsReservedEnv(e.Name) })
		}
	}
	strip(pod.Spec.Containers)
	strip(pod.Spec.InitContainers)
	// The runner reads the config the scaler renders (ConfigMapName), and
	// no other: a config of a template's would skip the checks on
	// spec.runnerConfig (runnerconfig.NeedsPrivileged).
	ours = append(ours, corev1.EnvVar{Name: podtemplate.ConfigFileEnv, Value: ConfigPath})
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Name != ContainerName {
			continue
		}
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == podtemplate.ConfigFileEnv })
		c.Env = append(ours, c.Env...)
		reserveMount(c, ConfigVolume, ConfigDir)
	}
	// The key of this pod's grace, seen in the container as ConfigKey:
	// the grace is final here, since reserve comes after every template.
	reserveVolume(pod, corev1.Volume{Name: ConfigVolume, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(rg.Name)},
			Items:                []corev1.KeyToPath{{Key: ConfigKeyFor(Grace(pod)), Path: ConfigKey}},
		},
	}})
	if opts.Cache.Enabled() {
		reserveCache(pod, opts.Cache)
	}
}

// reserveCache gives the runner the config with the cache secret: the init
// container ConfigInitContainer writes it to RenderedConfigPath, which
// CONFIG_FILE then names. A template's init container, volume or mount of
// those names or at that directory is replaced, as for the config itself.
func reserveCache(pod *corev1.PodTemplateSpec, cache CacheOptions) {
	pod.Spec.InitContainers = slices.DeleteFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == ConfigInitContainer })
	pod.Spec.InitContainers = append([]corev1.Container{configInitContainer(cache)}, pod.Spec.InitContainers...)
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Name != ContainerName {
			continue
		}
		for j := range c.Env {
			if c.Env[j].Name == podtemplate.ConfigFileEnv {
				c.Env[j].Value = RenderedConfigPath
			}
		}
		reserveMount(c, RenderedConfigVolume, RenderedConfigDir)
	}
	// Memory-backed: the file holds the secret, which so never reaches
	// the node's disk.
	reserveVolume(pod, corev1.Volume{Name: RenderedConfigVolume, VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("1Mi"))},
	}})
}

// reserveMount gives c the scaler's read-only mount of the volume name at
// dir. A template's mount of that volume, at dir or below it (a subPath
// mount on a file there), would shadow the scaler's files: it goes.
func reserveMount(c *corev1.Container, name, dir string) {
	c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		p := path.Clean(m.MountPath)
		return m.Name == name || p == dir || strings.HasPrefix(p, dir+"/")
	})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: dir, ReadOnly: true})
}

// reserveVolume puts the scaler's volume v in the pod, in place of a
// template's volume of the same name.
func reserveVolume(pod *corev1.PodTemplateSpec, v corev1.Volume) {
	pod.Spec.Volumes = slices.DeleteFunc(pod.Spec.Volumes, func(o corev1.Volume) bool { return o.Name == v.Name })
	pod.Spec.Volumes = append(pod.Spec.Volumes, v)
}

// configInitContainer writes the runner's config with the cache secret
// (the scaler's render-runner-config). It fits the restricted Pod Security
// level, so it adds no need to the runner pod's.
func configInitContainer(cache CacheOptions) corev1.Container {
	return corev1.Container{
		Name:    ConfigInitContainer,
		Image:   cache.Image,
		Command: []string{"gitea-runner-scaler", "render-runner-config"},
		Env: []corev1.EnvVar{
			{Name: renderTemplateEnv, Value: ConfigPath},
			{Name: renderOutEnv, Value: RenderedConfigPath},
			{Name: runnerconfig.SecretEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: cache.SecretName},
				Key:                  CacheSecretKey,
				// Optional: a namespace without the Secret gets runners
				// with the cache off, not runners that never start.
				Optional: ptr.To(true),
			}}},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: ConfigVolume, MountPath: ConfigDir, ReadOnly: true},
			{Name: RenderedConfigVolume, MountPath: RenderedConfigDir},
		},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true),
			RunAsUser:                ptr.To[int64](65532),
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
}

// Grace is the grace period of a runner pod: what the kubelet gives it
// after SIGTERM before it kills it.
func Grace(pod *corev1.PodTemplateSpec) time.Duration {
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return corev1.DefaultTerminationGracePeriodSeconds * time.Second
}

// CurrentGrace is the grace period of the pods Build makes for the group now:
// the grace its new runner Jobs get, whose config is under
// ConfigKeyFor(grace) (ConfigFor renders it).
func CurrentGrace(rg *v1alpha1.RunnerGroup, opts Options) (time.Duration, error) {
	job, err := Build(rg, NewName(rg.Name), 1, opts)
	if err != nil {
		return 0, err
	}
	return Grace(&job.Spec.Template), nil
}

// ConfigFor renders the runner config of the group's runner pods with the
// grace period grace: the platform's layers and spec.runnerConfig
// (runnerconfig.Merge), with the shutdown_timeout made from grace, and the
// namespace's shared cache server when there is one (the secret is added
// in the pod: reserveCache).
func ConfigFor(rg *v1alpha1.RunnerGroup, opts Options, grace time.Duration) ([]byte, error) {
	var cache runnerconfig.Cache
	if opts.Cache.Enabled() {
		cache.ExternalServer = opts.Cache.URLFor(rg.Namespace)
	}
	merged := runnerconfig.Merge(opts.Config.Defaults, rg.Spec.RunnerConfig, opts.Config.Pinned)
	return runnerconfig.Render(merged, grace, cache)
}

// checkStateDir refuses a runner container with a volume mounted where the
// .runner state file would survive a container restart: at
// RunnerStateDir, above it, or on the file itself.
func checkStateDir(pod *corev1.PodTemplateSpec) error {
	for _, c := range pod.Spec.Containers {
		if c.Name != ContainerName {
			continue
		}
		stateFile := path.Join(RunnerStateDir, ".runner")
		for _, m := range c.VolumeMounts {
			p := path.Clean(m.MountPath)
			if p == stateFile || p == RunnerStateDir || strings.HasPrefix(RunnerStateDir, strings.TrimSuffix(p, "/")+"/") {
				return fmt.Errorf("the runner container mounts volume %q at %s, which would keep act_runner's state file %s across container restarts; a restarted runner would then reuse a spent ephemeral registration: mount it elsewhere", m.Name, m.MountPath, stateFile)
			}
		}
	}
	return nil
}

// IsActive reports whether a runner Job still holds a slot: until it has a
// Complete or Failed condition. A failed Job must not hold a slot while it
// waits for its TTL to delete it.
func IsActive(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return false
		}
	}
	return true
}

// GiteaJobID is the Gitea job a runner Job was started for, from its label,
// or 0 when the label is missing or unreadable.
func GiteaJobID(j *batchv1.Job) int64 {
	id, err := strconv.ParseInt(j.Labels[v1alpha1.LabelGiteaJobID], 10, 64)
	if err != nil || id <= 0 {
		return 0
	}
	return id
}

// SplitRunnerName reads a runner name made by RunnerName: the group, the
// runner Job and the owner tag. ok is false for any other name.
func SplitRunnerName(runnerName string) (group, jobName, tag string, ok bool) {
	jobName, tag, ok = cutLast(runnerName, "-")
	if !ok || len(tag) != ownerTagLen || strings.Trim(tag, "0123456789abcdef") != "" {
		return "", "", "", false
	}
	group, _, ok = cutLast(jobName, "-")
	if !ok || group == "" || !IsJobName(group, jobName) {
		return "", "", "", false
	}
	return group, jobName, tag, true
}
