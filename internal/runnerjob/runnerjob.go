// Package runnerjob builds the batch/v1 Job that runs one ephemeral
// act_runner for one queued Gitea job: named after the group, labelled with
// the group and the Gitea job, controlled by the group, registering with
// Gitea under the Job's own name. The README's "The runner Job" section
// describes the same shape for users.
package runnerjob

import (
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerlabels"
)

// Settings of the runner Job. The label and annotation keys it carries are
// in internal/api/v1alpha1/wellknown.go, with the other names the scaler
// writes on objects.
const (
	// ContainerName is the runner container's name.
	ContainerName = "runner"
	// DefaultImage is act_runner with its own rootless Docker daemon.
	DefaultImage = "gitea/act_runner:nightly-dind-rootless"
	// DefaultTTLSecondsAfterFinished is how long a finished Job stays for
	// inspection before the TTL controller deletes it.
	DefaultTTLSecondsAfterFinished = 600
	// RunnerStateDir is where the act_runner image keeps its .runner state
	// file (the image's working directory). See Build.
	RunnerStateDir = "/data"
	// suffixLen is the length of the random part of a Job name.
	suffixLen = 5
)

// Options are the scaler-wide settings of runner Jobs.
type Options struct {
	Image                   string
	DefaultLabels           []string
	TTLSecondsAfterFinished int32
}

// DefaultOptions are the settings the scaler uses when no flag changes them.
func DefaultOptions() Options {
	return Options{
		Image:                   DefaultImage,
		DefaultLabels:           runnerlabels.DefaultLabels,
		TTLSecondsAfterFinished: DefaultTTLSecondsAfterFinished,
	}
}

// NewName returns "{group}-{5 random characters}". The scaler names Jobs
// itself, instead of leaving it to generateName, because the runner must
// register with the Job's name (GITEA_RUNNER_NAME) and that env is part of
// the object being created.
func NewName(group string) string {
	return group + "-" + utilrand.String(suffixLen)
}

// IsRunnerName reports whether a Gitea runner name is one of the group's
// runner Jobs: the group's prefix followed by exactly one random suffix. The
// fixed suffix length keeps group "ci" from claiming the runners of group
// "ci-gpu" ("ci-gpu-x2v7k" is "ci-" plus nine characters, not five).
func IsRunnerName(group, runnerName string) bool {
	suffix, ok := strings.CutPrefix(runnerName, group+"-")
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

// Selector returns the label selector of a group's runner Jobs.
func Selector(group string) string { return v1alpha1.LabelRunnerGroupName + "=" + group }

// GroupLabels are the labels that tie an object to its RunnerGroup.
func GroupLabels(group string) map[string]string {
	return map[string]string{v1alpha1.LabelRunnerGroupName: group, v1alpha1.LabelManagedBy: v1alpha1.ManagedBy}
}

// Build returns the runner Job for one Gitea job.
//
// Restarts never reuse a spent ephemeral identity: Gitea revokes an
// ephemeral runner's credentials once it takes a task, so a restarted
// container that found the old .runner file would fail for ever. The state
// file lives in the container's own writable layer (RunnerStateDir) and no
// volume is mounted there or above it, so every container start, including
// a restart under restartPolicy OnFailure, begins without it and registers
// afresh with the (reusable) registration token. Newer act_runner images also
// delete the file themselves when GITEA_RUNNER_EPHEMERAL is set.
//
// DOCKER_HOST is left unset: the dind-rootless image starts its own Docker
// daemon and serves it on a unix socket that act_runner finds by default.
func Build(rg *v1alpha1.RunnerGroup, name string, giteaJobID int64, opts Options) *batchv1.Job {
	jobLabels := GroupLabels(rg.Name)
	jobLabels[v1alpha1.LabelGiteaJobID] = strconv.FormatInt(giteaJobID, 10)
	jobLabels["app.kubernetes.io/name"] = "gitea-runner"
	jobLabels["app.kubernetes.io/component"] = "runner"
	jobLabels["app.kubernetes.io/managed-by"] = v1alpha1.ManagedBy

	podLabels := make(map[string]string, len(jobLabels))
	for k, v := range jobLabels {
		podLabels[k] = v
	}

	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: rg.Namespace,
			Labels:    jobLabels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(),
				Kind:       v1alpha1.Kind,
				Name:       rg.Name,
				UID:        rg.UID,
				Controller: ptr.To(true),
			}},
		},
		Spec: batchv1.JobSpec{
			TTLSecondsAfterFinished: ptr.To(opts.TTLSecondsAfterFinished),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      podLabels,
					Annotations: map[string]string{v1alpha1.AnnotationSafeToEvict: "false"},
				},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyOnFailure,
					Containers: []corev1.Container{{
						Name:  ContainerName,
						Image: opts.Image,
						Env: []corev1.EnvVar{
							{Name: "GITEA_INSTANCE_URL", Value: rg.Spec.Gitea.URL},
							{Name: "GITEA_RUNNER_REGISTRATION_TOKEN", ValueFrom: &corev1.EnvVarSource{
								SecretKeyRef: &corev1.SecretKeySelector{
									LocalObjectReference: corev1.LocalObjectReference{Name: rg.Spec.RegistrationToken.SecretRef.Name},
									Key:                  rg.Spec.RegistrationToken.SecretRef.Key,
								},
							}},
							{Name: "GITEA_RUNNER_EPHEMERAL", Value: "true"},
							{Name: "GITEA_RUNNER_NAME", Value: name},
							{Name: "GITEA_RUNNER_LABELS", Value: strings.Join(runnerlabels.ForGroup(&rg.Spec, opts.DefaultLabels), ",")},
						},
						// The dind-rootless image runs its own Docker daemon,
						// which needs a privileged container; runner
						// namespaces must therefore admit privileged pods.
						SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
					}},
				},
			},
		},
	}
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
