package metrics

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The chart's kube-state-metrics config (how mode cronjob gets metrics)
// names RunnerGroup fields by path; a path the CRD does not have yields no
// metric and only a log line in kube-state-metrics, so each is checked
// here against the CRD's schema.

type ksmConfig struct {
	Kind string `json:"kind"`
	Spec struct {
		Resources []struct {
			GroupVersionKind struct{ Group, Version, Kind string } `json:"groupVersionKind"`
			MetricNamePrefix string                                `json:"metricNamePrefix"`
			LabelsFromPath   map[string][]string                   `json:"labelsFromPath"`
			Metrics          []struct {
				Name string `json:"name"`
				Help string `json:"help"`
				Each struct {
					Type  string `json:"type"`
					Gauge *struct {
						Path           []string            `json:"path"`
						ValueFrom      []string            `json:"valueFrom"`
						LabelsFromPath map[string][]string `json:"labelsFromPath"`
						NilIsZero      bool                `json:"nilIsZero"`
					} `json:"gauge"`
				} `json:"each"`
			} `json:"metrics"`
		} `json:"resources"`
	} `json:"spec"`
}

type crdSchema struct {
	Type       string               `json:"type"`
	Properties map[string]crdSchema `json:"properties"`
	Items      *crdSchema           `json:"items"`
}

type crd struct {
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Kind string `json:"kind"`
		} `json:"names"`
		Versions []struct {
			Name   string `json:"name"`
			Schema struct {
				OpenAPIV3Schema crdSchema `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

// lookup follows path from s; metadata's fields are the API server's and
// not in a CRD's schema, so only namespace and name are taken there.
func lookup(s crdSchema, path []string) (crdSchema, bool) {
	if len(path) == 2 && path[0] == "metadata" {
		return crdSchema{Type: "string"}, path[1] == "namespace" || path[1] == "name"
	}
	for _, p := range path {
		next, ok := s.Properties[p]
		if !ok {
			return crdSchema{}, false
		}
		s = next
	}
	return s, true
}

// readYAML decodes a file; strict refuses a field into does not have,
// so a misspelt key of the config (kube-state-metrics' own field names,
// as in its customresourcestate.MetricGauge) fails here, not silently there.
func readYAML(t *testing.T, path string, into any, strict bool) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	if strict {
		require.NoError(t, yaml.UnmarshalStrict(raw, into), path)
		return
	}
	require.NoError(t, yaml.Unmarshal(raw, into), path)
}

func TestKubeStateMetricsPathsAreInTheCRD(t *testing.T) {
	root := filepath.Join("..", "..")
	var cfg ksmConfig
	readYAML(t, filepath.Join(root, "charts", "gitea-runner-operator", "files", "kube-state-metrics.yaml"), &cfg, true)
	var def crd
	readYAML(t, filepath.Join(root, "crds", "gitea.bpg.pw_runnergroups.yaml"), &def, false)

	assert.Equal(t, "CustomResourceStateMetrics", cfg.Kind)
	require.Len(t, cfg.Spec.Resources, 1)
	res := cfg.Spec.Resources[0]
	assert.Equal(t, def.Spec.Group, res.GroupVersionKind.Group)
	assert.Equal(t, def.Spec.Names.Kind, res.GroupVersionKind.Kind)
	var schema *crdSchema
	for _, v := range def.Spec.Versions {
		if v.Name == res.GroupVersionKind.Version {
			schema = &v.Schema.OpenAPIV3Schema
		}
	}
	require.NotNil(t, schema, "the CRD serves version %s", res.GroupVersionKind.Version)

	for label, path := range res.LabelsFromPath {
		_, ok := lookup(*schema, path)
		assert.True(t, ok, "label %s: %v", label, path)
	}
	require.NotEmpty(t, res.Metrics)
	for _, m := range res.Metrics {
		assert.NotEmpty(t, m.Help, m.Name)
		require.Equal(t, "Gauge", m.Each.Type, m.Name)
		require.NotNil(t, m.Each.Gauge, m.Name)
		g := m.Each.Gauge
		field, ok := lookup(*schema, g.Path)
		if !assert.True(t, ok, "%s: path %v is not in the CRD", m.Name, g.Path) {
			continue
		}
		if field.Type == "array" {
			// A list: each item is a series, its labels and value read
			// from the item (the conditions).
			require.NotNil(t, field.Items, m.Name)
			require.NotEmpty(t, g.ValueFrom, "%s: a list needs valueFrom", m.Name)
			_, ok := lookup(*field.Items, g.ValueFrom)
			assert.True(t, ok, "%s: valueFrom %v is not in the CRD", m.Name, g.ValueFrom)
			for label, p := range g.LabelsFromPath {
				_, ok := lookup(*field.Items, p)
				assert.True(t, ok, "%s: label %s path %v is not in the CRD", m.Name, label, p)
			}
			continue
		}
		assert.Empty(t, g.ValueFrom, m.Name)
		assert.Contains(t, []string{"integer", "number", "string"}, field.Type, "%s: %v is a %s, not a value", m.Name, g.Path, field.Type)
		if field.Type == "string" {
			assert.True(t, strings.HasSuffix(m.Name, "_timestamp_seconds"), "%s: a string field is read as an RFC 3339 time", m.Name)
		}
	}
}

// The per-group gauges the looping scaler serves have a counterpart from
// the groups' status, so a dashboard or rule can use either.
func TestKubeStateMetricsCoverTheScalersGroupGauges(t *testing.T) {
	var cfg ksmConfig
	readYAML(t, filepath.Join("..", "..", "charts", "gitea-runner-operator", "files", "kube-state-metrics.yaml"), &cfg, true)
	names := map[string]bool{}
	for _, m := range cfg.Spec.Resources[0].Metrics {
		names[m.Name] = true
	}
	for _, d := range groupGaugeDefs {
		want := strings.TrimPrefix(d.name, "runnergroup_")
		if want == "max_runners" {
			want = "spec_max_active_runners"
		} else {
			want = "status_" + want
		}
		assert.True(t, names[want], "%s has no kube-state-metrics counterpart %s", d.name, want)
	}
}
