// Command valuesdoc checks that a chart's values.yaml and the values table of
// its README.md name the same keys, and that every key in values.yaml has a
// "##" comment above it. Documentation that drifts from the values is worse
// than none: users copy keys that no longer exist and miss the ones that do.
//
// Usage: valuesdoc CHART_DIR
//
// A documented key is a path of map keys joined by dots (image.tag). Maps
// with keys are descended into; everything else (scalars, lists, empty maps)
// is a leaf that the README table must list in its first column, in
// backticks. The table is every row under the "## Values" heading.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: valuesdoc CHART_DIR")
		os.Exit(2)
	}
	problems, err := check(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "valuesdoc: %v\n", err)
		os.Exit(2)
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(os.Stderr, "valuesdoc: %s\n", p)
		}
		os.Exit(1)
	}
	fmt.Println("valuesdoc: values.yaml and README.md list the same keys")
}

func check(chartDir string) ([]string, error) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("cannot parse values.yaml: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("values.yaml is not a map")
	}
	var problems []string
	values := map[string]bool{}
	walk(doc.Content[0], "", values, &problems)

	documented, err := readmeKeys(filepath.Join(chartDir, "README.md"))
	if err != nil {
		return nil, err
	}
	for _, k := range sortedKeys(values) {
		if !documented[k] {
			problems = append(problems, fmt.Sprintf("%s is in values.yaml but not in the README values table", k))
		}
	}
	for _, k := range sortedKeys(documented) {
		if !values[k] {
			problems = append(problems, fmt.Sprintf("%s is in the README values table but not in values.yaml", k))
		}
	}
	return problems, nil
}

// walk records the leaf paths of m and reports keys without a "##" comment.
func walk(m *yaml.Node, prefix string, leaves map[string]bool, problems *[]string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, value := m.Content[i], m.Content[i+1]
		path := key.Value
		if prefix != "" {
			path = prefix + "." + key.Value
		}
		if !hasProse(key.HeadComment) {
			*problems = append(*problems, fmt.Sprintf("%s (values.yaml line %d) has no \"##\" comment above it", path, key.Line))
		}
		if value.Kind == yaml.MappingNode && len(value.Content) > 0 {
			walk(value, path, leaves, problems)
			continue
		}
		leaves[path] = true
	}
}

func hasProse(comment string) bool {
	for _, line := range strings.Split(comment, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "## ") {
			return true
		}
	}
	return false
}

var rowKey = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|")

// readmeKeys returns the keys in the first column of the "## Values" section.
func readmeKeys(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	keys := map[string]bool{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = strings.TrimSpace(line) == "## Values"
			continue
		}
		if !in {
			continue
		}
		if m := rowKey.FindStringSubmatch(line); m != nil {
			keys[m[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("README.md has no table rows under \"## Values\"")
	}
	return keys, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
