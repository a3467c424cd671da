package podtemplate_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/podtemplate"
)

// base is a runner pod as the Job builder starts it: one runner container
// with env, a mount, resources and a privileged context, one volume, and a
// few pod-level fields.
func base() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"gitea.bpg.pw/runnergroup-name": "ci"},
			Annotations: map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyOnFailure,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](120),
			NodeSelector:                  map[string]string{"pool": "default"},
			Containers: []corev1.Container{{
				Name:  "runner",
				Image: "gitea/act_runner:0.2.13-dind-rootless",
				Env: []corev1.EnvVar{
					{Name: "GITEA_INSTANCE_URL", Value: "https://gitea.example.com"},
					{Name: "DOCKER_OPTS", Value: "--default"},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "docker", MountPath: "/home/rootless/.local/share/docker"}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
				},
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			}},
			Volumes: []corev1.Volume{{Name: "docker", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}

func runnerOf(t *testing.T, p corev1.PodTemplateSpec) corev1.Container {
	t.Helper()
	for _, c := range p.Spec.Containers {
		if c.Name == "runner" {
			return c
		}
	}
	require.Fail(t, "no runner container")
	return corev1.Container{}
}

// TestMerge has one case per rule of the package doc (and the README's
// table): each builds an overlay that exercises the rule and checks the
// merged pod.
func TestMerge(t *testing.T) {
	tests := map[string]struct {
		// earlier, if set, is merged over base() first, as a
		// runnerTemplate is before a group's template.
		earlier *corev1.PodTemplateSpec
		overlay *corev1.PodTemplateSpec
		check   func(t *testing.T, got corev1.PodTemplateSpec)
	}{
		"no template keeps the base as it is": {
			overlay: nil,
			check:   func(t *testing.T, got corev1.PodTemplateSpec) { assert.Equal(t, base(), got) },
		},
		"labels and annotations are added key by key, the template's value winning": {
			overlay: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{"team": "infra"},
				Annotations: map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "true", "note": "x"},
			}},
			check: func(t *testing.T, got corev1.PodTemplateSpec) {
				assert.Equal(t, map[string]string{"gitea.bpg.pw/runnergroup-name": "ci", "team": "infra"}, got.Labels)
				assert.Equal(t, map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "true", "note": "x"}, got.Annotations)
			},
		},
		"metadata other than labels and annotations is ignored": {
			overlay: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: "elsewhere"}},
			check: func(t *testing.T, got corev1.PodTemplateSpec) {
				assert.Empty(t, got.Name)
				assert.Empty(t, got.Namespace)
			},
		},
		"a pod-level field the template sets replaces the base's whole, maps included": {
			overlay: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				NodeSelector:     map[string]string{"gpu": "true"},
				RuntimeClassName: ptr.To("sysbox-runc"),
				Tolerations:      []corev1.Toleration{{Key: "ci", Operator: corev1.TolerationOpExists}},
			}},
			check: func(t *testing.T, got corev1.PodTemplateSpec) {
				assert.Equal(t, map[string]string{"gpu": "true"}, got.Spec.NodeSelector, "replaced, not merged")
				assert.Equal(t, "sysbox-runc", *got.Spec.RuntimeClassName)
				assert.Equal(t, []corev1.Toleration{{Key: "ci", Operator: corev1.TolerationOpExists}}, got.Spec.Tolerations)
			},
		},
		"a pod-level field the template leaves out keeps the base's": {
			overlay: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{PriorityClassName: "ci"}},
			check: func(t *testing.T, got corev1.PodTemplateSpec) {
				assert.Equal(t, "ci", got.Spec.PriorityClassName)
				assert.Equal(t, map[string]string{"pool": "default"}, got.Spec.NodeSelector)
				assert.False(t, *got.Spec.AutomountServiceAccountToken)
				assert.Equal(t, int64(120), *got.Spec.TerminationGracePeriodSeconds)
				assert.Equal(t, corev1.RestartPolicyOnFailure, got.Spec.RestartPolicy)
			},
		},
		"a pointer field set to its zero value still replaces": {
			overlay: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](0)}},
			check: func(t *testing.T, got corev1.PodTemplateSpec) {
				assert.Equal(t, int64(0), *got.Spec.TerminationGracePeriodSeconds)
			},
		},
		"the runner container's image and command replace the default's": {
			overlay: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "runner", Image: "registry.example.com/act_runner:0.2.13", Command: []string{"/sbin/tini", "--", "run.sh"},
			}}}},
			check: func(t *testing.T, got corev1.PodTemplateSpec) {
				require.Len(t, got.Spec.Containers, 1, "merged into the runner, not added")
				c := runnerOf(t, got)
				assert.Equal(t, "registry.example.com/act_runner:0.2.13", c.Image)
				assert.Equal(t, []string{"/sbin/tini", "--", "run.sh"}, c.Command)
				assert.True(t, *c.SecurityContext.Privileged, "fields the template leaves out stay")
			},
		},
		"the runner container's env is added by name, the template's entry replacing one of the same name": {
			overlay: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "runner", Env: []corev1.EnvVar{{Name: "DOCKER_OPTS", Value: "--mtu=1400"}, {Name: "HTTP_PROXY", Value: "http://proxy:3128"}},
			}}}},
			check: func(t *testing.T, got corev1.PodTemplateSpec) {
				assert.Equal(t, []corev1.EnvVar{
					{Name: "GITEA_INSTANCE_URL", Value: "https://gitea.example.com"},
					{Name: "DOCKER_OPTS", Value: "--mtu=1400"},
					{Name: "HTTP_PROXY", Value: "http://proxy:3128"},
				}, runnerOf(t, got).Env)
			},
		},
		"the runner container's volumeMounts are added by mountPath, replacing one at the same path": {
			overlay: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "runner", VolumeMounts: []corev1.VolumeMount{
					{Name: "fast", MountPath: "/home/rootless/.local/share/docker"},
					{Name: "cache", MountPath: "/cache"},
				},
			}}}},
			check: func(t *testing.T, got corev1.PodTemplateSpec) {
				assert.Equal(t, []corev1.VolumeMount{
					{Name: "fast", MountPath: "/home/rootless/.local/share/docker"},
					{Name: "cache", MountPath: "/cache"},
				}, runnerOf(t, got).VolumeMounts)
			},
		},
		"the runner container's resources are merged per resource name": {
			overlay: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "runner", Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourceEphemeralStorage: resource.MustParse("30Gi")},
				},
			}}}},
			check: func(t *testing.T, got corev1.PodTemplateSpec) {
				r := runnerOf(t, got).Resources
				assert.Equal(t, "8Gi", ptr.To(r.Limits[corev1.ResourceMemory]).String())
				assert.Equal(t, "30Gi", ptr.To(r.Limits[corev1.ResourceEphemeralStorage]).String())
				assert.Equal(t, "2", ptr.To(r.Limits[corev1.ResourceCPU]).String(), "a limit the template leaves out stays")
				assert.Equal(t, "500m", ptr.To(r.Requests[corev1.ResourceCPU]).String(), "requests the template leaves out stay")
			},
		},
		"the runner container's securityContext replaces the default's whole": {
			overlay: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "runner", SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false)},
			}}}},
			check: func(t *testing.T, got corev1.PodTemplateSpec) {
				assert.Equal(t, &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false)},
					runnerOf(t, got).SecurityContext, "no privileged: true left from the default")
			},
		},
		"other containers are added": {
			overlay: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "cache-proxy", Image: "squid:6"}}}},
			check: func(t *testing.T, got corev1.PodTemplateSpec) {
				require.Len(t, got.Spec.Containers, 2)
				assert.Equal(t, "runner", got.Spec.Containers[0].Name, "the runner stays first")
				assert.Equal(t, corev1.Container{Name: "cache-proxy", Image: "squid:6"}, got.Spec.Containers[1])
			},
		},
		"a container of the same name as an earlier layer's replaces it": {
			earlier: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "cache-proxy", Image: "squid:6", Args: []string{"-N"}}}}},
			overlay: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "cache-proxy", Image: "squid:7"}}}},
			check: func(t *testing.T, got corev1.PodTemplateSpec) {
				require.Len(t, got.Spec.Containers, 2)
				assert.Equal(t, corev1.Container{Name: "cache-proxy", Image: "squid:7"}, got.Spec.Containers[1], "replaced whole, not merged")
			},
		},
		"initContainers are added by name": {
			overlay: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "warm-cache", Image: "busybox:1.36"}}}},
			check: func(t *testing.T, got corev1.PodTemplateSpec) {
				assert.Equal(t, []corev1.Container{{Name: "warm-cache", Image: "busybox:1.36"}}, got.Spec.InitContainers)
			},
		},
		"volumes are added by name, one of the same name replacing the base's": {
			overlay: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "docker", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			}}},
			check: func(t *testing.T, got corev1.PodTemplateSpec) {
				require.Len(t, got.Spec.Volumes, 2)
				assert.Equal(t, corev1.StorageMediumMemory, got.Spec.Volumes[0].EmptyDir.Medium)
				assert.Equal(t, "cache", got.Spec.Volumes[1].Name)
			},
		},
		"no template can drop the runner container": {
			overlay: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "other", Image: "busybox"}}}},
			check: func(t *testing.T, got corev1.PodTemplateSpec) {
				assert.Equal(t, "gitea/act_runner:0.2.13-dind-rootless", runnerOf(t, got).Image)
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := base()
			if tc.earlier != nil {
				var err error
				in, err = podtemplate.Merge(in, tc.earlier)
				require.NoError(t, err)
			}
			want := *in.DeepCopy()
			got, err := podtemplate.Merge(in, tc.overlay)
			require.NoError(t, err)
			assert.Equal(t, want, in, "the base is not changed")
			tc.check(t, got)
		})
	}
}

// TestMergeDoesNotAliasTheOverlay guards against a merged pod that shares
// slices or maps with the template it came from: the scaler merges one
// group's template into many Jobs, and builds each Job further after the
// merge.
func TestMergeDoesNotAliasTheOverlay(t *testing.T) {
	overlay := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "1"}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"pool": "ci"},
			Containers:   []corev1.Container{{Name: "runner", Env: []corev1.EnvVar{{Name: "X", Value: "1"}}}, {Name: "side", Args: []string{"a"}}},
		},
	}
	want := overlay.DeepCopy()
	got, err := podtemplate.Merge(base(), overlay)
	require.NoError(t, err)
	got.Labels["a"] = "changed"
	got.Spec.NodeSelector["pool"] = "changed"
	got.Spec.Containers[0].Env[len(got.Spec.Containers[0].Env)-1].Value = "changed"
	got.Spec.Containers[1].Args[0] = "changed"
	assert.Equal(t, want, overlay)
}
