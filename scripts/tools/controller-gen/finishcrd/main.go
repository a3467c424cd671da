// Command finishcrd finishes the CRD files controller-gen wrote, rewriting
// each in place:
//
//	go run ./finishcrd FILE...
//
// It declares metadata.name in the top-level schema. controller-gen always
// writes a CRD's top-level metadata as a bare `type: object`, but the API
// server accepts a CEL rule's fieldPath only when the path exists in the
// schema, so the RunnerGroup rule that bounds metadata.name (fieldPath
// .metadata.name, so that the refusal names that field) would make the whole
// CRD invalid. Declaring name as a string is all the API server allows there
// and changes nothing else: it validates metadata itself.
//
// It slims spec.template, the runner pod template (a core/v1
// PodTemplateSpec): see slimTemplate.
//
// It also drops the '---' line controller-gen writes between the header
// comment and the document. Readers that split a stream on '---' lines
// (k8s.io/apimachinery's YAML reader, which the e2e suite uses) would
// otherwise see the header as a first, empty document.
//
// The document is read and written with the YAML library controller-gen
// writes it with, so everything else stays byte for byte as controller-gen
// wrote it, and running this twice changes nothing.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v2"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: finishcrd FILE...")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		if err := rewrite(path); err != nil {
			fmt.Fprintf(os.Stderr, "finishcrd: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

func rewrite(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	header, body := splitHeader(raw)
	var crd map[any]any
	if err := yaml.Unmarshal(body, &crd); err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	if err := declareMetadataName(crd); err != nil {
		return err
	}
	if err := slimTemplate(crd); err != nil {
		return err
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return os.WriteFile(path, append(header, out...), 0o644)
}

// splitHeader returns the comment and blank lines that open raw (the text
// of controller-gen's crd:headerFile) and the YAML after them, leaving out
// '---' lines among them.
func splitHeader(raw []byte) (header, body []byte) {
	body = raw
	for len(body) > 0 {
		line, rest, _ := bytes.Cut(body, []byte("\n"))
		switch {
		case string(line) == "---":
		case len(bytes.TrimSpace(line)) == 0 || bytes.HasPrefix(line, []byte("#")):
			header = append(append(header, line...), '\n')
		default:
			return header, body
		}
		body = rest
	}
	return header, body
}

// declareMetadataName sets the top-level metadata schema of every version
// to an object whose name is a string.
func declareMetadataName(crd map[any]any) error {
	if crd["kind"] != "CustomResourceDefinition" {
		return errors.New("not a CustomResourceDefinition")
	}
	versions, err := lookup[[]any](crd, "spec", "versions")
	if err != nil {
		return err
	}
	for i, v := range versions {
		props, err := lookup[map[any]any](v, "schema", "openAPIV3Schema", "properties")
		if err != nil {
			return fmt.Errorf("spec.versions[%d]: %w", i, err)
		}
		props["metadata"] = map[any]any{
			"type":       "object",
			"properties": map[any]any{"name": map[any]any{"type": "string"}},
		}
	}
	return nil
}

// templateBounds are the maxItems, maxProperties and maxLength that
// slimTemplate adds to spec.template, by path below it ("[]" stands for the
// items of a list). Kubernetes itself sets no such bounds on a pod, but the
// API server refuses a CRD whose CEL rules it cannot bound in cost, and the
// template's rules walk every container's env and every volume. The bounds
// are far above what a runner pod needs.
var templateBounds = map[string][2]any{
	"metadata.labels":                  {"maxProperties", 64},
	"metadata.annotations":             {"maxProperties", 64},
	"spec.containers":                  {"maxItems", 16},
	"spec.initContainers":              {"maxItems", 16},
	"spec.containers[].env":            {"maxItems", 128},
	"spec.initContainers[].env":        {"maxItems", 128},
	"spec.containers[].env[].name":     {"maxLength", 256},
	"spec.initContainers[].env[].name": {"maxLength", 256},
	"spec.containers[].envFrom":        {"maxItems", 32},
	"spec.initContainers[].envFrom":    {"maxItems", 32},
	"spec.volumes":                     {"maxItems", 64},
	"spec.volumes[].projected.sources": {"maxItems", 16},
}

// slimTemplate rewrites the schema of spec.template in every version:
//
//   - It drops the field descriptions below spec.template (its own stays).
//     They are Kubernetes' pod documentation, over 400 KB of a CRD that
//     would otherwise be some 600 KB: too large for a client-side
//     kubectl apply (its last-applied annotation holds at most 256 KiB), and
//     kubectl explain pod.spec shows the same text.
//   - It drops "containers" from the pod spec's required fields: a template
//     that only sets nodeSelector is complete, because the runner container
//     is the scaler's.
//   - It adds templateBounds.
func slimTemplate(crd map[any]any) error {
	versions, err := lookup[[]any](crd, "spec", "versions")
	if err != nil {
		return err
	}
	for i, v := range versions {
		tmpl, err := lookup[map[any]any](v, "schema", "openAPIV3Schema", "properties", "spec", "properties", "template")
		if err != nil {
			return fmt.Errorf("spec.versions[%d]: %w", i, err)
		}
		for _, child := range tmpl {
			dropDescriptions(child)
		}
		podSpec, err := lookup[map[any]any](tmpl, "properties", "spec")
		if err != nil {
			return fmt.Errorf("spec.versions[%d] template: %w", i, err)
		}
		if req, ok := podSpec["required"].([]any); ok {
			var keep []any
			for _, r := range req {
				if r != "containers" {
					keep = append(keep, r)
				}
			}
			if len(keep) == 0 {
				delete(podSpec, "required")
			} else {
				podSpec["required"] = keep
			}
		}
		for path, bound := range templateBounds {
			node, err := schemaAt(tmpl, path)
			if err != nil {
				return fmt.Errorf("spec.versions[%d] template %s: %w", i, path, err)
			}
			node[bound[0]] = bound[1]
		}
	}
	return nil
}

// schemaAt follows a templateBounds path through a schema: a name is a
// property, "[]" the items of a list.
func schemaAt(node map[any]any, path string) (map[any]any, error) {
	for _, part := range strings.Split(path, ".") {
		name, items := strings.CutSuffix(part, "[]")
		next, err := lookup[map[any]any](node, "properties", name)
		if err != nil {
			return nil, err
		}
		if items {
			if next, err = lookup[map[any]any](next, "items"); err != nil {
				return nil, err
			}
		}
		node = next
	}
	return node, nil
}

// dropDescriptions removes every description in a schema.
func dropDescriptions(node any) {
	switch n := node.(type) {
	case map[any]any:
		delete(n, "description")
		for _, v := range n {
			dropDescriptions(v)
		}
	case []any:
		for _, v := range n {
			dropDescriptions(v)
		}
	}
}

// lookup follows keys through nested maps and returns the value at the end
// as a T.
func lookup[T any](node any, keys ...string) (T, error) {
	var zero T
	path := ""
	for _, k := range keys {
		m, ok := node.(map[any]any)
		if !ok {
			return zero, fmt.Errorf("%s is missing or not a map", path)
		}
		node, path = m[k], path+"."+k
	}
	v, ok := node.(T)
	if !ok {
		return zero, fmt.Errorf("%s is missing or has another type", path)
	}
	return v, nil
}
