package selector

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// FuzzParse feeds Parse arbitrary text. It must never panic; the string
// form must read exactly as labels.Parse reads it; and a JSON selector's
// string form, which is what reaches the API server, must read back and
// select the same label sets as the JSON did. Run it longer with
//
//	go test -run '^$' -fuzz FuzzParse -fuzztime 30s ./internal/selector/
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", " ", "team=infra,tier in (gpu)", "a!=b,!c,d", "a in (", "{}",
		`{"matchLabels":{"team":"infra"}}`,
		`{"matchLabels":{"a":"b"},"matchExpressions":[{"key":"a","operator":"NotIn","values":["b","c"]}]}`,
		`{"matchExpressions":[{"key":"x.io/k","operator":"Exists"},{"key":"y","operator":"DoesNotExist"}]}`,
		`{"matchExpressions":[{"key":"k","operator":"In","values":["", "v"]}]}`,
		`{"matchLabels":{"a":""}}`, `{"matchLabels":null}`, `{"MatchLabels":{"a":"b"}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		sel, err := Parse(raw)
		_, _ = ParseExclude(raw)
		if err != nil {
			return
		}
		if !isJSON(raw) {
			want, err := labels.Parse(raw)
			if err != nil {
				t.Fatalf("Parse(%q) succeeded where labels.Parse fails: %v", raw, err)
			}
			if want.String() != sel.String() {
				t.Fatalf("Parse(%q) = %q, labels.Parse gives %q", raw, sel, want)
			}
			return
		}
		again, err := labels.Parse(sel.String())
		if err != nil {
			t.Fatalf("the string form %q of %q does not parse: %v", sel, raw, err)
		}
		for _, set := range probes(sel) {
			if sel.Matches(set) != again.Matches(set) {
				t.Fatalf("%q and its string form %q disagree on %v", raw, sel, set)
			}
		}
	})
}

// probes are label sets that tell selectors apart: none, one that meets
// every requirement of sel, and that one with each requirement broken in
// turn.
func probes(sel labels.Selector) []labels.Set {
	reqs, _ := sel.Requirements()
	meet := labels.Set{}
	for _, r := range reqs {
		if v, ok := meeting(r); ok {
			meet[r.Key()] = v
		}
	}
	out := []labels.Set{{}, meet}
	for _, r := range reqs {
		broken := labels.Set{}
		for k, v := range meet {
			broken[k] = v
		}
		switch r.Operator() {
		case selection.DoesNotExist, selection.NotIn, selection.NotEquals:
			broken[r.Key()] = firstValue(r)
		default:
			delete(broken, r.Key())
		}
		out = append(out, broken)
	}
	return out
}

// meeting is a value of r's key that meets r; false means the key must be
// absent.
func meeting(r labels.Requirement) (string, bool) {
	switch r.Operator() {
	case selection.DoesNotExist:
		return "", false
	case selection.NotIn, selection.NotEquals:
		return "probe-" + firstValue(r), true
	default:
		return firstValue(r), true
	}
}

func firstValue(r labels.Requirement) string {
	if vs := r.Values().List(); len(vs) > 0 {
		return vs[0]
	}
	return "x"
}
