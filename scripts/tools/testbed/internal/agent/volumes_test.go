package agent

import (
	"context"
	"os"
	"path/filepath"
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
	mounts, err := mountConfigMaps(context.Background(), client, pod, c, dir, podDir)
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
	_, err = mountConfigMaps(context.Background(), client, pod, c, dir, t.TempDir())
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
	_, err := mountConfigMaps(context.Background(), client, pod, c, dir, t.TempDir())
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(dir, "cfg", "config.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "a: 1\n", string(raw))
	assert.NoFileExists(t, filepath.Join(dir, "cfg", "config-grace-60s.yaml"))

	pod.Spec.Volumes[0].ConfigMap.Items[0].Key = "config-grace-30s.yaml"
	_, err = mountConfigMaps(context.Background(), client, pod, c, t.TempDir(), t.TempDir())
	assert.ErrorContains(t, err, `config-grace-30s.yaml`)
}
