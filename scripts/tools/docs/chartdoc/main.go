// Command chartdoc writes the generated parts of a chart's README.md from
// its values.yaml and Chart.yaml: the chart's facts (version, appVersion,
// Kubernetes versions) and the table of every value, as ArtifactHub shows
// the README. Everything else in README.md is written by hand; chartdoc
// replaces only what lies between its markers, so prose and generated
// tables live in one file that people edit as usual:
//
//	<!-- chartdoc:begin chart -->   ... <!-- chartdoc:end chart -->
//	<!-- chartdoc:begin values -->  ... <!-- chartdoc:end values -->
//
// A value is described by the "## " comment lines above its key in
// values.yaml. A key without one is an error, so every value is documented
// where it is set. Lines from "## Example:" on are a YAML example; it goes
// below the table, under the key's own heading, since a table cell cannot
// hold a code block.
//
// Usage:
//
//	chartdoc CHART_DIR          rewrite CHART_DIR/README.md
//	chartdoc -check CHART_DIR   change nothing; exit 1 when README.md is stale
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gitea-runner-operator/gitea-runner-operator/scripts/tools/docs/internal/ghslug"
)

func main() {
	check := flag.Bool("check", false, "change nothing; exit 1 when README.md differs from what chartdoc writes")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: chartdoc [-check] CHART_DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *check); err != nil {
		fmt.Fprintf(os.Stderr, "chartdoc: %v\n", err)
		os.Exit(1)
	}
}

func run(chartDir string, check bool) error {
	readmePath := filepath.Join(chartDir, "README.md")
	values, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		return err
	}
	chart, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		return err
	}
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		return err
	}
	out, err := render(readme, values, chart)
	if err != nil {
		return err
	}
	if bytes.Equal(out, readme) {
		return nil
	}
	if check {
		return fmt.Errorf("%s is stale: run `make docs` and commit the result (edit values.yaml's comments, not the generated table)", readmePath)
	}
	return os.WriteFile(readmePath, out, 0o644)
}

// render returns readme with its marked regions rewritten from values.yaml
// and Chart.yaml.
func render(readme, values, chart []byte) ([]byte, error) {
	rows, err := parseValues(values)
	if err != nil {
		return nil, err
	}
	meta, err := parseChart(chart)
	if err != nil {
		return nil, err
	}
	out, err := replaceRegion(readme, "chart", chartFacts(meta))
	if err != nil {
		return nil, err
	}
	return replaceRegion(out, "values", valuesTable(rows))
}

const markerFmt = "<!-- chartdoc:%s %s -->"

// replaceRegion replaces the lines between the begin and end markers of
// region with body, keeping the markers.
func replaceRegion(doc []byte, region, body string) ([]byte, error) {
	begin := fmt.Sprintf(markerFmt, "begin", region)
	end := fmt.Sprintf(markerFmt, "end", region)
	lines := strings.SplitAfter(string(doc), "\n")
	b, e := -1, -1
	for i, l := range lines {
		switch strings.TrimSpace(l) {
		case begin:
			if b >= 0 {
				return nil, fmt.Errorf("README.md has %q twice", begin)
			}
			b = i
		case end:
			if e >= 0 {
				return nil, fmt.Errorf("README.md has %q twice", end)
			}
			e = i
		}
	}
	if b < 0 || e < 0 || e < b {
		return nil, fmt.Errorf("README.md needs a line %q and, after it, a line %q: chartdoc writes between them", begin, end)
	}
	var out strings.Builder
	for _, l := range lines[:b+1] {
		out.WriteString(l)
	}
	out.WriteString(body)
	for _, l := range lines[e:] {
		out.WriteString(l)
	}
	return []byte(out.String()), nil
}

type chartMeta struct {
	Name        string `yaml:"name"`
	Version     string `yaml:"version"`
	AppVersion  string `yaml:"appVersion"`
	KubeVersion string `yaml:"kubeVersion"`
}

func parseChart(raw []byte) (chartMeta, error) {
	var m chartMeta
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return m, fmt.Errorf("cannot parse Chart.yaml: %w", err)
	}
	if m.Name == "" || m.Version == "" {
		return m, errors.New("no name or version in Chart.yaml")
	}
	return m, nil
}

func chartFacts(m chartMeta) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| Chart | Version | App version | Kubernetes |\n| --- | --- | --- | --- |\n")
	fmt.Fprintf(&b, "| `%s` | `%s` | `%s` | `%s` |\n", m.Name, m.Version, orDash(m.AppVersion), orDash(m.KubeVersion))
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// row is one key of values.yaml.
type row struct {
	Path    string // dotted path, image.tag
	Type    string // string, int, bool, float, list, object
	Default string // the value in YAML flow style; empty for a map with keys
	Doc     string // the comment's prose, one paragraph
	Example string // the YAML after "## Example:", if any
	Line    int
}

// parseValues returns every key of values.yaml, parents before their
// children, and fails naming each key that has no "## " comment.
func parseValues(raw []byte) ([]row, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("cannot parse values.yaml: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("values.yaml is not a map")
	}
	var rows []row
	var missing []string
	walk(doc.Content[0], "", &rows, &missing)
	if len(missing) > 0 {
		return nil, fmt.Errorf("every value needs a \"## \" comment above its key in values.yaml, saying what it does; these have none:\n  %s", strings.Join(missing, "\n  "))
	}
	return rows, nil
}

func walk(m *yaml.Node, prefix string, rows *[]row, missing *[]string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, value := m.Content[i], m.Content[i+1]
		path := key.Value
		if prefix != "" {
			path = prefix + "." + key.Value
		}
		doc, example := prose(key.HeadComment)
		if doc == "" {
			*missing = append(*missing, fmt.Sprintf("%s (values.yaml line %d)", path, key.Line))
		}
		r := row{Path: path, Type: typeOf(value), Doc: doc, Example: example, Line: key.Line}
		parent := value.Kind == yaml.MappingNode && len(value.Content) > 0
		if !parent {
			r.Default = flow(value)
		}
		*rows = append(*rows, r)
		if parent {
			walk(value, path, rows, missing)
		}
	}
}

// prose splits a key's head comment into its description (the "## " lines,
// joined) and its example (the lines after "## Example:"). Lines starting
// with a single "#" are notes for maintainers and are left out, and so is
// any block separated from the key by a blank line (the file's header).
func prose(comment string) (doc, example string) {
	var words []string
	var ex []string
	inExample := false
	for _, line := range strings.Split(comment, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			// A blank line ends a comment block: only the block right above
			// the key describes it.
			words, ex, inExample = nil, nil, false
			continue
		}
		if line != "##" && !strings.HasPrefix(line, "## ") {
			continue
		}
		text := strings.TrimPrefix(strings.TrimPrefix(line, "##"), " ")
		if inExample {
			ex = append(ex, text)
			continue
		}
		if strings.TrimSpace(text) == "Example:" {
			inExample = true
			continue
		}
		if strings.HasPrefix(text, "  ") {
			// An indented line is a list inside the prose (listeners' entry
			// fields): keep it on a line of its own.
			words = append(words, "<br>`"+strings.TrimSpace(text)+"`")
			continue
		}
		words = append(words, strings.TrimSpace(text))
	}
	return strings.Join(words, " "), strings.Join(ex, "\n")
}

func typeOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "object"
	case yaml.SequenceNode:
		return "list"
	}
	switch n.ShortTag() {
	case "!!str":
		return "string"
	case "!!int":
		return "int"
	case "!!bool":
		return "bool"
	case "!!float":
		return "float"
	case "!!null":
		return "null"
	}
	return strings.TrimPrefix(n.ShortTag(), "!!")
}

// flow is a node as one line of YAML: "" for an empty string, [] and {}.
func flow(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		if n.Value == "" {
			return `""`
		}
		return n.Value
	}
	c := *n
	c.Style = yaml.FlowStyle
	c.HeadComment, c.LineComment, c.FootComment = "", "", ""
	out, err := yaml.Marshal(&c)
	if err != nil {
		return n.Value
	}
	return strings.TrimSpace(string(out))
}

func valuesTable(rows []row) string {
	var b strings.Builder
	b.WriteString("| Key | Type | Default | Description |\n| --- | --- | --- | --- |\n")
	var examples []row
	for _, r := range rows {
		def := ""
		if r.Default != "" {
			def = "`" + strings.ReplaceAll(r.Default, "|", `\|`) + "`"
		}
		doc := cell(r.Doc)
		if r.Example != "" {
			examples = append(examples, r)
			doc += " [Example](#" + ghslug.Slug(exampleHeading(r.Path)) + ")."
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.Path, r.Type, def, doc)
	}
	if len(examples) > 0 {
		b.WriteString("\n### Examples of values\n")
		for _, r := range examples {
			fmt.Fprintf(&b, "\n#### %s\n\n```yaml\n%s\n```\n", exampleHeading(r.Path), r.Example)
		}
	}
	return b.String()
}

func exampleHeading(path string) string { return "Example: " + path }

// cell makes prose safe in a table cell: outside code spans, '<' and '>'
// would start HTML tags that GitHub hides (<fullname>, spec.<pod field>) and
// '*' emphasis (SCALER_*, gitea.bpg.pw/*); everywhere, '|' would end the
// cell. The "<br>" that prose puts before an indented line stays a tag.
func cell(s string) string {
	parts := strings.Split(s, "`")
	for i, p := range parts {
		if i%2 == 0 { // outside a code span
			p = strings.NewReplacer("<br>", "<br>", "<", "&lt;", ">", "&gt;", "*", `\*`).Replace(p)
		}
		parts[i] = strings.ReplaceAll(p, "|", `\|`)
	}
	return strings.Join(parts, "`")
}
