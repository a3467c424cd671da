package podtemplate_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/podtemplate"
)

func TestCheckReserved(t *testing.T) {
	tests := map[string]struct {
		tmpl *corev1.PodTemplateSpec
		want []string // phrases of the error; none: no error
	}{
		"no template":           {tmpl: nil},
		"placement and sidecar": {tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeSelector: map[string]string{"a": "b"}, Containers: []corev1.Container{{Name: "side", Env: []corev1.EnvVar{{Name: "GITEA_TOKEN_FILE"}}}}}}},
		"restartPolicy": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever}},
			want: []string{"spec.restartPolicy is reserved"},
		},
		"GITEA_INSTANCE_URL in the runner": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", Env: []corev1.EnvVar{{Name: "GITEA_INSTANCE_URL", Value: "https://evil"}}}}}},
			want: []string{`env GITEA_INSTANCE_URL in container "runner" is reserved`},
		},
		"GITEA_RUNNER_* in an init container": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init", Env: []corev1.EnvVar{{Name: "GITEA_RUNNER_LABELS", Value: "x"}}}}}},
			want: []string{`env GITEA_RUNNER_LABELS in container "init" is reserved`},
		},
		"the scaler's labels": {
			tmpl: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"gitea.bpg.pw/runnergroup-name": "other", "app.kubernetes.io/managed-by": "me", "team": "ok"}}},
			want: []string{"metadata.labels app.kubernetes.io/managed-by is reserved", "metadata.labels gitea.bpg.pw/runnergroup-name is reserved"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := podtemplate.CheckReserved(tc.tmpl)
			if len(tc.want) == 0 {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestCheckRights(t *testing.T) {
	tests := map[string]struct {
		tmpl *corev1.PodTemplateSpec
		want string
	}{
		"emptyDir, configMap and imagePullSecrets are allowed": {tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}},
			Volumes: []corev1.Volume{
				{Name: "a", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "b", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			},
		}}},
		"serviceAccountName": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{ServiceAccountName: "deployer"}},
			want: "spec.serviceAccountName is not allowed",
		},
		"a secret volume": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "x"}}}}}},
			want: `spec.volumes[0] (volume "s") mounts a Secret`,
		},
		"a projected ServiceAccount token": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "t"}}},
			}}}}}},
			want: `spec.volumes[0] (volume "p") projects a Secret or ServiceAccount token or another serviceAccountToken source`,
		},
		"a secretKeyRef": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "side", Env: []corev1.EnvVar{{Name: "T", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}}}}}}},
			want: `env T in container "side" reads a Secret`,
		},
		"an envFrom secretRef": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "i", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{}}}}}}},
			want: `envFrom in container "i" reads a Secret`,
		},
		// Issue 24 item 5: the namespace's default ServiceAccount token
		// would land in every runner pod.
		"automountServiceAccountToken true": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(true)}},
			want: "spec.automountServiceAccountToken is reserved",
		},
		"automountServiceAccountToken false, said again": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false)}},
			want: "spec.automountServiceAccountToken is reserved",
		},
		"the volume types that name no Secret": {tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			{Name: "d", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}},
			{Name: "x", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
			{Name: "i", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "example.com/tools:1"}}},
			{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{}}, {DownwardAPI: &corev1.DownwardAPIProjection{}},
			}}}},
		}}}},
		// Issue 24 item 7: volume sources that name a Secret the kubelet
		// hands to a driver, and those that reach the node or storage the
		// platform did not offer, are outside the allow list.
		"a csi volume with nodePublishSecretRef": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "c", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
				Driver: "evil.example.com", NodePublishSecretRef: &corev1.LocalObjectReference{Name: "production-db"}}}}}}},
			want: `spec.volumes[0] (volume "c") is a csi volume`,
		},
		"a flexVolume with secretRef": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "ok", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}, {Name: "f", VolumeSource: corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{
				Driver: "x/y", SecretRef: &corev1.LocalObjectReference{Name: "production-db"}}}}}}},
			want: `spec.volumes[1] (volume "f") is a flexVolume volume`,
		},
		"an azureFile volume": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "a", VolumeSource: corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{SecretName: "production-db"}}}}}},
			want: `is a azureFile volume`,
		},
		"a hostPath volume": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}}},
			want: `is a hostPath volume`,
		},
		"a persistentVolumeClaim": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "pvc", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "other-teams-data"}}}}}},
			want: `is a persistentVolumeClaim volume`,
		},
		"an ephemeral volume cloned from a claim": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "x", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
				VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{DataSource: &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "other-teams-data"}}}}}}}}},
			want: `spec.volumes[0] (volume "x") is an ephemeral volume with a dataSource`,
		},
		"a volume of no known type": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "n"}}}},
			want: `spec.volumes[0] (volume "n") has no volume type a RunnerGroup's template may use`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := podtemplate.CheckRights(tc.tmpl)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestParsePinned(t *testing.T) {
	tests := map[string]struct {
		in      []string
		want    podtemplate.Pinned
		wantErr string
	}{
		"pod and runner fields":             {in: []string{"spec.runtimeClassName", " spec.nodeSelector", "runner.image"}, want: podtemplate.Pinned{"spec.runtimeClassName", "spec.nodeSelector", "runner.image"}},
		"blanks and repeats are dropped":    {in: []string{"", "spec.tolerations", "spec.tolerations"}, want: podtemplate.Pinned{"spec.tolerations"}},
		"an unknown pod field":              {in: []string{"spec.runtimeClass"}, wantErr: `the pod spec has no field "runtimeClass"`},
		"an unknown container field":        {in: []string{"runner.imagePolicy"}, wantErr: `a container has no field "imagePolicy"`},
		"a nested path":                     {in: []string{"spec.securityContext.runAsUser"}, wantErr: "want spec.<pod field> or runner.<container field>"},
		"another scope":                     {in: []string{"metadata.labels"}, wantErr: "want spec.<pod field> or runner.<container field>"},
		"restartPolicy is reserved already": {in: []string{"spec.restartPolicy"}, wantErr: "reserved for every template already"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := podtemplate.ParsePinned(tc.in)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestPinnedCheck(t *testing.T) {
	pinned := podtemplate.Pinned{"spec.runtimeClassName", "spec.nodeSelector", "runner.image", "runner.resources"}
	tests := map[string]struct {
		tmpl *corev1.PodTemplateSpec
		want []string
	}{
		"no template": {tmpl: nil},
		"fields that are not pinned": {tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Tolerations: []corev1.Toleration{{Key: "a"}},
			Containers:  []corev1.Container{{Name: "runner", Env: []corev1.EnvVar{{Name: "A"}}}, {Name: "side", Image: "x"}},
		}}},
		"a pinned pod field": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{RuntimeClassName: ptr.To("runc")}},
			want: []string{"spec.runtimeClassName is pinned"},
		},
		"pinned runner fields, not those of a sidecar": {
			tmpl: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "runner", Image: "mine", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: {}}}},
			}}},
			want: []string{"runner.image is pinned", "runner.resources is pinned"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := pinned.Check(tc.tmpl)
			if len(tc.want) == 0 {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestPinnedCheckPresentIsSet is issue 24 item 6: a pinned field written
// empty ({} or []) is set, as the guardrails policy's has() says, because
// the merge replaces the platform's value with it (securityContext: {}
// drops runAsNonRoot and the like). The templates are decoded from the
// RunnerGroup's JSON the way the scaler reads them.
func TestPinnedCheckPresentIsSet(t *testing.T) {
	pinned := podtemplate.Pinned{"spec.securityContext", "spec.nodeSelector", "spec.tolerations", "spec.affinity", "runner.securityContext", "runner.resources"}
	tests := map[string]struct {
		json string
		want []string
	}{
		"nothing pinned written": {json: `{"spec":{"containers":[{"name":"runner","env":[{"name":"A","value":"b"}]}]}}`},
		"empty pod securityContext": {
			json: `{"spec":{"securityContext":{}}}`,
			want: []string{"spec.securityContext is pinned"},
		},
		"empty placement": {
			json: `{"spec":{"nodeSelector":{},"tolerations":[],"affinity":{}}}`,
			want: []string{"spec.nodeSelector is pinned", "spec.tolerations is pinned", "spec.affinity is pinned"},
		},
		"empty runner securityContext": {
			json: `{"spec":{"containers":[{"name":"runner","securityContext":{}}]}}`,
			want: []string{"runner.securityContext is pinned"},
		},
		"empty runner resources": {
			json: `{"spec":{"containers":[{"name":"runner","resources":{"limits":{}}}]}}`,
			want: []string{"runner.resources is pinned"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var obj map[string]any
			require.NoError(t, json.Unmarshal([]byte(tc.json), &obj))
			var tmpl corev1.PodTemplateSpec
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &tmpl))
			err := pinned.Check(&tmpl)
			if len(tc.want) == 0 {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}
