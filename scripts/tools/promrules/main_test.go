package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckFindsWhatIsWrong(t *testing.T) {
	known := map[string]bool{"up_total": true, "lat_seconds": true}
	for _, c := range []struct {
		name, in string
		exprs    int
		wantErrs []string
	}{
		{"a good rule", `kind: PrometheusRule
metadata: {name: r}
spec:
  groups:
  - name: g
    rules:
    - alert: A
      expr: sum(rate(up_total[5m])) > 0 and histogram_quantile(0.9, rate(lat_seconds_bucket[5m])) > 1
      for: 5m
      annotations: {summary: "{{ $labels.name }} is {{ $value }}"}
`, 1, nil},
		{"a parse error, an unknown metric, a bad duration and template", `kind: PrometheusRule
metadata: {name: r}
spec:
  groups:
  - name: g
    rules:
    - alert: A
      expr: sum(rate(up_total[5m])
      for: 5 minutes
    - alert: B
      expr: nope_total > 0
      annotations: {summary: "{{ $labels.name"}
`, 2, []string{"unclosed left parenthesis", `unknown unit " minutes"`, `metric "nope_total"`, "annotation summary"}},
		{"a dashboard", `kind: ConfigMap
metadata: {name: d}
data:
  d.json: |
    {"panels": [{"title": "p", "targets": [{"expr": "up_total"}, {"expr": "rate(nope[5m])"}]}],
     "templating": {"list": [{"name": "ns", "type": "query", "query": {"query": "label_values(up_total, namespace)"}},
                             {"name": "x", "type": "query", "query": {"query": "up_total"}}]}}
`, 3, []string{`panel "p": metric "nope"`, "variable x: not label_values"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, errs := check(strings.NewReader(c.in), known)
			assert.Equal(t, c.exprs, n, "expressions checked")
			require.Len(t, errs, len(c.wantErrs), "%v", errs)
			for i, want := range c.wantErrs {
				assert.ErrorContains(t, errs[i], want)
			}
		})
	}
}
