// Package selector reads the label selectors that pick the RunnerGroups a
// listener serves (--selector) and leaves to other listeners
// (--exclude-selector).
//
// A selector comes in either of two forms:
//
//   - the usual string form, as kubectl takes it: `team=infra,tier in (gpu)`;
//   - a JSON LabelSelector object, as Kubernetes objects carry it:
//     `{"matchLabels":{"team":"infra"},"matchExpressions":[...]}`. A value
//     whose first non-blank character is '{' is read this way. The Helm
//     chart passes its values' selectors on in this form, so the chart does
//     not have to turn them into strings itself.
//
// Both come out as one labels.Selector, whose String() is what the scaler
// sends to the API server.
package selector

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// ErrExcludesEverything refuses an exclude selector that matches every
// RunnerGroup: a listener with it would serve nothing, which is never what
// was meant (an empty entry in a list, or an object with nothing in it).
var ErrExcludesEverything = errors.New("would exclude every RunnerGroup")

// Parse reads a selector in either form. An empty string selects every
// RunnerGroup, as does a JSON object with no requirements.
func Parse(raw string) (labels.Selector, error) {
	if !isJSON(raw) {
		return labels.Parse(raw)
	}
	var ls metav1.LabelSelector
	dec := json.NewDecoder(strings.NewReader(raw))
	// A misspelt field ("matchLabel") must not quietly select everything.
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ls); err != nil {
		return nil, fmt.Errorf("invalid JSON label selector: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON label selector: more than one JSON value")
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON label selector: %w", err)
	}
	return sel, nil
}

// ParseExclude reads a selector of RunnerGroups to leave to another
// listener. It refuses one that selects everything (ErrExcludesEverything).
func ParseExclude(raw string) (labels.Selector, error) {
	sel, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	if sel.Empty() {
		return nil, ErrExcludesEverything
	}
	return sel, nil
}

func isJSON(raw string) bool {
	return strings.HasPrefix(strings.TrimSpace(raw), "{")
}
