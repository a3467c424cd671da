package runnerjob

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerconfig"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

func group() *v1alpha1.RunnerGroup {
	return &v1alpha1.RunnerGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: "runners", UID: "uid-1"},
		Spec: v1alpha1.RunnerGroupSpec{
			Scope: v1alpha1.ScopeOrg, Org: "acme",
			Gitea:             v1alpha1.GiteaSpec{URL: "https://gitea.example.com"},
			Labels:            []string{"gpu", "ubuntu-latest:docker://my/image"},
			MaxActiveRunners:  3,
			RegistrationToken: &v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "reg", Key: "token"}},
			AuthToken:         v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "api", Key: "token"}},
		},
	}
}

func env(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

func TestBuildFollowsTheSpec(t *testing.T) {
	opts := DefaultOptions()
	opts.DefaultLabels = []string{"ubuntu-latest:docker://default", "ubuntu-22.04:docker://b"}
	j, err := Build(group(), "ci-x2v7k", 42, opts)
	require.NoError(t, err)

	assert.Equal(t, "ci-x2v7k", j.Name)
	assert.Equal(t, "runners", j.Namespace)
	assert.Equal(t, "ci", j.Labels["gitea.bpg.pw/runnergroup-name"])
	assert.Equal(t, "gitea-runner-operator", j.Labels["gitea.bpg.pw/managed-by"])
	assert.Equal(t, "42", j.Labels["gitea.bpg.pw/gitea-job-id"])
	require.Len(t, j.OwnerReferences, 1)
	ref := j.OwnerReferences[0]
	assert.Equal(t, "gitea.bpg.pw/v1alpha1", ref.APIVersion)
	assert.Equal(t, "RunnerGroup", ref.Kind)
	assert.Equal(t, "ci", ref.Name)
	assert.EqualValues(t, "uid-1", ref.UID)
	assert.True(t, *ref.Controller)
	assert.EqualValues(t, 600, *j.Spec.TTLSecondsAfterFinished)

	pod := j.Spec.Template
	assert.Equal(t, corev1.RestartPolicyOnFailure, pod.Spec.RestartPolicy)
	assert.Equal(t, "false", pod.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"])
	assert.Equal(t, "ci", pod.Labels["gitea.bpg.pw/runnergroup-name"])
	assert.Equal(t, "42", pod.Labels["gitea.bpg.pw/gitea-job-id"])
	require.Len(t, pod.Spec.Containers, 1)
	c := pod.Spec.Containers[0]
	assert.Equal(t, "runner", c.Name)
	assert.Equal(t, "gitea/runner:3.1.0-dind-rootless", c.Image, "a pinned release, not nightly")
	assert.True(t, *c.SecurityContext.Privileged, "dind needs a privileged container")

	e := env(c)
	assert.Equal(t, "https://gitea.example.com", e["GITEA_INSTANCE_URL"].Value)
	assert.Equal(t, "true", e["GITEA_RUNNER_EPHEMERAL"].Value)
	assert.Equal(t, "ci-x2v7k-"+OwnerTag("uid-1"), e["GITEA_RUNNER_NAME"].Value, "the runner registers with the Job's name and the group's tag")
	assert.Equal(t, e["GITEA_RUNNER_NAME"].Value, j.Annotations["gitea.bpg.pw/runner-name"], "the scaler reads the runner's name back from the Job")
	assert.Equal(t, e["GITEA_RUNNER_NAME"].Value, RunnerNameOf(j))
	assert.Equal(t, "gpu,ubuntu-latest:docker://my/image,ubuntu-22.04:docker://b", e["GITEA_RUNNER_LABELS"].Value)
}

// selfRegistering are the default options of a platform that pins
// self-registration: the pod gets the registration token by reference.
func selfRegistering() Options {
	opts := DefaultOptions()
	opts.SelfRegistration = true
	return opts
}

func TestBuildNeverCarriesASecretValue(t *testing.T) {
	j, err := Build(group(), "ci-x2v7k", 1, selfRegistering())
	require.NoError(t, err)
	reg := env(j.Spec.Template.Spec.Containers[0])["GITEA_RUNNER_REGISTRATION_TOKEN"]
	assert.Empty(t, reg.Value, "the token must come from the Secret, never as a literal")
	require.NotNil(t, reg.ValueFrom)
	require.NotNil(t, reg.ValueFrom.SecretKeyRef)
	assert.Equal(t, "reg", reg.ValueFrom.SecretKeyRef.Name)
	assert.Equal(t, "token", reg.ValueFrom.SecretKeyRef.Key)
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		assert.NotContains(t, e.Name, "AUTH", "the API token stays with the scaler")
	}
}

func TestBuildReferencesTheMintedSecretWithoutARegistrationToken(t *testing.T) {
	rg := group()
	rg.Spec.RegistrationToken = nil
	j, err := Build(rg, "ci-x2v7k", 1, selfRegistering())
	require.NoError(t, err)
	reg := env(j.Spec.Template.Spec.Containers[0])["GITEA_RUNNER_REGISTRATION_TOKEN"]
	assert.Empty(t, reg.Value, "the minted token stays in its Secret")
	require.NotNil(t, reg.ValueFrom)
	require.NotNil(t, reg.ValueFrom.SecretKeyRef)
	assert.Equal(t, "ci-registration-token", reg.ValueFrom.SecretKeyRef.Name)
	assert.Equal(t, "token", reg.ValueFrom.SecretKeyRef.Key)
}

// A restarted container must register afresh: nothing that survives a
// container restart (a volume) may hold act_runner's state file. Docker's
// data is on an emptyDir elsewhere.
func TestBuildKeepsRunnerStateOutOfVolumes(t *testing.T) {
	j, err := Build(group(), "ci-x2v7k", 1, DefaultOptions())
	require.NoError(t, err)
	spec := j.Spec.Template.Spec
	for _, c := range spec.Containers {
		for _, m := range c.VolumeMounts {
			assert.False(t, strings.HasPrefix(RunnerStateDir+"/", strings.TrimSuffix(m.MountPath, "/")+"/"),
				"volume at %s would keep %s/.runner across restarts", m.MountPath, RunnerStateDir)
		}
		for _, e := range c.Env {
			assert.NotEqual(t, "DOCKER_HOST", e.Name, "dind-rootless serves Docker on its own unix socket")
		}
	}
}

// The defaults a reviewer asked for: a bounded pod (requests and limits on
// cpu, memory and ephemeral storage), Docker's data on a size-limited
// emptyDir whose data root the rootless daemon owns, no ServiceAccount
// token, time to report a cancelled job.
func TestBuildDefaults(t *testing.T) {
	j, err := Build(group(), "ci-x2v7k", 1, DefaultOptions())
	require.NoError(t, err)
	spec := j.Spec.Template.Spec
	c := spec.Containers[0]
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		assert.Contains(t, c.Resources.Requests, r)
		assert.Contains(t, c.Resources.Limits, r)
	}
	require.Len(t, spec.Volumes, 3)
	v := spec.Volumes[0]
	assert.Equal(t, "docker-data", v.Name)
	require.NotNil(t, v.EmptyDir)
	assert.Equal(t, "20Gi", v.EmptyDir.SizeLimit.String())
	assert.Equal(t, []corev1.VolumeMount{
		{Name: "docker-data", MountPath: "/home/rootless/.local/share/docker"},
		{Name: "gitea-runner-config", MountPath: "/etc/gitea-runner", ReadOnly: true},
		{Name: StateVolume, MountPath: StatePath, SubPath: StateKey, ReadOnly: true},
	}, c.VolumeMounts, "no registration token: the runner's own .runner, read-only")
	assert.NotContains(t, env(c), "GITEA_RUNNER_REGISTRATION_TOKEN")
	assert.Contains(t, c.Env, corev1.EnvVar{Name: "XDG_DATA_HOME", Value: "/home/rootless/.local/share/docker"},
		"the rootless daemon's data root is a folder it makes inside the emptyDir, which is root's")
	limit := c.Resources.Limits[corev1.ResourceEphemeralStorage]
	assert.Equal(t, 1, limit.Cmp(*v.EmptyDir.SizeLimit), "the ephemeral-storage limit leaves room beyond Docker's data")
	require.NotNil(t, spec.AutomountServiceAccountToken)
	assert.False(t, *spec.AutomountServiceAccountToken)
	require.NotNil(t, spec.TerminationGracePeriodSeconds)
	assert.Equal(t, int64(3*60*60+120), *spec.TerminationGracePeriodSeconds, "the runner's job timeout (3h) and time to report")
	assert.Equal(t, "false", j.Spec.Template.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"])
}

// TestTheRunnerStopsBeforeItsDockerDaemon: on a drain the built-in pod's
// preStop stops the runner's s6 service alone, so the image's s6-svscan
// does not stop the Docker daemon under a running job (issue 34.2); a
// template's own lifecycle replaces the hook, by the merge rules.
func TestTheRunnerStopsBeforeItsDockerDaemon(t *testing.T) {
	own := &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/true"}}}}
	tests := []struct {
		name     string
		template *corev1.PodTemplateSpec
		want     []string
	}{
		{name: "built-in", want: RunnerFirstStop},
		{name: "a template's own hook", want: own.PreStop.Exec.Command, template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: ContainerName, Lifecycle: own}},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := group()
			rg.Spec.Template = tt.template

			j, err := Build(rg, "ci-abcde", 1, DefaultOptions())

			require.NoError(t, err)
			c := j.Spec.Template.Spec.Containers[0]
			require.NotNil(t, c.Lifecycle)
			require.NotNil(t, c.Lifecycle.PreStop)
			assert.Equal(t, tt.want, c.Lifecycle.PreStop.Exec.Command)
		})
	}
	assert.Contains(t, strings.Join(RunnerFirstStop, " "), "s6-svc -d /etc/s6/gitea-runner", "the service name of Gitea's dind images")
}

// TestTheRunnerPodsGraceIsTheOptionsUnlessATemplateSetsIt (issue 22.3):
// the built-in pod's terminationGracePeriodSeconds is the scaler's option
// (the chart's scaler.runnerTerminationGracePeriodSeconds); runnerTemplate
// and then a group's spec.template replace it, by the merge rules.
func TestTheRunnerPodsGraceIsTheOptionsUnlessATemplateSetsIt(t *testing.T) {
	grace := func(s int64) *corev1.PodTemplateSpec {
		return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To(s)}}
	}
	tests := []struct {
		name           string
		install, group *corev1.PodTemplateSpec
		option, want   int64
	}{
		{name: "the option", option: 600, want: 600},
		{name: "runnerTemplate over the option", option: 600, install: grace(7200), want: 7200},
		{name: "the group's template over both", option: 600, install: grace(7200), group: grace(900), want: 900},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := DefaultOptions()
			opts.TerminationGracePeriodSeconds = tt.option
			opts.Template = tt.install
			rg := group()
			rg.Spec.Template = tt.group

			j, err := Build(rg, "ci-abcde", 1, opts)

			require.NoError(t, err)
			assert.Equal(t, tt.want, *j.Spec.Template.Spec.TerminationGracePeriodSeconds)
		})
	}
}

// TestBuildLayers checks the precedence: built-in < install-wide template
// < the group's template, and that what the scaler reserves survives any
// template, even one admission did not check (the install-wide one, or a
// group stored under an older CRD).
func TestBuildLayers(t *testing.T) {
	opts := DefaultOptions()
	opts.Template = &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"gitea.bpg.pw/runnergroup-name": "stolen", "tier": "ci"}},
		Spec: corev1.PodSpec{
			RuntimeClassName: ptr.To("platform"),
			NodeSelector:     map[string]string{"pool": "ci"},
			RestartPolicy:    corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "runner", Image: "mirror/act_runner:0.2.13-dind-rootless", Env: []corev1.EnvVar{
				{Name: "GITEA_INSTANCE_URL", Value: "https://evil.example.com"}, {Name: "HTTP_PROXY", Value: "http://proxy"},
			}}},
		},
	}
	rg := group()
	rg.Spec.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		NodeSelector: map[string]string{"pool": "gpu"},
		Containers: []corev1.Container{
			{Name: "runner", Env: []corev1.EnvVar{{Name: "GITEA_RUNNER_NAME", Value: "mine"}}},
			{Name: "sidecar", Image: "busybox", Env: []corev1.EnvVar{{Name: "GITEA_RUNNER_LABELS", Value: "x"}}},
		},
	}}
	j, err := Build(rg, "ci-x2v7k", 7, opts)
	require.NoError(t, err)
	pod := j.Spec.Template
	assert.Equal(t, "platform", *pod.Spec.RuntimeClassName, "the install-wide template over the built-in pod")
	assert.Equal(t, map[string]string{"pool": "gpu"}, pod.Spec.NodeSelector, "the group's template over the install-wide one")
	assert.Equal(t, "mirror/act_runner:0.2.13-dind-rootless", pod.Spec.Containers[0].Image)
	assert.Equal(t, corev1.RestartPolicyOnFailure, pod.Spec.RestartPolicy, "reserved")
	assert.Equal(t, "ci", pod.Labels["gitea.bpg.pw/runnergroup-name"], "reserved")
	assert.Equal(t, "ci", pod.Labels["tier"])
	e := env(pod.Spec.Containers[0])
	assert.Equal(t, "https://gitea.example.com", e["GITEA_INSTANCE_URL"].Value, "reserved")
	assert.Equal(t, "ci-x2v7k-"+OwnerTag("uid-1"), e["GITEA_RUNNER_NAME"].Value, "reserved")
	assert.Equal(t, "http://proxy", e["HTTP_PROXY"].Value)
	names := map[string]int{}
	for _, v := range pod.Spec.Containers[0].Env {
		names[v.Name]++
	}
	for n, count := range names {
		assert.Equal(t, 1, count, "env %s once", n)
	}
	require.Len(t, pod.Spec.Containers, 2)
	assert.Empty(t, pod.Spec.Containers[1].Env, "no GITEA_RUNNER_* in other containers either")
}

func TestBuildRefusesAVolumeOverTheRunnerState(t *testing.T) {
	for _, mountPath := range []string{"/", "/data", "/data/", "/data/.runner"} {
		t.Run(mountPath, func(t *testing.T) {
			rg := group()
			rg.Spec.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "runner", VolumeMounts: []corev1.VolumeMount{{Name: "keep", MountPath: mountPath}}}},
				Volumes:    []corev1.Volume{{Name: "keep", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			}}
			_, err := Build(rg, "ci-x2v7k", 1, DefaultOptions())
			require.Error(t, err)
			assert.Contains(t, err.Error(), `mounts volume "keep"`)
			assert.ErrorContains(t, CheckTemplate(rg, DefaultOptions()), "state file")
		})
	}
	rg := group()
	rg.Spec.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "runner", VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/data-cache"}}}},
	}}
	assert.NoError(t, CheckTemplate(rg, DefaultOptions()), "a path that only starts with /data is elsewhere")
}

func TestCheckTemplateRefusesWhatAGroupMayNotSet(t *testing.T) {
	opts := DefaultOptions()
	opts.Pinned = []string{"spec.runtimeClassName"}
	rg := group()
	rg.Spec.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{RuntimeClassName: ptr.To("runc"), ServiceAccountName: "admin"}}
	err := CheckTemplate(rg, opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.runtimeClassName is pinned")
	assert.Contains(t, err.Error(), "spec.serviceAccountName is not allowed")
}

func TestNewNameAndIsJobName(t *testing.T) {
	name := NewName("ci")
	assert.Len(t, name, len("ci-")+5)
	assert.True(t, IsJobName("ci", name))
	assert.NotEqual(t, name, NewName("ci"))

	tests := []struct {
		group, name string
		want        bool
	}{
		{"ci", "ci-x2v7k", true},
		{"ci", "ci-gpu-x2v7k", false},
		{"ci-gpu", "ci-gpu-x2v7k", true},
		{"ci", "ci-x2v7", false},
		{"ci", "ci-X2V7K", false},
		{"ci", "other-x2v7k", false},
		{"ci", "", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, IsJobName(tt.group, tt.name), "%s %s", tt.group, tt.name)
	}
}

// Two groups named ci in two namespaces register runners that neither
// takes for its own; a group deleted and made again does not adopt the old
// one's runners either.
func TestJobOfRunnerIsCertainOfTheOwner(t *testing.T) {
	a := group()
	b := group()
	b.Namespace, b.UID = "other", "uid-2"
	gpu := group()
	gpu.Name, gpu.UID = "ci-gpu", "uid-3"
	require.NotEqual(t, OwnerTag(a.UID), OwnerTag(b.UID))
	assert.Len(t, OwnerTag(a.UID), 8)

	tests := []struct {
		name   string
		rg     *v1alpha1.RunnerGroup
		runner string
		job    string
	}{
		{"own runner", a, RunnerName(a, "ci-x2v7k"), "ci-x2v7k"},
		{"same name, other namespace", a, RunnerName(b, "ci-x2v7k"), ""},
		{"the other namespace's own", b, RunnerName(b, "ci-x2v7k"), "ci-x2v7k"},
		{"a longer group's runner", a, RunnerName(gpu, "ci-gpu-x2v7k"), ""},
		{"a longer group's runner with our tag", a, "ci-gpu-x2v7k-" + OwnerTag(a.UID), ""},
		{"the longer group's own", gpu, RunnerName(gpu, "ci-gpu-x2v7k"), "ci-gpu-x2v7k"},
		{"the old scheme: the Job's name alone", a, "ci-x2v7k", ""},
		{"no tag", a, "ci-x2v7k-", ""},
		{"someone else's runner", a, "build-host-1", ""},
		{"empty", a, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job, ok := JobOfRunner(tt.rg, tt.runner)
			assert.Equal(t, tt.job != "", ok)
			assert.Equal(t, tt.job, job)
		})
	}
}

func TestSplitRunnerName(t *testing.T) {
	a := group()
	gpu := group()
	gpu.Name, gpu.UID = "ci-gpu", "uid-3"
	tests := []struct {
		runner, group, job, tag string
	}{
		{RunnerName(a, "ci-x2v7k"), "ci", "ci-x2v7k", OwnerTag(a.UID)},
		{RunnerName(gpu, "ci-gpu-x2v7k"), "ci-gpu", "ci-gpu-x2v7k", OwnerTag(gpu.UID)},
		{"ci-x2v7k", "", "", ""},
		{"ci-x2v7k-ABCDEF12", "", "", ""},
		{"ci-x2v7-" + OwnerTag(a.UID), "", "", ""},
		{"build-host-1", "", "", ""},
		{"", "", "", ""},
	}
	for _, tt := range tests {
		group, job, tag, ok := SplitRunnerName(tt.runner)
		assert.Equal(t, tt.group != "", ok, tt.runner)
		assert.Equal(t, []string{tt.group, tt.job, tt.tag}, []string{group, job, tag}, tt.runner)
	}
}

func TestRunnerNameOfAJobFromBeforeTheTag(t *testing.T) {
	assert.Equal(t, "ci-x2v7k", RunnerNameOf(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "ci-x2v7k"}}),
		"a Job made before the annotation registered under its own name")
}

func TestIsActive(t *testing.T) {
	cond := func(typ batchv1.JobConditionType, s corev1.ConditionStatus) *batchv1.Job {
		return &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: typ, Status: s}}}}
	}
	assert.True(t, IsActive(&batchv1.Job{}))
	assert.False(t, IsActive(cond(batchv1.JobComplete, corev1.ConditionTrue)))
	assert.False(t, IsActive(cond(batchv1.JobFailed, corev1.ConditionTrue)), "a failed Job frees its slot before its TTL")
	assert.True(t, IsActive(cond(batchv1.JobFailed, corev1.ConditionFalse)))
	assert.True(t, IsActive(cond(batchv1.JobSuspended, corev1.ConditionTrue)))
}

// Workflows are untrusted code: the built-in runner pod gets no
// Kubernetes credentials.
func TestBuildMountsNoServiceAccountToken(t *testing.T) {
	j, err := Build(group(), "ci-abc12", 1, DefaultOptions())
	require.NoError(t, err)
	spec := j.Spec.Template.Spec
	require.NotNil(t, spec.AutomountServiceAccountToken)
	assert.False(t, *spec.AutomountServiceAccountToken)
}

// The chart's scaler.giteaCA adds this to the runner template (helm
// unittest gitea_ca_runner_pods_test.yaml renders the same text): the
// scaler must accept it as an install-wide template and the runner
// container must end up with the mount and SSL_CERT_DIR, whatever a
// group's template adds beside them.
const chartGiteaCATemplate = `
spec:
  containers:
  - env:
    - name: SSL_CERT_DIR
      value: /etc/ssl/certs:/etc/gitea-ca
    name: runner
    volumeMounts:
    - mountPath: /etc/gitea-ca
      name: gitea-ca
      readOnly: true
  volumes:
  - configMap:
      items:
      - key: bundle.pem
        path: ca.crt
      name: corp-ca
      optional: true
    name: gitea-ca
`

func TestBuildCarriesTheChartsGiteaCAIntoTheRunner(t *testing.T) {
	var tmpl corev1.PodTemplateSpec
	require.NoError(t, yaml.UnmarshalStrict([]byte(chartGiteaCATemplate), &tmpl))
	opts := DefaultOptions()
	opts.Template = &tmpl
	require.NoError(t, CheckInstallTemplate(opts), "an install-wide template the scaler accepts")
	rg := group()
	rg.Spec.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "runner", Env: []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy"}}}},
		Volumes:    []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}}
	require.NoError(t, CheckTemplate(rg, opts))
	j, err := Build(rg, "ci-x2v7k", 1, opts)
	require.NoError(t, err)
	pod := j.Spec.Template.Spec
	runner := pod.Containers[0]
	assert.Equal(t, DefaultImage, runner.Image, "the built-in runner, merged")
	assert.Equal(t, "/etc/ssl/certs:/etc/gitea-ca", env(runner)["SSL_CERT_DIR"].Value)
	assert.Equal(t, "http://proxy", env(runner)["HTTPS_PROXY"].Value)
	assert.Contains(t, runner.VolumeMounts, corev1.VolumeMount{Name: "gitea-ca", MountPath: "/etc/gitea-ca", ReadOnly: true})
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	require.Contains(t, vols, "gitea-ca")
	require.NotNil(t, vols["gitea-ca"].ConfigMap)
	assert.Equal(t, "corp-ca", vols["gitea-ca"].ConfigMap.Name)
	assert.True(t, *vols["gitea-ca"].ConfigMap.Optional, "a namespace without the bundle still runs runners")
	assert.Contains(t, vols, "cache")
}

// TestBuildMountsTheRenderedConfig: the runner reads the config the scaler
// renders for the group (its ConfigMap, mounted read-only, named in
// CONFIG_FILE), whatever a template says: a CONFIG_FILE, a volume of the
// same name or a mount at the same path of a template's would skip the
// checks on spec.runnerConfig.
func TestBuildMountsTheRenderedConfig(t *testing.T) {
	opts := DefaultOptions()
	opts.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "runner", Env: []corev1.EnvVar{{Name: "CONFIG_FILE", Value: "/etc/mine/config.yaml"}},
			VolumeMounts: []corev1.VolumeMount{{Name: "mine", MountPath: "/etc/gitea-runner/"}, {Name: "mine", MountPath: "/etc/gitea-runner/config.yaml", SubPath: "c.yaml"}}}},
		Volumes: []corev1.Volume{
			{Name: "mine", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "gitea-runner-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "other"}}}},
		},
	}}
	j, err := Build(group(), "ci-x2v7k", 1, opts)
	require.NoError(t, err)
	spec := j.Spec.Template.Spec
	c := spec.Containers[0]
	assert.Equal(t, corev1.EnvVar{Name: "CONFIG_FILE", Value: "/etc/gitea-runner/config.yaml"}, env(c)["CONFIG_FILE"])
	n := 0
	for _, e := range c.Env {
		if e.Name == "CONFIG_FILE" {
			n++
		}
	}
	assert.Equal(t, 1, n, "one CONFIG_FILE, the scaler's")
	assert.Equal(t, []corev1.VolumeMount{{Name: "gitea-runner-config", MountPath: "/etc/gitea-runner", ReadOnly: true}}, mountsUnder(c, "/etc/gitea-runner"))
	cfg := volumesNamed(spec, "gitea-runner-config")
	require.Len(t, cfg, 1)
	require.NotNil(t, cfg[0].ConfigMap)
	assert.Equal(t, "ci-runner-config", cfg[0].ConfigMap.Name)
}

// TestConfigFollowsTheGrace is issue 22.3 and issue 32.5: the runner's
// shutdown_timeout follows the grace period of its own pod, whichever
// layer sets it: each Job mounts the key of its pod's grace, and that key
// holds the config made from that grace.
func TestConfigFollowsTheGrace(t *testing.T) {
	tests := map[string]struct {
		install, group *int64
		key, want      string
	}{
		"the built-in grace, 3h and 120s":  {key: "config-grace-10920s.yaml", want: "shutdown_timeout: 3h0m0s"},
		"the platform's, 1h":               {install: ptr.To[int64](3600), key: "config-grace-3600s.yaml", want: "shutdown_timeout: 58m0s"},
		"the group's, over the platform's": {install: ptr.To[int64](3 * 3600), group: ptr.To[int64](40), key: "config-grace-40s.yaml", want: "shutdown_timeout: 20s"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			opts := DefaultOptions()
			if tc.install != nil {
				opts.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: tc.install}}
			}
			rg := group()
			if tc.group != nil {
				rg.Spec.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: tc.group}}
			}
			j, err := Build(rg, "ci-x2v7k", 1, opts)
			require.NoError(t, err)
			key, ok := MountedConfigKey("ci", j)
			require.True(t, ok)
			assert.Equal(t, tc.key, key)
			cfg := volumesNamed(j.Spec.Template.Spec, ConfigVolume)
			require.Len(t, cfg, 1)
			assert.Equal(t, []corev1.KeyToPath{{Key: tc.key, Path: "config.yaml"}}, cfg[0].ConfigMap.Items, "the runner reads it as CONFIG_FILE names it")
			grace, err := CurrentGrace(rg, opts)
			require.NoError(t, err)
			assert.Equal(t, tc.key, ConfigKeyFor(grace))
			out, err := ConfigFor(rg, opts, grace)
			require.NoError(t, err)
			assert.Contains(t, string(out), tc.want)
		})
	}
}

// TestMountedConfigKeyReadsOnlyTheGroupsConfig: a Job made before each
// grace had its key mounts "config.yaml"; a Job whose config volume names
// another ConfigMap mounts nothing of the group's.
func TestMountedConfigKeyReadsOnlyTheGroupsConfig(t *testing.T) {
	j, err := Build(group(), "ci-x2v7k", 1, DefaultOptions())
	require.NoError(t, err)
	legacy := j.DeepCopy()
	volumesNamed(legacy.Spec.Template.Spec, ConfigVolume)[0].ConfigMap.Items[0].Key = ConfigKey
	key, ok := MountedConfigKey("ci", legacy)
	assert.True(t, ok)
	assert.Equal(t, ConfigKey, key)
	_, ok = MountedConfigKey("ci-gpu", j)
	assert.False(t, ok)
}

func cacheOptions() Options {
	opts := DefaultOptions()
	opts.Cache = CacheOptions{URL: "http://gitea-runner-cache.{namespace}.svc:8088/", SecretName: "gitea-runner-cache", Image: "ghcr.io/x/gitea-runner-scaler:1"}
	return opts
}

// TestBuildWithTheSharedCache: the runner reads the config the init
// container writes with the cache secret, which reaches the pod only
// through an optional secretKeyRef; a template cannot replace any of it.
func TestBuildWithTheSharedCache(t *testing.T) {
	opts := cacheOptions()
	opts.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "runner-config", Image: "evil"}, {Name: "mine", Image: "busybox"}},
		Containers:     []corev1.Container{{Name: "runner", VolumeMounts: []corev1.VolumeMount{{Name: "x", MountPath: "/run/gitea-runner/config.yaml", SubPath: "c"}}}},
		Volumes:        []corev1.Volume{{Name: "x", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}, {Name: "gitea-runner-config-rendered", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
	}}
	j, err := Build(group(), "ci-x2v7k", 1, opts)
	require.NoError(t, err)
	spec := j.Spec.Template.Spec

	require.Len(t, spec.InitContainers, 2)
	ic := spec.InitContainers[0]
	assert.Equal(t, "runner-config", ic.Name)
	assert.Equal(t, "ghcr.io/x/gitea-runner-scaler:1", ic.Image)
	assert.Equal(t, []string{"gitea-runner-scaler", "render-runner-config"}, ic.Command)
	assert.Equal(t, "mine", spec.InitContainers[1].Name, "the template's other init containers stay")
	secret := env(ic)[runnerconfig.SecretEnv]
	require.NotNil(t, secret.ValueFrom)
	require.NotNil(t, secret.ValueFrom.SecretKeyRef)
	assert.Empty(t, secret.Value)
	assert.Equal(t, "gitea-runner-cache", secret.ValueFrom.SecretKeyRef.Name)
	assert.Equal(t, "external_secret", secret.ValueFrom.SecretKeyRef.Key)
	assert.True(t, *secret.ValueFrom.SecretKeyRef.Optional, "a namespace without the Secret gets runners, with the cache off")
	assert.Equal(t, "/etc/gitea-runner/config.yaml", env(ic)["GITEA_RUNNER_CONFIG_TEMPLATE"].Value)
	assert.Equal(t, "/run/gitea-runner/config.yaml", env(ic)["GITEA_RUNNER_CONFIG_OUT"].Value)
	assert.False(t, *ic.SecurityContext.AllowPrivilegeEscalation)
	assert.True(t, *ic.SecurityContext.RunAsNonRoot)

	c := spec.Containers[0]
	assert.Equal(t, "/run/gitea-runner/config.yaml", env(c)["CONFIG_FILE"].Value)
	assert.Equal(t, []corev1.VolumeMount{{Name: "gitea-runner-config-rendered", MountPath: "/run/gitea-runner", ReadOnly: true}}, mountsUnder(c, "/run/gitea-runner"))
	rendered := volumesNamed(spec, "gitea-runner-config-rendered")
	require.Len(t, rendered, 1)
	require.NotNil(t, rendered[0].EmptyDir, "the template's volume of that name is replaced")
	assert.Equal(t, corev1.StorageMediumMemory, rendered[0].EmptyDir.Medium, "the secret never reaches the node's disk")
}

func TestBuildWithoutTheSharedCacheHasNoInitContainer(t *testing.T) {
	j, err := Build(group(), "ci-x2v7k", 1, DefaultOptions())
	require.NoError(t, err)
	assert.Empty(t, j.Spec.Template.Spec.InitContainers)
	assert.Equal(t, "/etc/gitea-runner/config.yaml", env(j.Spec.Template.Spec.Containers[0])["CONFIG_FILE"].Value)
}

func TestConfigNamesTheNamespacesCacheServer(t *testing.T) {
	out, err := ConfigFor(group(), cacheOptions(), time.Hour)
	require.NoError(t, err)
	assert.Contains(t, string(out), "cache:\n  enabled: true\n  external_server: http://gitea-runner-cache.runners.svc:8088/\n")
	assert.NotContains(t, string(out), "external_secret")

	out, err = ConfigFor(group(), DefaultOptions(), time.Hour)
	require.NoError(t, err)
	assert.Contains(t, string(out), "cache:\n  enabled: false\n")
}

// TestTheConfigInitContainerFitsRestricted: the init container the shared
// cache adds asks for nothing the restricted Pod Security level refuses,
// so it never changes what level a runner pod needs.
func TestTheConfigInitContainerFitsRestricted(t *testing.T) {
	j, err := Build(group(), "ci-x2v7k", 1, cacheOptions())
	require.NoError(t, err)
	spec := j.Spec.Template.Spec
	alone := corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		InitContainers: spec.InitContainers[:1],
		Containers:     []corev1.Container{spec.InitContainers[0]},
		Volumes:        spec.Volumes,
	}}
	alone.Spec.Containers[0].Name = "main"
	restricted := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "r", Labels: map[string]string{tenancy.LabelEnforce: "restricted"}}}
	assert.Empty(t, tenancy.PodSecurity(restricted, &alone, tenancy.Platform{}))
}

// mountsUnder is c's mounts at dir or below it.
func mountsUnder(c corev1.Container, dir string) []corev1.VolumeMount {
	var mounts []corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(m.MountPath, dir) {
			mounts = append(mounts, m)
		}
	}
	return mounts
}

// volumesNamed is the pod's volumes of that name (one, unless a template's
// was kept beside the scaler's).
func volumesNamed(spec corev1.PodSpec, name string) []corev1.Volume {
	var vols []corev1.Volume
	for _, v := range spec.Volumes {
		if v.Name == name {
			vols = append(vols, v)
		}
	}
	return vols
}

func TestMarkScopeSaysWhetherTheScopeIsKnown(t *testing.T) {
	j := &batchv1.Job{}
	assert.False(t, ScopeKnown(j), "a Job made before the annotation")
	_, ok := PlaceOfJob(j)
	assert.False(t, ok, "nor a place")
	acme := scope.New("https://x", v1alpha1.ScopeOrg, "acme", "")
	MarkScope(j, acme, true)
	assert.True(t, ScopeKnown(j))
	assert.Equal(t, "https://x org acme", j.Annotations[v1alpha1.AnnotationRunnerScope])
	got, ok := PlaceOfJob(j)
	assert.True(t, ok)
	assert.Equal(t, acme, got)
	MarkScope(j, scope.New("https://x", v1alpha1.ScopeRepo, "acme", "app"), false)
	assert.False(t, ScopeKnown(j))
}

// The rendered config is written by the scaler's init container alone: a
// template's init container, sidecar or other container that mounts its
// volume (to rewrite the config after it was written, and give the runner
// job containers the namespace's Pod Security would refuse) loses that
// mount; the runner reads it read-only.
func TestOnlyTheScalersInitContainerMountsTheRenderedConfig(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	mount := []corev1.VolumeMount{{Name: RenderedConfigVolume, MountPath: "/x"}, {Name: ConfigVolume, MountPath: "/y"}, {Name: "work", MountPath: "/w"}}
	opts := cacheOptions()
	opts.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "rewrite", Image: "busybox", VolumeMounts: mount},
			{Name: "sidecar", Image: "busybox", RestartPolicy: &always, VolumeMounts: mount},
		},
		Containers: []corev1.Container{{Name: "runner"}, {Name: "helper", Image: "busybox", VolumeMounts: mount}},
		Volumes:    []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}}
	j, err := Build(group(), "ci-x2v7k", 1, opts)
	require.NoError(t, err)
	spec := j.Spec.Template.Spec
	mounts := map[string][]corev1.VolumeMount{}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if m.Name == RenderedConfigVolume || m.Name == ConfigVolume {
				mounts[c.Name] = append(mounts[c.Name], m)
			}
		}
		if c.Name != ConfigInitContainer && c.Name != ContainerName {
			assert.Equal(t, []corev1.VolumeMount{{Name: "work", MountPath: "/w"}}, c.VolumeMounts, "%s keeps its own mounts only", c.Name)
		}
	}
	assert.Equal(t, map[string][]corev1.VolumeMount{
		ConfigInitContainer: {{Name: ConfigVolume, MountPath: ConfigDir, ReadOnly: true}, {Name: RenderedConfigVolume, MountPath: RenderedConfigDir}},
		ContainerName:       {{Name: ConfigVolume, MountPath: ConfigDir, ReadOnly: true}, {Name: RenderedConfigVolume, MountPath: RenderedConfigDir, ReadOnly: true}},
	}, mounts)

	// Without the shared cache no init container is the scaler's: one of
	// that name is the template's, and keeps no mount of the config.
	opts.Cache = CacheOptions{}
	opts.Template.Spec.InitContainers[0].Name = ConfigInitContainer
	j, err = Build(group(), "ci-x2v7k", 1, opts)
	require.NoError(t, err)
	assert.Equal(t, []corev1.VolumeMount{{Name: "work", MountPath: "/w"}}, j.Spec.Template.Spec.InitContainers[0].VolumeMounts)
}
