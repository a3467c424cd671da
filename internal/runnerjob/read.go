package runnerjob

import (
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

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

// PlaceOfJob is where a runner Job's runner registers, from its
// annotation; false for a Job made before the annotation, whose runner
// registered where its group is now, or one that does not read.
func PlaceOfJob(j *batchv1.Job) (scope.Place, bool) {
	return scope.Parse(j.Annotations[v1alpha1.AnnotationRunnerScope])
}

// ScopeKnown says whether the scaler knew, when it made the Job, that its
// runner registers in PlaceOfJob (see AnnotationRunnerScopeKnown).
func ScopeKnown(j *batchv1.Job) bool {
	return j.Annotations[v1alpha1.AnnotationRunnerScopeKnown] == "true"
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

// Grace is the grace period of a runner pod: what the kubelet gives it
// after SIGTERM before it kills it.
func Grace(pod *corev1.PodTemplateSpec) time.Duration {
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return corev1.DefaultTerminationGracePeriodSeconds * time.Second
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

// Completed says whether a runner Job ended with its pod's success: its
// runner exited by itself, with exit code 0.
func Completed(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
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
