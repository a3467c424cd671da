// Package podtemplate merges pod templates over the runner pod, with one
// written rule per field, and checks what a template may not set.
//
// The runner pod is built in layers, each merged over the one before by
// Merge: the scaler's built-in pod < the install-wide runnerTemplate (the
// platform team's, from the chart) < the group's spec.template. The Job
// builder (internal/runnerjob) then puts back what is reserved (the
// runner's env, labels, restartPolicy), so no layer can take those over even
// if admission let it through.
//
// The rules (the README's "Runner pods" section has the same table):
//
//   - metadata.labels and metadata.annotations: added key by key; the
//     template's value wins. Other metadata (name, namespace, ...) is
//     ignored: the Job controller names the pod.
//   - Every other field of spec that the template sets replaces the base's
//     value whole, lists and maps too (nodeSelector, tolerations, affinity,
//     securityContext, runtimeClassName, imagePullSecrets, ...). A field the
//     template leaves out (or sets to its zero value) keeps the base's.
//   - spec.containers: the container named "runner" is merged into the
//     runner container by MergeContainer; any other container is added, and
//     replaces an earlier layer's container of the same name.
//   - spec.initContainers: added by name, as other containers.
//   - spec.volumes: added by name; a volume of the same name replaces the
//     earlier layer's.
//
// The merge never removes a container: the runner container is always
// there, whatever a template says.
package podtemplate

import (
	"encoding/json"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
)

// RunnerContainer is the name of the runner container, and of the template
// container that is merged into it.
const RunnerContainer = "runner"

// Merge returns base with overlay merged over it by the package's rules.
// Neither argument is changed. A nil overlay returns a copy of base.
func Merge(base corev1.PodTemplateSpec, overlay *corev1.PodTemplateSpec) (corev1.PodTemplateSpec, error) {
	out := *base.DeepCopy()
	if overlay == nil {
		return out, nil
	}
	out.Labels = mergeStrings(out.Labels, overlay.Labels)
	out.Annotations = mergeStrings(out.Annotations, overlay.Annotations)

	// Pod-level fields go through JSON: a field is "set" when it is in the
	// overlay's JSON (omitempty leaves out what is unset), and the rule
	// needs no update when Kubernetes adds a pod field.
	spec, err := replaceFields(&out.Spec, &overlay.Spec, "containers", "initContainers", "volumes")
	if err != nil {
		return out, fmt.Errorf("pod spec: %w", err)
	}
	containers, initContainers, volumes := out.Spec.Containers, out.Spec.InitContainers, out.Spec.Volumes
	out.Spec = *spec
	out.Spec.Containers, out.Spec.InitContainers, out.Spec.Volumes = containers, initContainers, volumes

	for _, c := range overlay.Spec.Containers {
		if c.Name == RunnerContainer {
			i := indexOf(out.Spec.Containers, RunnerContainer)
			if i < 0 {
				// The base always has the runner container; a base
				// without one takes the template's as it is.
				out.Spec.Containers = append(out.Spec.Containers, *c.DeepCopy())
				continue
			}
			merged, err := MergeContainer(out.Spec.Containers[i], c)
			if err != nil {
				return out, fmt.Errorf("container %q: %w", c.Name, err)
			}
			out.Spec.Containers[i] = merged
			continue
		}
		out.Spec.Containers = putByName(out.Spec.Containers, *c.DeepCopy(), func(c corev1.Container) string { return c.Name })
	}
	for _, c := range overlay.Spec.InitContainers {
		out.Spec.InitContainers = putByName(out.Spec.InitContainers, *c.DeepCopy(), func(c corev1.Container) string { return c.Name })
	}
	for _, v := range overlay.Spec.Volumes {
		out.Spec.Volumes = putByName(out.Spec.Volumes, *v.DeepCopy(), func(v corev1.Volume) string { return v.Name })
	}
	return out, nil
}

// MergeContainer merges a template's "runner" container into the runner
// container:
//
//   - env: added by name; the template's entry replaces one of the same
//     name. (The reserved GITEA_* variables are put back afterwards by the
//     Job builder.)
//   - volumeMounts: added by mountPath; the template's mount replaces one
//     at the same path.
//   - resources: requests and limits merged per resource name (a template
//     that sets only limits.memory keeps the default cpu and
//     ephemeral-storage); claims replace.
//   - securityContext replaces the default's whole, so that a
//     non-privileged context is never mixed with the default's
//     privileged: true.
//   - name stays "runner"; every other field the template sets (image,
//     command, args, probes, ...) replaces the default's.
func MergeContainer(base, overlay corev1.Container) (corev1.Container, error) {
	merged, err := replaceFields(&base, &overlay, "name", "env", "volumeMounts", "resources")
	if err != nil {
		return base, err
	}
	out := *merged
	out.Name = base.Name
	out.Env = base.DeepCopy().Env
	for _, e := range overlay.Env {
		out.Env = putByName(out.Env, *e.DeepCopy(), func(e corev1.EnvVar) string { return e.Name })
	}
	out.VolumeMounts = base.DeepCopy().VolumeMounts
	for _, m := range overlay.VolumeMounts {
		out.VolumeMounts = putByName(out.VolumeMounts, *m.DeepCopy(), func(m corev1.VolumeMount) string { return m.MountPath })
	}
	out.Resources = *base.Resources.DeepCopy()
	out.Resources.Requests = mergeResources(out.Resources.Requests, overlay.Resources.Requests)
	out.Resources.Limits = mergeResources(out.Resources.Limits, overlay.Resources.Limits)
	if overlay.Resources.Claims != nil {
		out.Resources.Claims = append([]corev1.ResourceClaim(nil), overlay.Resources.Claims...)
	}
	return out, nil
}

// replaceFields returns base with every top-level JSON field that overlay
// sets replaced by overlay's value, except the fields named in skip.
func replaceFields[T any](base, overlay *T, skip ...string) (*T, error) {
	baseMap, err := toMap(base)
	if err != nil {
		return nil, err
	}
	overMap, err := toMap(overlay)
	if err != nil {
		return nil, err
	}
	for _, k := range skip {
		delete(overMap, k)
	}
	maps.Copy(baseMap, overMap)
	raw, err := json.Marshal(baseMap)
	if err != nil {
		return nil, err
	}
	var out T
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func toMap(v any) (map[string]json.RawMessage, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// putByName replaces the item whose key is item's, or appends item.
func putByName[T any](list []T, item T, key func(T) string) []T {
	for i := range list {
		if key(list[i]) == key(item) {
			list[i] = item
			return list
		}
	}
	return append(list, item)
}

func indexOf(cs []corev1.Container, name string) int {
	for i := range cs {
		if cs[i].Name == name {
			return i
		}
	}
	return -1
}

func mergeStrings(base, overlay map[string]string) map[string]string {
	if len(overlay) == 0 {
		return base
	}
	out := make(map[string]string, len(base)+len(overlay))
	maps.Copy(out, base)
	maps.Copy(out, overlay)
	return out
}

func mergeResources(base, overlay corev1.ResourceList) corev1.ResourceList {
	if len(overlay) == 0 {
		return base
	}
	out := make(corev1.ResourceList, len(base)+len(overlay))
	for k, v := range base {
		out[k] = v.DeepCopy()
	}
	for k, v := range overlay {
		out[k] = v.DeepCopy()
	}
	return out
}
