package runnerjob

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
)

func scalerRegisters() Options {
	opts := DefaultOptions()
	opts.SelfRegistration = false
	return opts
}

// No registration token anywhere in the Job: no env of any container,
// literal or reference, and no volume of the registration token's Secret.
func TestARunnerTheScalerRegisteredGetsNoRegistrationToken(t *testing.T) {
	for name, rg := range map[string]*v1alpha1.RunnerGroup{"spec.registrationToken": group(), "minted": func() *v1alpha1.RunnerGroup {
		rg := group()
		rg.Spec.RegistrationToken = nil
		return rg
	}()} {
		t.Run(name, func(t *testing.T) {
			j, err := Build(rg, "ci-x2v7k", 1, scalerRegisters())
			require.NoError(t, err)
			pod := j.Spec.Template.Spec
			tokenSecret := rg.RegistrationTokenRef().Name
			for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
				for _, e := range c.Env {
					assert.NotContains(t, e.Name, "REGISTRATION_TOKEN", "container %s", c.Name)
					if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
						assert.NotEqual(t, tokenSecret, e.ValueFrom.SecretKeyRef.Name, "container %s env %s", c.Name, e.Name)
					}
				}
				for _, from := range c.EnvFrom {
					if from.SecretRef != nil {
						assert.NotEqual(t, tokenSecret, from.SecretRef.Name, "container %s", c.Name)
					}
				}
			}
			for _, v := range pod.Volumes {
				if v.Secret != nil {
					assert.Equal(t, StateSecretName("ci-x2v7k"), v.Secret.SecretName, "the only Secret volume is the runner's own state")
				}
			}
			raw, err := json.Marshal(j)
			require.NoError(t, err)
			assert.NotContains(t, string(raw), tokenSecret, "the registration token's Secret is not named anywhere in the Job")
		})
	}
}

func TestARunnerTheScalerRegisteredReadsItsStateFileReadOnly(t *testing.T) {
	j, err := Build(group(), "ci-x2v7k", 1, scalerRegisters())
	require.NoError(t, err)
	pod := j.Spec.Template.Spec
	runner := pod.Containers[0]
	require.Equal(t, ContainerName, runner.Name)
	assert.Contains(t, runner.VolumeMounts, corev1.VolumeMount{Name: StateVolume, MountPath: "/data/.runner", SubPath: ".runner", ReadOnly: true},
		"where run.sh looks before registering and the daemon reads it")
	var vol *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == StateVolume {
			vol = &pod.Volumes[i]
		}
	}
	require.NotNil(t, vol)
	require.NotNil(t, vol.Secret)
	assert.Equal(t, "ci-x2v7k-runner", vol.Secret.SecretName)
	assert.Nil(t, vol.Secret.Optional, "a pod without its credentials does not start")
}

// A template's own volume at the state file is still refused, with the
// same message, whichever way the runner registers.
func TestATemplateMountAtTheStateFileIsRefusedEitherWay(t *testing.T) {
	for _, self := range []bool{true, false} {
		rg := group()
		rg.Spec.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: ContainerName, VolumeMounts: []corev1.VolumeMount{{Name: "x", MountPath: "/data"}}}},
			Volumes:    []corev1.Volume{{Name: "x", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		}}
		opts := scalerRegisters()
		opts.SelfRegistration = self
		_, err := Build(rg, "ci-x2v7k", 1, opts)
		require.Error(t, err, "self registration %v", self)
		assert.Contains(t, err.Error(), "mount it elsewhere")
	}
}

func TestStateSecretIsTheRunnersFileOwnedByItsJob(t *testing.T) {
	j, err := Build(group(), "ci-x2v7k", 1, scalerRegisters())
	require.NoError(t, err)
	j.UID = types.UID("job-uid")
	creds := gitea.RunnerCredentials{
		ID: 7, UUID: "0b6c-uuid", Name: "ci-x2v7k-tag", Token: "runner-own-token", Address: "https://gitea.example.com",
		Labels: []string{"ubuntu-latest:docker://node:20", "self-hosted", "odd:scheme", "empty:docker:"}, Ephemeral: true,
	}
	sec, err := StateSecret(j, creds)
	require.NoError(t, err)
	assert.Equal(t, "ci-x2v7k-runner", sec.Name)
	assert.Equal(t, j.Namespace, sec.Namespace)
	require.Len(t, sec.OwnerReferences, 1)
	ref := sec.OwnerReferences[0]
	assert.Equal(t, []any{"batch/v1", "Job", "ci-x2v7k", types.UID("job-uid"), true}, []any{ref.APIVersion, ref.Kind, ref.Name, ref.UID, *ref.Controller},
		"controlled by its runner Job, so it goes with it")
	var got map[string]any
	require.NoError(t, json.Unmarshal(sec.Data[StateKey], &got))
	assert.Equal(t, map[string]any{
		"WARNING": stateWarning, "id": float64(7), "uuid": "0b6c-uuid", "name": "ci-x2v7k-tag", "token": "runner-own-token",
		"address": "https://gitea.example.com", "ephemeral": true,
		// As the daemon prints them back: otherwise it rewrites the
		// read-only file and exits.
		"labels": []any{"ubuntu-latest:docker://node:20", "self-hosted:host", "odd:scheme", "empty:docker"},
	}, got)
	assert.Len(t, sec.Data, 1)
}

func TestStateLabelIsHowTheDaemonPrintsALabel(t *testing.T) {
	tests := map[string]string{
		"self-hosted":                    "self-hosted:host",
		"linux:host":                     "linux:host",
		"ubuntu-latest:docker://node:20": "ubuntu-latest:docker://node:20",
		"x:docker":                       "x:docker",
		"x:docker:":                      "x:docker",
		"gpu:cuda:12":                    "gpu:cuda:12",
	}
	for in, want := range tests {
		assert.Equal(t, want, stateLabel(in), in)
	}
}

func TestRegisteredID(t *testing.T) {
	j := &batchv1.Job{}
	_, ok := RegisteredID(j)
	assert.False(t, ok, "a Job whose pod registers itself")
	MarkRegistered(j, 42)
	id, ok := RegisteredID(j)
	assert.True(t, ok)
	assert.Equal(t, int64(42), id)
	assert.False(t, strings.Contains(j.Annotations[v1alpha1.AnnotationRunnerID], " "))
}
