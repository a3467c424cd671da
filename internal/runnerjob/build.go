package runnerjob

import (
	"cmp"
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
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/podtemplate"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerconfig"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerlabels"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// Build returns the runner Job for one Gitea job, or for the warm pool when
// giteaJobID is negative. Its pod is built in
// layers (internal/podtemplate has the merge rules): the built-in pod
// (DefaultPod) < the install-wide template (opts.Template) < the group's
// spec.template; then what the scaler reserves is put back (reserve), so no
// layer can change it.
//
// The runner registers in one of two ways. By default the scaler has
// registered it already (credentials.go): the pod gets the runner's own
// state file, read-only at StatePath, and no registration token, so its
// container, restarted or not, never registers. With
// opts.SelfRegistration (a platform whose runner image must register
// itself) the pod gets the registration token by secretKeyRef and
// registers at every container start: the state file then lives in the
// container's own writable layer (RunnerStateDir), where no volume may be
// mounted (checkStateDir), so a restart never reuses a spent ephemeral
// identity, which Gitea revokes once it takes a task.
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
	if !opts.SelfRegistration {
		mountState(&pod, name)
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
				v1alpha1.AnnotationRunnerScope: scope.Of(&rg.Spec).Stored(),
			},
			OwnerReferences: []metav1.OwnerReference{rg.ControllerRef()},
		},
		Spec: batchv1.JobSpec{
			TTLSecondsAfterFinished: ptr.To(opts.TTLSecondsAfterFinished),
			Template:                pod,
		},
	}, nil
}

// DefaultPod is the built-in runner pod of opts.Flavour, before any
// template. Privileged (the default): the dind-rootless act_runner,
// privileged (its Docker daemon needs it), with
// requests and limits a typical CI job fits in, Docker's data on a
// size-limited emptyDir, no ServiceAccount token and a grace period for
// act_runner to report a cancelled job. The README's "Runner pods" section
// says why each value.
//
// DOCKER_HOST is left unset: the dind-rootless image starts its own Docker
// daemon and serves it on a unix socket that act_runner finds by default.
// UserNamespaced: the same pod without privilege (userNamespaced).
func DefaultPod(opts Options) corev1.PodTemplateSpec {
	pod := privilegedPod(opts)
	switch opts.Flavour {
	case v1alpha1.FlavourUserNamespaced:
		userNamespaced(&pod, opts.UserNamespaced)
	case v1alpha1.FlavourHost:
		hostOnly(&pod)
	}
	return pod
}

// hostUID is the runner's user in Gitea's dind-rootless image (rootless),
// which owns its /data. Pod Security cannot tell a user given by name
// from root, so the pod says the number.
const hostUID = 1000

// hostOnly turns the privileged pod into the Host flavour's: the same
// image's runner alone (its run.sh, as the basic image starts it), with no
// Docker daemon, so no privilege and nothing its jobs' containers need:
// as uid 1000, no capability, no privilege escalation, the runtime's
// seccomp profile. It passes Pod Security restricted. Jobs run on the pod
// itself (host labels: runnerlabels.ForGroup).
func hostOnly(pod *corev1.PodTemplateSpec) {
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](hostUID),
		RunAsGroup:     ptr.To[int64](hostUID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	c := &pod.Spec.Containers[0]
	c.Command = []string{HostRunScript}
	c.SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	// No Docker daemon: no data volume, no s6 service to stop first.
	c.VolumeMounts = nil
	c.Env = nil
	c.Lifecycle = nil
	pod.Spec.Volumes = nil
}

// userNamespaced turns the privileged pod into the UserNamespaced
// flavour's, the smallest change under which the rootless daemon starts
// and runs job containers with a network (the chart's
// docs/runner-pods.md has each setting's error without it): a user
// namespace of its own, so the pod's root and capabilities are not the
// node's; the platform's image, whose newuidmap can map the daemon's ids
// in it; an unmasked /proc, without which the kernel refuses the job
// containers' own /proc (Pod Security admits it at baseline only for a
// pod with hostUsers false, from Kubernetes 1.35 or with the API server's
// gate before); the Localhost seccomp profile that lets the daemon's
// rootlesskit and runc unshare and mount in that namespace; and
// /dev/net/tun, by the device plugin's resource, for slirp4netns.
func userNamespaced(pod *corev1.PodTemplateSpec, u UserNamespacedPod) {
	pod.Spec.HostUsers = ptr.To(false)
	c := &pod.Spec.Containers[0]
	c.Image = u.Image
	c.SecurityContext = &corev1.SecurityContext{
		ProcMount: ptr.To(corev1.UnmaskedProcMount),
		SeccompProfile: &corev1.SeccompProfile{
			Type:             corev1.SeccompProfileTypeLocalhost,
			LocalhostProfile: ptr.To(u.SeccompProfile),
		},
	}
	one := resource.MustParse("1")
	c.Resources.Requests[u.TunResource] = one
	c.Resources.Limits[u.TunResource] = one
}

func privilegedPod(opts Options) corev1.PodTemplateSpec {
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
				// The rootless daemon sets its data root's mode at every
				// start, which only the directory's owner may, and an
				// emptyDir's root is root's: its data root is therefore
				// $XDG_DATA_HOME/docker, a folder it makes itself inside
				// the emptyDir. A rootful daemon ignores the variable.
				Env: []corev1.EnvVar{{Name: "XDG_DATA_HOME", Value: DockerDataDir}},
				// The dind-rootless image runs its own Docker daemon,
				// which needs a privileged container; runner namespaces
				// must therefore admit privileged pods, unless a template
				// runs the runner without privilege (see the README).
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
				Lifecycle:       &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: RunnerFirstStop}}},
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

	ours := []corev1.EnvVar{
		{Name: "GITEA_INSTANCE_URL", Value: rg.Spec.Gitea.URL},
		{Name: "GITEA_RUNNER_EPHEMERAL", Value: "true"},
		{Name: "GITEA_RUNNER_NAME", Value: RunnerName(rg, name)},
		{Name: "GITEA_RUNNER_LABELS", Value: strings.Join(runnerlabels.ForGroup(&rg.Spec, opts.DefaultLabels), ",")},
	}
	if opts.SelfRegistration {
		// The token is only ever referenced, never copied into the Job:
		// the Secret is spec.registrationToken's or the one the scaler
		// minted.
		regToken := rg.RegistrationTokenRef()
		ours = slices.Insert(ours, 1, corev1.EnvVar{Name: "GITEA_RUNNER_REGISTRATION_TOKEN", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: regToken.Name},
				Key:                  regToken.Key,
			},
		}})
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
	keepConfigVolumesOurs(pod, opts.Cache.Enabled())
}

// keepConfigVolumesOurs drops every mount of the config volumes but the
// scaler's own: a template's init container, sidecar or other container
// that mounted the rendered config's emptyDir could rewrite it after the
// scaler's init container wrote it, and give the runner a config that
// skipped the checks on spec.runnerConfig.
// Only the runner and, with the shared cache, the scaler's init container
// (reserveCache put it in place of any of that name) keep theirs.
func keepConfigVolumesOurs(pod *corev1.PodTemplateSpec, withInit bool) {
	reserved := func(m corev1.VolumeMount) bool { return m.Name == ConfigVolume || m.Name == RenderedConfigVolume }
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; !withInit || c.Name != ConfigInitContainer {
			c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, reserved)
		}
	}
	for i := range pod.Spec.Containers {
		if c := &pod.Spec.Containers[i]; c.Name != ContainerName {
			c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, reserved)
		}
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

// MarkScope records on a runner Job where its runner registers and
// whether the scaler knows it.
func MarkScope(j *batchv1.Job, p scope.Place, known bool) {
	if j.Annotations == nil {
		j.Annotations = map[string]string{}
	}
	j.Annotations[v1alpha1.AnnotationRunnerScope] = p.Stored()
	j.Annotations[v1alpha1.AnnotationRunnerScopeKnown] = strconv.FormatBool(known)
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
