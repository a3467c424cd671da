// Command promrules checks the chart's PrometheusRule and Grafana dashboard
// as rendered: every PromQL expression parses with Prometheus' own parser
// (github.com/prometheus/prometheus/promql/parser, what promtool and the
// rule manager use), every alert's "for" is a Prometheus duration and its
// annotations are valid templates, and every metric an expression names is
// one that exists: the scaler's (scaler-metrics.txt, which a test in
// internal/metrics keeps equal to the scaler's registry) or one the chart's
// kube-state-metrics config makes. promtool itself is not built for this:
// its module pulls every service-discovery SDK and takes well over the
// chart checks' budget to build cold.
//
// Usage: promrules -ksm files/kube-state-metrics.yaml -scaler scaler-metrics.txt < manifests.yaml
//
// Built by charts/gitea-runner-operator/hack/check-prometheus-rules.sh.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

func main() {
	ksm := flag.String("ksm", "", "the chart's kube-state-metrics CustomResourceState config")
	scaler := flag.String("scaler", "", "the scaler's metric names, one a line")
	flag.Parse()
	known, err := knownMetrics(*ksm, *scaler)
	if err != nil {
		fmt.Fprintf(os.Stderr, "promrules: %v\n", err)
		os.Exit(2)
	}
	n, errs := check(os.Stdin, known)
	for _, e := range errs {
		fmt.Fprintf(os.Stderr, "promrules: %v\n", e)
	}
	if len(errs) > 0 {
		os.Exit(1)
	}
	if n == 0 {
		fmt.Fprintln(os.Stderr, "promrules: no PrometheusRule or dashboard expression in the input")
		os.Exit(1)
	}
	fmt.Printf("promrules: %d expressions parse and name known metrics\n", n)
}

// knownMetrics is every metric name the expressions may use.
func knownMetrics(ksmPath, scalerPath string) (map[string]bool, error) {
	known := map[string]bool{}
	f, err := os.Open(scalerPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			known[l] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(ksmPath)
	if err != nil {
		return nil, err
	}
	var cfg struct {
		Spec struct {
			Resources []struct {
				MetricNamePrefix string `json:"metricNamePrefix"`
				Metrics          []struct {
					Name string `json:"name"`
				} `json:"metrics"`
			} `json:"resources"`
		} `json:"spec"`
	}
	if err := sigsyaml.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", ksmPath, err)
	}
	for _, r := range cfg.Spec.Resources {
		for _, m := range r.Metrics {
			known[r.MetricNamePrefix+"_"+m.Name] = true
		}
	}
	if len(known) == 0 {
		return nil, errors.New("no known metric names")
	}
	return known, nil
}

type manifest struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Record      string            `json:"record"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// check reads the manifests and returns how many expressions it checked
// and what is wrong.
func check(in io.Reader, known map[string]bool) (int, []error) {
	dec := yaml.NewDecoder(in)
	n := 0
	var errs []error
	for {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, append(errs, err)
		}
		raw, err := yaml.Marshal(&node)
		if err != nil {
			return n, append(errs, err)
		}
		var m manifest
		if err := sigsyaml.Unmarshal(raw, &m); err != nil {
			return n, append(errs, err)
		}
		switch m.Kind {
		case "PrometheusRule":
			for _, g := range m.Spec.Groups {
				for _, r := range g.Rules {
					where := fmt.Sprintf("PrometheusRule %s, group %s, %s%s", m.Metadata.Name, g.Name, r.Alert, r.Record)
					n++
					errs = append(errs, checkExpr(where, r.Expr, known)...)
					if r.Alert == "" {
						errs = append(errs, fmt.Errorf("%s: a rule without an alert name", where))
					}
					if r.For != "" {
						if _, err := model.ParseDuration(r.For); err != nil {
							errs = append(errs, fmt.Errorf("%s: for %q: %w", where, r.For, err))
						}
					}
					for k, v := range r.Annotations {
						if err := checkTemplate(v); err != nil {
							errs = append(errs, fmt.Errorf("%s: annotation %s: %w", where, k, err))
						}
					}
				}
			}
		case "ConfigMap":
			for key, v := range m.Data {
				if !strings.HasSuffix(key, ".json") {
					continue
				}
				k, e := checkDashboard(fmt.Sprintf("ConfigMap %s, %s", m.Metadata.Name, key), v, known)
				n += k
				errs = append(errs, e...)
			}
		}
	}
	return n, errs
}

// checkTemplate parses an annotation as Prometheus expands it: a Go
// template with $labels and $value defined.
func checkTemplate(text string) error {
	_, err := template.New("annotation").Option("missingkey=zero").
		Parse("{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$value := .Value}}" + text)
	return err
}

var labelValues = regexp.MustCompile(`^label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)

// checkDashboard checks a Grafana dashboard's panel and variable queries.
func checkDashboard(where, text string, known map[string]bool) (int, []error) {
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal([]byte(text), &d); err != nil {
		return 0, []error{fmt.Errorf("%s: %w", where, err)}
	}
	n := 0
	var errs []error
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			n++
			errs = append(errs, checkExpr(fmt.Sprintf("%s, panel %q", where, p.Title), t.Expr, known)...)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		s, _ := q["query"].(string)
		m := labelValues.FindStringSubmatch(s)
		if m == nil {
			errs = append(errs, fmt.Errorf("%s, variable %s: not label_values(selector, label): %q", where, v.Name, s))
			continue
		}
		n++
		errs = append(errs, checkExpr(fmt.Sprintf("%s, variable %s", where, v.Name), m[1], known)...)
	}
	return n, errs
}

// checkExpr parses expr and checks the metrics it names.
func checkExpr(where, expr string, known map[string]bool) []error {
	if strings.TrimSpace(expr) == "" {
		return []error{fmt.Errorf("%s: empty expression", where)}
	}
	// The default options: no experimental functions, as a Prometheus
	// without feature flags parses.
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return []error{fmt.Errorf("%s: %w", where, err)}
	}
	var errs []error
	var unknown []string
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if !knownName(vs.Name, known) {
			unknown = append(unknown, vs.Name)
		}
		return nil
	})
	sort.Strings(unknown)
	for _, u := range unknown {
		errs = append(errs, fmt.Errorf("%s: metric %q is neither the scaler's nor kube-state-metrics' RunnerGroup metric", where, u))
	}
	return errs
}

// knownName accepts a histogram's series by its family name.
func knownName(name string, known map[string]bool) bool {
	if known[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && known[base] {
			return true
		}
	}
	return false
}
