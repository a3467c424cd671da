// Command podsecurity checks every pod template in rendered manifests against
// a Pod Security Standards level with the Kubernetes admission library
// itself (k8s.io/pod-security-admission), so "the default listener pod passes
// restricted" is checked by the same code an API server runs, not by a list
// of asserts that could miss a rule.
//
// Usage: podsecurity [-level restricted] < manifests.yaml
//
// It reads the multi-document output of `helm template`, evaluates the pod
// template of each CronJob, Deployment, Job and Pod at the latest policy
// version, prints each verdict and exits 1 if any is forbidden.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	sigsyaml "sigs.k8s.io/yaml"
)

func main() {
	level := flag.String("level", "restricted", "Pod Security Standards level: baseline or restricted")
	flag.Parse()
	lvl, err := api.ParseLevel(*level)
	if err != nil {
		fmt.Fprintf(os.Stderr, "podsecurity: %v\n", err)
		os.Exit(2)
	}
	ok, err := run(lvl, os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "podsecurity: %v\n", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func run(level api.Level, in io.Reader, out io.Writer) (bool, error) {
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return false, err
	}
	lv := api.LevelVersion{Level: level, Version: api.LatestVersion()}
	pods, err := podTemplates(in)
	if err != nil {
		return false, err
	}
	if len(pods) == 0 {
		return false, errors.New("no pod template in the input")
	}
	allOK := true
	for _, p := range pods {
		result := policy.AggregateCheckResults(evaluator.EvaluatePod(lv, &p.template.ObjectMeta, &p.template.Spec))
		if result.Allowed {
			fmt.Fprintf(out, "podsecurity: %s %s: allowed at %s\n", p.kind, p.name, lv)
			continue
		}
		allOK = false
		fmt.Fprintf(out, "podsecurity: %s %s: FORBIDDEN at %s: %s\n", p.kind, p.name, lv, result.ForbiddenDetail())
	}
	return allOK, nil
}

type namedTemplate struct {
	kind, name string
	template   corev1.PodTemplateSpec
}

// podTemplates returns the pod template of every workload in the input.
func podTemplates(in io.Reader) ([]namedTemplate, error) {
	dec := yaml.NewDecoder(in)
	var out []namedTemplate
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("cannot parse manifests: %w", err)
		}
		if doc == nil {
			continue
		}
		kind, _ := doc["kind"].(string)
		meta, _ := doc["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		var tmpl any
		switch kind {
		case "CronJob":
			tmpl = dig(doc, "spec", "jobTemplate", "spec", "template")
		case "Deployment", "Job", "StatefulSet", "DaemonSet", "ReplicaSet":
			tmpl = dig(doc, "spec", "template")
		case "Pod":
			tmpl = map[string]any{"metadata": doc["metadata"], "spec": doc["spec"]}
		default:
			continue
		}
		if tmpl == nil {
			return nil, fmt.Errorf("%s %s has no pod template", kind, name)
		}
		var buf bytes.Buffer
		if err := yaml.NewEncoder(&buf).Encode(tmpl); err != nil {
			return nil, err
		}
		var pt corev1.PodTemplateSpec
		if err := sigsyaml.UnmarshalStrict(buf.Bytes(), &pt); err != nil {
			return nil, fmt.Errorf("%s %s: pod template does not decode as a PodTemplateSpec: %w", kind, name, err)
		}
		out = append(out, namedTemplate{kind: kind, name: name, template: pt})
	}
}

func dig(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}
