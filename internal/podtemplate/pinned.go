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
	spec, err := setFields(&t.Spec)
	if err != nil {
		return err
	}
	var runner map[string]bool
	if i := indexOf(t.Spec.Containers, RunnerContainer); i >= 0 {
		if runner, err = setFields(&t.Spec.Containers[i]); err != nil {
			return err
		}
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

// setFields are the JSON fields of v that hold something: not absent,
// null, or an empty object.
func setFields(v any) (map[string]bool, error) {
	m, err := toMap(v)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for k, raw := range m {
		s := string(raw)
		if s != "null" && s != "{}" {
			out[k] = true
		}
	}
	return out, nil
}

// String is the list as one comma-separated line, as the flag takes it.
func (p Pinned) String() string { return strings.Join(p, ",") }
