// Command listenerrouting proves, on a rendered chart, that every RunnerGroup
// is served by exactly one listener. It reads the manifests `helm template`
// prints on stdin and takes each listener's SCALER_SELECTOR and
// SCALER_EXCLUDE_SELECTORS from its listener container. The chart renders
// each selector as a JSON LabelSelector; this parses it as the scaler does
// (metav1.LabelSelectorAsSelector) and evaluates the selectors the way the
// scaler serves groups: a group is served when it matches SCALER_SELECTOR
// (unset meaning every group) and none of the ';'-separated
// SCALER_EXCLUDE_SELECTORS.
//
// Usage: listenerrouting CASES_FILE < manifests.yaml
//
// CASES_FILE lists label sets with the listener (gitea.bpg.pw/listener label)
// that must serve each. Beyond those cases, every combination of the label
// keys and values the cases mention (each key also absent) must be served by
// exactly one listener, so a gap or an overlap the cases miss still fails.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

type listener struct {
	name     string
	selector labels.Selector
	exclude  []labels.Selector
}

type routingCase struct {
	Labels   map[string]string `yaml:"labels"`
	Listener string            `yaml:"listener"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: listenerrouting CASES_FILE < manifests.yaml")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "listenerrouting: %v\n", err)
		os.Exit(1)
	}
}

func run(casesPath string, manifests io.Reader, out io.Writer) error {
	listeners, err := readListeners(manifests)
	if err != nil {
		return err
	}
	if len(listeners) == 0 {
		return errors.New("no CronJob or Deployment with a listener container in the input")
	}
	raw, err := os.ReadFile(casesPath)
	if err != nil {
		return err
	}
	var file struct {
		Cases []routingCase `yaml:"cases"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		return fmt.Errorf("cannot parse %s: %w", casesPath, err)
	}
	if len(file.Cases) == 0 {
		return fmt.Errorf("%s has no cases", casesPath)
	}

	var failures []string
	for _, c := range file.Cases {
		served := serving(listeners, c.Labels)
		if len(served) != 1 || served[0] != c.Listener {
			failures = append(failures, fmt.Sprintf("labels %v: want listener %q, served by %v", c.Labels, c.Listener, served))
		}
	}
	sets := combinations(file.Cases)
	for _, set := range sets {
		if served := serving(listeners, set); len(served) != 1 {
			failures = append(failures, fmt.Sprintf("labels %v: served by %d listeners %v, want exactly one", set, len(served), served))
		}
	}
	if len(failures) > 0 {
		return errors.New(strings.Join(failures, "\n"))
	}
	names := make([]string, 0, len(listeners))
	for _, l := range listeners {
		names = append(names, l.name)
	}
	fmt.Fprintf(out, "listenerrouting: %d listeners %v; %d cases and %d label combinations each served by exactly one\n",
		len(listeners), names, len(file.Cases), len(sets))
	return nil
}

// serving returns the listeners that serve a RunnerGroup with these labels.
func serving(listeners []listener, set map[string]string) []string {
	var served []string
	ls := labels.Set(set)
	for _, l := range listeners {
		if !l.selector.Matches(ls) {
			continue
		}
		excluded := false
		for _, ex := range l.exclude {
			if ex.Matches(ls) {
				excluded = true
				break
			}
		}
		if !excluded {
			served = append(served, l.name)
		}
	}
	return served
}

// combinations returns every label set built from the keys and values the
// cases mention, each key also left out.
func combinations(cases []routingCase) []map[string]string {
	values := map[string]map[string]bool{}
	for _, c := range cases {
		for k, v := range c.Labels {
			if values[k] == nil {
				values[k] = map[string]bool{}
			}
			values[k][v] = true
		}
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	sets := []map[string]string{{}}
	for _, k := range keys {
		var next []map[string]string
		for _, s := range sets {
			next = append(next, s) // key absent
			for v := range values[k] {
				c := make(map[string]string, len(s)+1)
				for kk, vv := range s {
					c[kk] = vv
				}
				c[k] = v
				next = append(next, c)
			}
		}
		sets = next
	}
	return sets
}

type manifest struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		Template    podTemplate `yaml:"template"`
		JobTemplate struct {
			Spec struct {
				Template podTemplate `yaml:"template"`
			} `yaml:"spec"`
		} `yaml:"jobTemplate"`
	} `yaml:"spec"`
}

type podTemplate struct {
	Spec struct {
		Containers []struct {
			Name string `yaml:"name"`
			Env  []struct {
				Name  string `yaml:"name"`
				Value string `yaml:"value"`
			} `yaml:"env"`
		} `yaml:"containers"`
	} `yaml:"spec"`
}

func readListeners(r io.Reader) ([]listener, error) {
	dec := yaml.NewDecoder(r)
	var out []listener
	for {
		var m manifest
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("cannot parse manifests: %w", err)
		}
		var pod podTemplate
		switch m.Kind {
		case "CronJob":
			pod = m.Spec.JobTemplate.Spec.Template
		case "Deployment":
			pod = m.Spec.Template
		default:
			continue
		}
		for _, c := range pod.Spec.Containers {
			if c.Name != "listener" {
				continue
			}
			l := listener{name: m.Metadata.Labels["gitea.bpg.pw/listener"], selector: labels.Everything()}
			for _, e := range c.Env {
				switch e.Name {
				case "SCALER_SELECTOR":
					sel, err := parseSelector(e.Value)
					if err != nil {
						return nil, fmt.Errorf("%s: SCALER_SELECTOR %q: %w", m.Metadata.Name, e.Value, err)
					}
					l.selector = sel
				case "SCALER_EXCLUDE_SELECTORS":
					for _, part := range strings.Split(e.Value, ";") {
						sel, err := parseSelector(part)
						if err != nil {
							return nil, fmt.Errorf("%s: SCALER_EXCLUDE_SELECTORS entry %q: %w", m.Metadata.Name, part, err)
						}
						l.exclude = append(l.exclude, sel)
					}
				}
			}
			out = append(out, l)
		}
	}
}

// parseSelector reads one selector as the chart renders it: a JSON
// LabelSelector, turned into a selector by the function the scaler uses.
// Unknown fields are refused, so a misspelt key in the chart's rendering
// fails here instead of silently matching more groups.
func parseSelector(text string) (labels.Selector, error) {
	if !strings.HasPrefix(text, "{") {
		return nil, errors.New("not a JSON LabelSelector (the chart renders selectors as JSON)")
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.DisallowUnknownFields()
	var ls metav1.LabelSelector
	if err := dec.Decode(&ls); err != nil {
		return nil, fmt.Errorf("cannot parse the LabelSelector: %w", err)
	}
	if dec.More() {
		return nil, errors.New("text after the LabelSelector")
	}
	return metav1.LabelSelectorAsSelector(&ls)
}
