package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"k8s.io/client-go/util/jsonpath"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/termtext"
)

// The formats kubectl users reach for in scripts, beside table, json and
// yaml.
const (
	FormatName          = "name"
	FormatJSONPath      = "jsonpath"
	FormatCustomColumns = "custom-columns"
)

// Format is a parsed -o value.
type Format struct {
	kind    string
	path    *jsonpath.JSONPath
	columns []column
}

type column struct {
	header string
	path   *jsonpath.JSONPath
}

// ParseFormat reads an -o value as kubectl does: table, json, yaml, name,
// jsonpath=TEMPLATE (applied to the JSON form, {"groups": [...]}) or
// custom-columns=HEADER:PATH,... (each PATH applied to one group's JSON
// form, the braces optional). A template that does not parse is an error
// here, before anything is read.
func ParseFormat(s string) (Format, error) {
	kind, arg, _ := strings.Cut(s, "=")
	switch kind {
	case "", FormatTable:
		return Format{kind: FormatTable}, nil
	case FormatJSON, FormatYAML, FormatName:
		if arg != "" {
			return Format{}, fmt.Errorf("output %s takes no template", kind)
		}
		return Format{kind: kind}, nil
	case FormatJSONPath:
		p, err := parsePath(arg, false)
		if err != nil {
			return Format{}, fmt.Errorf("output jsonpath: %w", err)
		}
		return Format{kind: kind, path: p}, nil
	case FormatCustomColumns:
		f := Format{kind: kind}
		for spec := range strings.SplitSeq(arg, ",") {
			header, expr, ok := strings.Cut(spec, ":")
			if !ok || header == "" || expr == "" {
				return Format{}, fmt.Errorf("output custom-columns: %q is not HEADER:PATH", spec)
			}
			p, err := parsePath(expr, true)
			if err != nil {
				return Format{}, fmt.Errorf("output custom-columns: column %s: %w", header, err)
			}
			f.columns = append(f.columns, column{header: header, path: p})
		}
		return f, nil
	}
	return Format{}, fmt.Errorf("unknown output format %q (want table, json, yaml, name, jsonpath=TEMPLATE or custom-columns=HEADER:PATH,...)", s)
}

// parsePath parses a JSONPath template; relaxed accepts a bare path
// (.ready.reason) as custom-columns does.
func parsePath(expr string, relaxed bool) (*jsonpath.JSONPath, error) {
	if expr == "" {
		return nil, fmt.Errorf("empty template")
	}
	if relaxed && !strings.HasPrefix(expr, "{") {
		if !strings.HasPrefix(expr, ".") {
			expr = "." + expr
		}
		expr = "{" + expr + "}"
	}
	p := jsonpath.New("output").AllowMissingKeys(true)
	if err := p.Parse(expr); err != nil {
		return nil, err
	}
	return p, nil
}

func (f Format) write(w io.Writer, rep Report) error {
	rows := rep.Groups
	switch f.kind {
	case FormatName:
		for _, r := range rows {
			if r.Error == "" {
				fmt.Fprintf(w, "%s.%s/%s\n", strings.ToLower(v1alpha1.Kind), v1alpha1.GroupVersion.Group, termtext.Escape(r.Name))
			}
		}
		return nil
	case FormatJSONPath:
		doc, err := generic(rep)
		if err != nil {
			return err
		}
		return f.path.Execute(w, doc)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	headers := make([]string, len(f.columns))
	for i, c := range f.columns {
		headers[i] = c.header
	}
	fmt.Fprintln(tw, strings.Join(headers, "\t"))
	for _, r := range rows {
		doc, err := generic(r)
		if err != nil {
			return err
		}
		cells := make([]string, len(f.columns))
		for i, c := range f.columns {
			var buf bytes.Buffer
			if err := c.path.Execute(&buf, doc); err != nil {
				return fmt.Errorf("column %s: %w", c.header, err)
			}
			cells[i] = buf.String()
			if cells[i] == "" {
				cells[i] = "<none>"
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// generic is v's JSON form as maps and slices, for JSONPath, with every
// string escaped for the terminal (termtext): names, messages and errors
// are written by others, while the template's own text (a "\n" between
// items) stays as the user wrote it.
func generic(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	return escapeStrings(out), nil
}

func escapeStrings(v any) any {
	switch x := v.(type) {
	case string:
		return termtext.Escape(x)
	case map[string]any:
		for k, e := range x {
			x[k] = escapeStrings(e)
		}
	case []any:
		for i, e := range x {
			x[i] = escapeStrings(e)
		}
	}
	return v
}
