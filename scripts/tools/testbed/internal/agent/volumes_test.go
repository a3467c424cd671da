package agent

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A configMap volume is written under the pod's directory and an env value
// naming a file under its mount path points at the copy, as the scaler's
// SCALER_RUNNER_TEMPLATE does with the chart's runner template.
func TestConfigMapVolumesAndTheEnvThatNamesThem(t *testing.T) {
	client := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "tpl", Namespace: "ns"},
		Data:       map[string]string{"runner-template.yaml": "spec: {}\n"},
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "tpl", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "tpl"}}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		}},
	}
	c := &corev1.Container{Name: "listener", VolumeMounts: []corev1.VolumeMount{
		{Name: "tpl", MountPath: "/etc/gitea-runner-scaler/"},
		{Name: "scratch", MountPath: "/scratch"},
	}}
	dir, podDir := t.TempDir(), t.TempDir()
	mounts, err := mountVolumes(context.Background(), client, pod, c, dir, podDir)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"/etc/gitea-runner-scaler": filepath.Join(dir, "tpl"),
		"/scratch":                 filepath.Join(podDir, "emptydir", "scratch"),
	}, mounts, "configMap volumes per container, emptyDir volumes one per pod")
	assert.DirExists(t, filepath.Join(podDir, "emptydir", "scratch"))
	raw, err := os.ReadFile(filepath.Join(dir, "tpl", "runner-template.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "spec: {}\n", string(raw))

	env := &Env{}
	env.Set("SCALER_RUNNER_TEMPLATE", "/etc/gitea-runner-scaler/runner-template.yaml")
	env.Set("OTHER", "/etc/gitea-runner-scaler-not-this")
	rewriteMountPaths(env, mounts)
	got, _ := env.Get("SCALER_RUNNER_TEMPLATE")
	assert.Equal(t, filepath.Join(dir, "tpl", "runner-template.yaml"), got)
	other, _ := env.Get("OTHER")
	assert.Equal(t, "/etc/gitea-runner-scaler-not-this", other)

	pod.Spec.Volumes[0].ConfigMap.Name = "missing"
	_, err = mountVolumes(context.Background(), client, pod, c, dir, t.TempDir())
	assert.ErrorContains(t, err, `configmap "missing" not found`)
}

// A configMap volume with items projects only those keys, each at its
// path, as the kubelet does: the scaler's runner Jobs mount the key of
// their pod's grace as config.yaml (issue 32.5). A listed key the
// ConfigMap lacks fails the mount, as it keeps the kubelet's pod from
// starting.
func TestConfigMapVolumeItemsProjectTheirKeys(t *testing.T) {
	client := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "ci-runner-config", Namespace: "ns"},
		Data:       map[string]string{"config-grace-600s.yaml": "a: 1\n", "config-grace-60s.yaml": "a: 2\n"},
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "ci-runner-config"},
			Items:                []corev1.KeyToPath{{Key: "config-grace-600s.yaml", Path: "config.yaml"}},
		}}}}},
	}
	c := &corev1.Container{Name: "runner", VolumeMounts: []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/gitea-runner"}}}
	dir := t.TempDir()
	_, err := mountVolumes(context.Background(), client, pod, c, dir, t.TempDir())
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(dir, "cfg", "config.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "a: 1\n", string(raw))
	assert.NoFileExists(t, filepath.Join(dir, "cfg", "config-grace-60s.yaml"))

	pod.Spec.Volumes[0].ConfigMap.Items[0].Key = "config-grace-30s.yaml"
	_, err = mountVolumes(context.Background(), client, pod, c, t.TempDir(), t.TempDir())
	assert.ErrorContains(t, err, `config-grace-30s.yaml`)
}

// A secret volume is projected as the kubelet does: every key as a file,
// or only the listed items at their paths, with the item's mode, else the
// volume's defaultMode, and never writable (the kubelet's mount is
// read-only). A subPath mount maps to the one file, and a runner's fresh
// /data links it, so run.sh finds the .runner the scaler wrote.
func TestSecretVolumesProjectTheirKeysReadOnly(t *testing.T) {
	client := fake.NewClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "job-runner", Namespace: "ns"},
		Data:       map[string][]byte{".runner": []byte(`{"id":7}`), "other": []byte("x")},
	})
	secret := func(items []corev1.KeyToPath, mode *int32) corev1.Volume {
		return corev1.Volume{Name: "state", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "job-runner", Items: items, DefaultMode: mode,
		}}}
	}
	tests := []struct {
		name      string
		volume    corev1.Volume
		mount     corev1.VolumeMount
		wantFiles map[string]os.FileMode
		wantMount string
		wantErr   string
	}{
		{
			name:      "every key, the default mode without write bits",
			volume:    secret(nil, nil),
			mount:     corev1.VolumeMount{Name: "state", MountPath: "/etc/state", ReadOnly: true},
			wantFiles: map[string]os.FileMode{".runner": 0o444, "other": 0o444},
			wantMount: "state",
		},
		{
			name:      "items at their paths, the item's mode over defaultMode",
			volume:    secret([]corev1.KeyToPath{{Key: ".runner", Path: "sub/state.json", Mode: ptr(int32(0o600))}}, ptr(int32(0o755))),
			mount:     corev1.VolumeMount{Name: "state", MountPath: "/etc/state"},
			wantFiles: map[string]os.FileMode{"sub/state.json": 0o400},
			wantMount: "state",
		},
		{
			name:      "a subPath mount is the one file",
			volume:    secret(nil, ptr(int32(0o440))),
			mount:     corev1.VolumeMount{Name: "state", MountPath: "/data/.runner", SubPath: ".runner", ReadOnly: true},
			wantFiles: map[string]os.FileMode{".runner": 0o440, "other": 0o440},
			wantMount: "state/.runner",
		},
		{
			name:    "a listed key the Secret lacks fails the mount",
			volume:  secret([]corev1.KeyToPath{{Key: "token", Path: "token"}}, nil),
			mount:   corev1.VolumeMount{Name: "state", MountPath: "/etc/state"},
			wantErr: `secret "job-runner" references non-existent key "token"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{tt.volume}}}
			c := &corev1.Container{Name: "runner", VolumeMounts: []corev1.VolumeMount{tt.mount}}
			dir := t.TempDir()
			mounts, err := mountVolumes(context.Background(), client, pod, c, dir, t.TempDir())
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, map[string]string{tt.mount.MountPath: filepath.Join(dir, tt.wantMount)}, mounts)
			for name, mode := range tt.wantFiles {
				info, err := os.Stat(filepath.Join(dir, "state", name))
				require.NoError(t, err)
				assert.Equal(t, mode, info.Mode().Perm(), name)
			}
			var got []string
			require.NoError(t, filepath.WalkDir(filepath.Join(dir, "state"), func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					rel, _ := filepath.Rel(filepath.Join(dir, "state"), p)
					got = append(got, rel)
				}
				return err
			}))
			assert.ElementsMatch(t, slices.Collect(maps.Keys(tt.wantFiles)), got, "only the projected files")

			data := t.TempDir()
			require.NoError(t, linkDataMounts(data, mounts))
			if tt.mount.MountPath == "/data/.runner" {
				raw, err := os.ReadFile(filepath.Join(data, ".runner"))
				require.NoError(t, err)
				assert.JSONEq(t, `{"id":7}`, string(raw), "the runner's /data holds its .runner")
			} else {
				entries, err := os.ReadDir(data)
				require.NoError(t, err)
				assert.Empty(t, entries, "nothing mounted under /data, nothing linked")
			}
		})
	}
}

// A secret volume whose Secret does not exist yet keeps the container
// waiting, as the kubelet's mount does: the scaler creates a runner's Secret
// just after its Job.
func TestSecretVolumeWaitsForItsSecret(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "state", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "later"}}},
	}}}
	c := &corev1.Container{Name: "runner", VolumeMounts: []corev1.VolumeMount{{Name: "state", MountPath: "/data/.runner", SubPath: ".runner"}}}
	_, err := mountVolumes(context.Background(), fake.NewClientset(), pod, c, t.TempDir(), t.TempDir())
	var ce *ConfigError
	require.ErrorAs(t, err, &ce, "a config error: prepare retries it")
	assert.ErrorContains(t, err, `secret "later" not found`)
}
