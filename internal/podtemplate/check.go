package podtemplate

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// ReservedLabels are the pod labels the scaler sets and reads back: a
// template may not set them. Every key with the prefix gitea.bpg.pw/ is
// reserved as well (IsReservedLabel).
var ReservedLabels = []string{"app.kubernetes.io/name", "app.kubernetes.io/component", "app.kubernetes.io/managed-by"}

// IsReservedLabel says whether a pod label key belongs to the scaler.
func IsReservedLabel(key string) bool {
	return strings.HasPrefix(key, v1alpha1.Group+"/") || slices.Contains(ReservedLabels, key)
}

// IsReservedEnv says whether an env name belongs to the scaler: it sets
// GITEA_INSTANCE_URL and the GITEA_RUNNER_* variables from the group.
func IsReservedEnv(name string) bool {
	return name == "GITEA_INSTANCE_URL" || strings.HasPrefix(name, "GITEA_RUNNER_")
}

// CheckReserved reports what a template sets that the scaler reserves:
// restartPolicy, the GITEA_* env in any container, the scaler's labels. It
// applies to the install-wide runnerTemplate and to a group's template
// alike; for a group, the CRD's CEL rules refuse the same at admission.
func CheckReserved(t *corev1.PodTemplateSpec) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.Spec.RestartPolicy != "" {
		errs = append(errs, errors.New("spec.restartPolicy is reserved: runner Jobs use OnFailure"))
	}
	for _, c := range allContainers(t) {
		for _, e := range c.Env {
			if IsReservedEnv(e.Name) {
				errs = append(errs, fmt.Errorf("env %s in container %q is reserved: the scaler sets it", e.Name, c.Name))
			}
		}
	}
	for _, k := range sortedKeys(t.Labels) {
		if IsReservedLabel(k) {
			errs = append(errs, fmt.Errorf("metadata.labels %s is reserved: the scaler finds its runner pods by it", k))
		}
	}
	return errors.Join(errs...)
}

// CheckRights reports what a group's template may not set because the
// scaler would hand it to whoever may write RunnerGroups: a ServiceAccount,
// Secrets in volumes or env. The install-wide runnerTemplate may set them:
// the platform team that writes it is trusted. The CRD's CEL rules refuse
// the same at admission.
func CheckRights(t *corev1.PodTemplateSpec) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.Spec.ServiceAccountName != "" || t.Spec.DeprecatedServiceAccount != "" {
		errs = append(errs, errors.New("spec.serviceAccountName is not allowed in a RunnerGroup's template"))
	}
	for _, v := range t.Spec.Volumes {
		if v.Secret != nil {
			errs = append(errs, fmt.Errorf("volume %q mounts a Secret, which a RunnerGroup's template may not", v.Name))
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil || s.ServiceAccountToken != nil {
					errs = append(errs, fmt.Errorf("volume %q projects a Secret or ServiceAccount token, which a RunnerGroup's template may not", v.Name))
					break
				}
			}
		}
	}
	for _, c := range allContainers(t) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				errs = append(errs, fmt.Errorf("env %s in container %q reads a Secret, which a RunnerGroup's template may not", e.Name, c.Name))
			}
		}
		for _, f := range c.EnvFrom {
			if f.SecretRef != nil {
				errs = append(errs, fmt.Errorf("envFrom in container %q reads a Secret, which a RunnerGroup's template may not", c.Name))
			}
		}
	}
	return errors.Join(errs...)
}

// CheckGroup is every check a group's spec.template must pass: the
// reserved fields, the rights, and the fields the platform pinned.
func CheckGroup(t *corev1.PodTemplateSpec, pinned Pinned) error {
	return errors.Join(CheckReserved(t), CheckRights(t), pinned.Check(t))
}

func allContainers(t *corev1.PodTemplateSpec) []corev1.Container {
	return append(slices.Clone(t.Spec.Containers), t.Spec.InitContainers...)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
