package podtemplate

import (
	"errors"
	"fmt"
	"reflect"
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

// ConfigFileEnv names the runner's config file in the runner image's
// entrypoint (run.sh): the scaler sets it in the runner container to the
// config it renders, so the rights checks on that config cannot be
// bypassed with a file of the template's.
const ConfigFileEnv = "CONFIG_FILE"

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
	for _, c := range t.Spec.Containers {
		for _, e := range c.Env {
			if c.Name == RunnerContainer && e.Name == ConfigFileEnv {
				errs = append(errs, fmt.Errorf("env %s in container %q is reserved: the scaler sets it to the config it renders from runnerConfig", e.Name, c.Name))
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
	// Even false: the runner pod's value is the platform's (the built-in
	// pod says false), and a group that could say true would hand the
	// namespace's default ServiceAccount token to every runner.
	if t.Spec.AutomountServiceAccountToken != nil {
		errs = append(errs, errors.New("spec.automountServiceAccountToken is reserved: runner pods get no ServiceAccount token unless the platform's runnerTemplate says so"))
	}
	for i, v := range t.Spec.Volumes {
		if err := checkVolume(i, &v); err != nil {
			errs = append(errs, err)
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

// GroupVolumeTypes are the volume types a group's template may use: an
// allow list, because every other type names a Secret that the kubelet
// hands to a driver (csi nodePublishSecretRef, flexVolume, iscsi, rbd,
// cephfs, azureFile, scaleIO, storageos), a host path, or storage that
// exists apart from the pod (persistentVolumeClaim, nfs, cloud disks):
// each gives the group's writer what the platform did not. A type that a
// later Kubernetes adds stays refused until it is judged here. The CRD's
// CEL rule on spec.template says the same (TestCRDVolumeAllowList keeps
// the two in step).
var GroupVolumeTypes = []string{"emptyDir", "configMap", "downwardAPI", "projected", "ephemeral", "image"}

// GroupProjectionTypes are the sources a projected volume of a group's
// template may use: no secret, serviceAccountToken, clusterTrustBundle or
// podCertificate.
var GroupProjectionTypes = []string{"configMap", "downwardAPI"}

// checkVolume says why volume i of a group's template is refused, if it
// is.
func checkVolume(i int, v *corev1.Volume) error {
	types := setFieldNames(reflect.ValueOf(v.VolumeSource))
	what := fmt.Sprintf("spec.volumes[%d] (volume %q)", i, v.Name)
	switch {
	case v.Secret != nil:
		return fmt.Errorf("%s mounts a Secret, which a RunnerGroup's template may not", what)
	case len(types) == 0:
		return fmt.Errorf("%s has no volume type a RunnerGroup's template may use (%s)", what, strings.Join(GroupVolumeTypes, ", "))
	}
	for _, typ := range types {
		if !slices.Contains(GroupVolumeTypes, typ) {
			return fmt.Errorf("%s is a %s volume, which a RunnerGroup's template may not use: only %s volumes name no Secret, host path or existing storage; the platform team can add others in the chart's runnerTemplate",
				what, typ, strings.Join(GroupVolumeTypes, ", "))
		}
	}
	if v.Projected != nil {
		for _, src := range v.Projected.Sources {
			for _, typ := range setFieldNames(reflect.ValueOf(src)) {
				if !slices.Contains(GroupProjectionTypes, typ) {
					return fmt.Errorf("%s projects a Secret or ServiceAccount token or another %s source, which a RunnerGroup's template may not: only %s",
						what, typ, strings.Join(GroupProjectionTypes, " and "))
				}
			}
		}
	}
	if e := v.Ephemeral; e != nil && e.VolumeClaimTemplate != nil &&
		(e.VolumeClaimTemplate.Spec.DataSource != nil || e.VolumeClaimTemplate.Spec.DataSourceRef != nil) {
		return fmt.Errorf("%s is an ephemeral volume with a dataSource, which would copy existing storage into the runner pod; a RunnerGroup's template may not", what)
	}
	return nil
}

// setFieldNames are the JSON names of the non-nil pointer fields of a
// struct: which members of a one-of (a volume source) are set.
func setFieldNames(v reflect.Value) []string {
	var out []string
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Pointer || f.IsNil() {
			continue
		}
		if name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
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
