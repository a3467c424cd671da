package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// workflow is the part of a GitHub Actions workflow the supply-chain rules read.
type workflow struct {
	Jobs map[string]struct {
		Steps []struct {
			Uses string         `json:"uses"`
			With map[string]any `json:"with"`
		} `json:"steps"`
	} `json:"jobs"`
}

var pinnedByCommit = regexp.MustCompile(`^[^@\s]+@[0-9a-f]{40}$`)

// workflowFaults lists each step of a workflow that breaks a rule: a tag or
// branch can be moved to other code after review, a commit cannot; and a
// checkout that keeps its token on disk hands it to every later step.
func workflowFaults(doc []byte) ([]string, error) {
	var w workflow
	if err := yaml.Unmarshal(doc, &w); err != nil {
		return nil, err
	}
	var faults []string
	for name, job := range w.Jobs {
		for i, step := range job.Steps {
			if step.Uses == "" || strings.HasPrefix(step.Uses, "./") {
				continue
			}
			if !pinnedByCommit.MatchString(step.Uses) {
				faults = append(faults, fmt.Sprintf("%s step %d: %s is not pinned by a 40-hex commit", name, i, step.Uses))
			}
			if strings.HasPrefix(step.Uses, "actions/checkout@") && step.With["persist-credentials"] != false {
				faults = append(faults, fmt.Sprintf("%s step %d: checkout without persist-credentials: false", name, i))
			}
		}
	}
	sort.Strings(faults)
	return faults, nil
}

func TestWorkflowFaults(t *testing.T) {
	const sha = "11d5960a326750d5838078e36cf38b85af677262"
	tests := []struct {
		name  string
		steps string
		want  []string
	}{
		{"pinned, no credentials kept",
			"- uses: actions/checkout@" + sha + "\n  with: {persist-credentials: false}\n- run: make", nil},
		{"a tag",
			"- uses: actions/setup-go@v5", []string{"j step 0: actions/setup-go@v5 is not pinned by a 40-hex commit"}},
		{"a short commit",
			"- uses: actions/cache@0057852", []string{"j step 0: actions/cache@0057852 is not pinned by a 40-hex commit"}},
		{"checkout keeps its credentials",
			"- uses: actions/checkout@" + sha, []string{"j step 0: checkout without persist-credentials: false"}},
		{"checkout says persist-credentials as a string",
			"- uses: actions/checkout@" + sha + "\n  with: {persist-credentials: \"false\"}", []string{"j step 0: checkout without persist-credentials: false"}},
		{"a local action", "- uses: ./.github/actions/x", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "jobs:\n  j:\n    steps:\n" + indent(tt.steps, "      ")
			got, err := workflowFaults([]byte(doc))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// Every workflow of the repository keeps the rules workflowFaults checks.
func TestWorkflowsPinActionsAndDropCredentials(t *testing.T) {
	files, err := filepath.Glob("../../.github/workflows/*.y*ml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		doc, err := os.ReadFile(f)
		require.NoError(t, err)
		faults, err := workflowFaults(doc)
		require.NoError(t, err, f)
		assert.Empty(t, faults, f)
	}
}

func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}
