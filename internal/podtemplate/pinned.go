package podtemplate

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Pinned is the list of fields that the platform team pins: a group's
// spec.template may not set them, so the value from the install-wide
// runnerTemplate (or the built-in default) always holds. Each entry is
//
//   - "spec.<field>": a pod-level field, by its JSON name, for example
//     spec.runtimeClassName, spec.nodeSelector, spec.tolerations,
//     spec.securityContext; spec.containers, spec.initContainers and
//     spec.volumes pin the whole list (a group may add no container, init
//     container or volume);
//   - "runner.<field>": a field of the runner container, for example
//     runner.image, runner.securityContext, runner.resources.
//
// A field is set when the template has it at all, even as {} or []
// (setFields). Pinning one field pins only that field: to keep runner pods
// on the platform's nodes, pin every field that places a pod
// (spec.nodeSelector, spec.affinity, spec.tolerations, spec.nodeName,
// which skips the scheduler, spec.schedulerName, spec.priorityClassName,
// which can preempt other pods, and spec.runtimeClassName).
//
// Pinning refuses rather than ignores: a group that sets a pinned field
// fails with a condition naming the field (and the guardrails policy can
// refuse it at admission), so nobody wonders why their setting has no
// effect.
type Pinned []string

// ParsePinned checks a list of pinned fields and returns it without blanks
// and repeats.
func ParsePinned(in []string) (Pinned, error) {
	var out Pinned
	var errs []error
	for _, p := range in {
		p = strings.TrimSpace(p)
		if p == "" || slices.Contains(out, p) {
			continue
		}
		if err := checkPinnedPath(p); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

func checkPinnedPath(p string) error {
	scope, field, ok := strings.Cut(p, ".")
	switch {
	case !ok || field == "" || strings.Contains(field, "."):
		return fmt.Errorf("pinned field %q: want spec.<pod field> or runner.<container field>", p)
	case scope == "spec":
		if !slices.Contains(jsonFields(reflect.TypeFor[corev1.PodSpec]()), field) {
			return fmt.Errorf("pinned field %q: the pod spec has no field %q", p, field)
		}
		if field == "restartPolicy" {
			return fmt.Errorf("pinned field %q: restartPolicy is reserved for every template already", p)
		}
	case scope == RunnerContainer:
		if !slices.Contains(jsonFields(reflect.TypeFor[corev1.Container]()), field) {
			return fmt.Errorf("pinned field %q: a container has no field %q", p, field)
		}
		if field == "name" {
			return fmt.Errorf("pinned field %q: the runner container's name is always runner", p)
		}
	default:
		return fmt.Errorf("pinned field %q: want spec.<pod field> or runner.<container field>", p)
	}
	return nil
}

// jsonFields are the JSON names of a struct's fields.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// Check reports each pinned field that the template sets.
func (p Pinned) Check(t *corev1.PodTemplateSpec) error {
	if t == nil || len(p) == 0 {
		return nil
	}
	spec := setFields(reflect.ValueOf(t.Spec))
	var runner map[string]bool
	if i := indexOf(t.Spec.Containers, RunnerContainer); i >= 0 {
		runner = setFields(reflect.ValueOf(t.Spec.Containers[i]))
	}
	var errs []error
	for _, path := range p {
		scope, field, _ := strings.Cut(path, ".")
		if (scope == "spec" && spec[field]) || (scope == RunnerContainer && runner[field]) {
			errs = append(errs, fmt.Errorf("%s is pinned by the platform team (the chart's runnerTemplatePinned): a RunnerGroup's template may not set it", path))
		}
	}
	return errors.Join(errs...)
}

// setFields are the JSON fields of a struct that the template wrote.
// Present means set, even empty: a pointer, map or list written as {} or
// [] is non-nil after decoding, and the merge replaces the platform's value
// with an empty object (securityContext: {} would drop its runAsNonRoot),
// so only "absent" leaves a pinned field alone. The guardrails policy's
// has() draws the same line. A scalar written as its zero value (false, 0,
// "") and a struct held by value (a container's resources) written empty
// cannot be told from absent once decoded, and the merge keeps the
// platform's value for them, so they are not set.
func setFields(v reflect.Value) map[string]bool {
	out := map[string]bool{}
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
			out[name] = !f.IsNil()
		default:
			out[name] = !f.IsZero()
		}
	}
	return out
}

// String is the list as one comma-separated line, as the flag takes it.
func (p Pinned) String() string { return strings.Join(p, ",") }
