// Command apidoc writes the API reference of the RunnerGroup kind from the Go
// types in internal/api/v1alpha1: their doc comments (what `kubectl
// explain` shows too, since controller-gen copies them into the CRD) and
// their kubebuilder markers (bounds, patterns, enums, the CEL rules'
// messages, the printer columns). The types are the one source of the
// schema, so the reference is generated from them rather than written
// twice.
//
// It reads the package with go/parser and go/ast rather than the CRD's
// OpenAPI schema: the Go side knows which types are the project's own
// (documented here, one section each) and which are Kubernetes' (linked),
// whereas the CRD inlines all of PodTemplateSpec.
//
// Usage:
//
//	apidoc -pkg DIR -kind RunnerGroup -out FILE          write FILE
//	apidoc -pkg DIR -kind RunnerGroup -out FILE -check   exit 1 when FILE is stale
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/gitea-runner-operator/gitea-runner-operator/scripts/tools/docs/internal/ghslug"
)

func main() {
	pkg := flag.String("pkg", "", "directory of the API package")
	kind := flag.String("kind", "", "the root type (the CRD's kind)")
	out := flag.String("out", "", "the Markdown file to write")
	check := flag.Bool("check", false, "change nothing; exit 1 when -out differs from what apidoc writes")
	flag.Parse()
	if *pkg == "" || *kind == "" || *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: apidoc -pkg DIR -kind KIND -out FILE [-check]")
		os.Exit(2)
	}
	if err := run(*pkg, *kind, *out, *check); err != nil {
		fmt.Fprintf(os.Stderr, "apidoc: %v\n", err)
		os.Exit(1)
	}
}

func run(pkgDir, kind, outPath string, check bool) error {
	api, err := load(pkgDir)
	if err != nil {
		return err
	}
	doc, err := api.render(kind)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(outPath)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if bytes.Equal(old, doc) {
		return nil
	}
	if check {
		return fmt.Errorf("%s is stale: run `make docs` and commit the result (edit the doc comments in %s, not the reference)", outPath, pkgDir)
	}
	return os.WriteFile(outPath, doc, 0o644)
}

// typeDecl is one named type of the package.
type typeDecl struct {
	name    string
	doc     string
	markers []string
	expr    ast.Expr
	fields  []field // for structs
	enum    []string
}

type field struct {
	name     string // JSON name; "" for an inlined embedded type
	expr     ast.Expr
	doc      string
	markers  []string
	optional bool
}

type api struct {
	group, version string
	types          map[string]*typeDecl
	imports        map[string]string // package name → import path
	consts         map[string][]string
}

// load parses the package's non-test, non-generated files.
func load(dir string) (*api, error) {
	// Every .go file but tests and generated code; go/parser's ParseDir is
	// deprecated, and this package has no build tags to consider.
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	var paths []string
	pkgName := ""
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || strings.HasPrefix(n, "zz_generated") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if pkgName != "" && f.Name.Name != pkgName {
			return nil, fmt.Errorf("%s holds packages %s and %s, want one", dir, pkgName, f.Name.Name)
		}
		pkgName = f.Name.Name
		files[n] = f
		paths = append(paths, n)
	}
	if pkgName == "" {
		return nil, fmt.Errorf("%s has no Go files", dir)
	}
	a := &api{version: pkgName, types: map[string]*typeDecl{}, imports: map[string]string{}, consts: map[string][]string{}}
	sort.Strings(paths)
	for _, p := range paths {
		f := files[p]
		for _, m := range markersOf(f.Doc) {
			if v, ok := strings.CutPrefix(m, "groupName="); ok {
				a.group = v
			}
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			a.imports[name] = path
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			switch gd.Tok {
			case token.TYPE:
				for _, s := range gd.Specs {
					ts := s.(*ast.TypeSpec)
					a.types[ts.Name.Name] = a.typeOf(f, gd, ts)
				}
			case token.CONST:
				a.collectConsts(gd)
			}
		}
	}
	if a.group == "" {
		return nil, fmt.Errorf("%s has no +groupName marker in its package doc", dir)
	}
	return a, nil
}

func (a *api) collectConsts(gd *ast.GenDecl) {
	for _, s := range gd.Specs {
		vs := s.(*ast.ValueSpec)
		id, ok := vs.Type.(*ast.Ident)
		if !ok {
			continue
		}
		for _, v := range vs.Values {
			if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, _ := strconv.Unquote(lit.Value)
				a.consts[id.Name] = append(a.consts[id.Name], s)
			}
		}
	}
}

func (a *api) typeOf(f *ast.File, gd *ast.GenDecl, ts *ast.TypeSpec) *typeDecl {
	cg := ts.Doc
	if cg == nil && len(gd.Specs) == 1 {
		cg = gd.Doc
	}
	// Markers may also sit in a comment block of their own above the doc
	// (controller-gen reads both), as on RunnerGroup.
	markers := append(markersOf(commentBefore(f, cg, gd.Pos())), markersOf(cg)...)
	t := &typeDecl{name: ts.Name.Name, doc: firstParagraph(prose(cg)), markers: markers, expr: ts.Type}
	for _, m := range markers {
		if v, ok := strings.CutPrefix(m, "kubebuilder:validation:Enum="); ok {
			t.enum = strings.Split(v, ";")
		}
	}
	st, ok := ts.Type.(*ast.StructType)
	if !ok {
		return t
	}
	prevEnd := st.Fields.Opening
	for _, fl := range st.Fields.List {
		var groups []*ast.CommentGroup
		for _, c := range f.Comments {
			if c.Pos() > prevEnd && c.End() < fl.Pos() {
				groups = append(groups, c)
			}
		}
		prevEnd = fl.End()
		var ms []string
		for _, g := range groups {
			ms = append(ms, markersOf(g)...)
		}
		tag := ""
		if fl.Tag != nil {
			raw, _ := strconv.Unquote(fl.Tag.Value)
			tag = reflect.StructTag(raw).Get("json")
		}
		jsonName, opts, _ := strings.Cut(tag, ",")
		fd := field{name: jsonName, expr: fl.Type, doc: prose(fl.Doc), markers: ms}
		fd.optional = strings.Contains(opts, "omitempty") || contains(ms, "optional")
		if strings.Contains(opts, "inline") {
			fd.name = ""
		}
		t.fields = append(t.fields, fd)
	}
	return t
}

// commentBefore is the comment group that ends on the line right above cg
// (or above pos when cg is nil), if any.
func commentBefore(f *ast.File, cg *ast.CommentGroup, pos token.Pos) *ast.CommentGroup {
	if cg != nil {
		pos = cg.Pos()
	}
	var best *ast.CommentGroup
	for _, c := range f.Comments {
		if c.End() < pos && (best == nil || c.End() > best.End()) {
			best = c
		}
	}
	if best == nil {
		return nil
	}
	// Only a block of its own: not inside a declaration (a field's markers
	// in the type above) and with no declaration between it and pos.
	for _, d := range f.Decls {
		if d.Pos() < best.Pos() && best.End() < d.End() {
			return nil
		}
		if d.Pos() > best.End() && d.End() < pos {
			return nil
		}
	}
	return best
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// markersOf returns the "+marker" lines of a comment, without the '+'.
func markersOf(cg *ast.CommentGroup) []string {
	if cg == nil {
		return nil
	}
	var out []string
	for _, c := range cg.List {
		line := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
		if m, ok := strings.CutPrefix(line, "+"); ok {
			out = append(out, m)
		}
	}
	return out
}

// prose is a doc comment without its markers, as paragraphs joined into
// lines.
func prose(cg *ast.CommentGroup) string {
	if cg == nil {
		return ""
	}
	var paras []string
	var cur []string
	for _, line := range strings.Split(cg.Text(), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "+") {
			continue
		}
		if line == "" {
			if len(cur) > 0 {
				paras = append(paras, strings.Join(cur, " "))
				cur = nil
			}
			continue
		}
		cur = append(cur, line)
	}
	if len(cur) > 0 {
		paras = append(paras, strings.Join(cur, " "))
	}
	return strings.Join(paras, "\n\n")
}

// firstParagraph is a type's reference text: its doc comment's first
// paragraph says what the type is; later paragraphs explain the code to its
// readers, and what a user needs of them the fields and the manual say.
func firstParagraph(doc string) string {
	first, _, _ := strings.Cut(doc, "\n\n")
	return first
}

// render writes the reference of kind and every type of the package that
// it reaches, in the order a reader meets them.
func (a *api) render(kind string) ([]byte, error) {
	root, ok := a.types[kind]
	if !ok {
		return nil, fmt.Errorf("the package has no type %s", kind)
	}
	var order []string
	seen := map[string]bool{}
	var visit func(string)
	visit = func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		order = append(order, name)
		t := a.types[name]
		for _, f := range t.fields {
			for _, n := range a.localIdents(f.expr) {
				visit(n)
			}
		}
	}
	visit(kind)

	var b strings.Builder
	fmt.Fprintf(&b, "# %s API reference\n\n", kind)
	fmt.Fprintf(&b, "<!-- Generated by `make docs` (scripts/tools/docs/apidoc) from the Go types in internal/api/v1alpha1: edit their doc comments, not this file. -->\n\n")
	fmt.Fprintf(&b, "`apiVersion: %s/%s`, `kind: %s`. The CRD in this folder is generated from the same types (`make generate`); `kubectl explain %s.spec` shows the same descriptions on a cluster.\n\n",
		a.group, a.version, kind, strings.ToLower(kind))
	fmt.Fprintf(&b, "Types: %s.\n", a.typeLinks(order))
	if cols := a.printColumns(root); cols != "" {
		fmt.Fprintf(&b, "\n## Columns of `kubectl get %s`\n\n%s", a.resourceName(root, kind), cols)
	}
	for _, name := range order {
		a.renderType(&b, a.types[name])
	}
	return []byte(b.String()), nil
}

func (a *api) typeLinks(order []string) string {
	var links []string
	for _, n := range order {
		links = append(links, fmt.Sprintf("[%s](#%s)", n, ghslug.Slug(n)))
	}
	return strings.Join(links, ", ")
}

func (a *api) resourceName(t *typeDecl, kind string) string {
	for _, m := range t.markers {
		if v, ok := strings.CutPrefix(m, "kubebuilder:resource:"); ok {
			for _, kv := range strings.Split(v, ",") {
				if s, ok := strings.CutPrefix(kv, "shortName="); ok {
					return s
				}
			}
		}
	}
	return strings.ToLower(kind)
}

var markerArg = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|` + "`[^`]*`" + `|[^,]*)`)

// args parses a marker's key=value arguments; values may be quoted.
func args(s string) map[string]string {
	out := map[string]string{}
	for _, m := range markerArg.FindAllStringSubmatch(s, -1) {
		v := m[2]
		if strings.HasPrefix(v, `"`) {
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
		} else if strings.HasPrefix(v, "`") {
			v = strings.Trim(v, "`")
		}
		if _, dup := out[m[1]]; !dup {
			out[m[1]] = v
		}
	}
	return out
}

func (a *api) printColumns(t *typeDecl) string {
	var b strings.Builder
	for _, m := range t.markers {
		v, ok := strings.CutPrefix(m, "kubebuilder:printcolumn:")
		if !ok {
			continue
		}
		kv := args(v)
		if b.Len() == 0 {
			b.WriteString("| Column | Shows | Only with `-o wide` |\n| --- | --- | --- |\n")
		}
		wide := ""
		if p := kv["priority"]; p != "" && p != "0" {
			wide = "yes"
		}
		desc := kv["description"]
		if desc == "" {
			desc = "`" + kv["JSONPath"] + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", kv["name"], cell(desc), wide)
	}
	return b.String()
}

func (a *api) renderType(b *strings.Builder, t *typeDecl) {
	fmt.Fprintf(b, "\n## %s\n\n", t.name)
	if t.doc != "" {
		fmt.Fprintf(b, "%s\n", t.doc)
	}
	if len(t.enum) > 0 {
		fmt.Fprintf(b, "\nOne of: %s.\n", codeList(t.enum))
	} else if vals := a.consts[t.name]; len(vals) > 0 {
		fmt.Fprintf(b, "\nOne of: %s.\n", codeList(vals))
	}
	if len(t.fields) > 0 {
		b.WriteString("\n| Field | Type | Required | Description |\n| --- | --- | --- | --- |\n")
		for _, f := range t.fields {
			if f.name == "" {
				fmt.Fprintf(b, "| `apiVersion`, `kind` | string | yes | `%s/%s`, `%s` (from %s). |\n", a.group, a.version, t.name, a.typeString(f.expr))
				continue
			}
			req := "yes"
			if f.optional {
				req = "no"
			}
			desc := cell(f.doc)
			if c := constraints(f.markers); c != "" {
				desc = strings.TrimSpace(desc + " " + c)
			}
			fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", f.name, a.typeString(f.expr), req, desc)
		}
	}
	var rules []string
	for _, m := range t.markers {
		if v, ok := strings.CutPrefix(m, "kubebuilder:validation:XValidation:"); ok {
			rules = append(rules, ruleLine("", args(v)))
		}
	}
	for _, f := range t.fields {
		for _, m := range f.markers {
			if v, ok := strings.CutPrefix(m, "kubebuilder:validation:XValidation:"); ok {
				rules = append(rules, ruleLine(f.name, args(v)))
			}
			if v, ok := strings.CutPrefix(m, "kubebuilder:validation:items:XValidation:"); ok {
				rules = append(rules, ruleLine(f.name+"[*]", args(v)))
			}
		}
	}
	if len(rules) > 0 {
		fmt.Fprintf(b, "\nRules checked at admission (the API server refuses the object with this message):\n\n")
		for _, r := range rules {
			fmt.Fprintf(b, "- %s\n", r)
		}
	}
}

func ruleLine(fieldName string, kv map[string]string) string {
	msg := kv["message"]
	if fieldName == "" {
		return msg
	}
	return "`" + fieldName + "`: " + msg
}

// constraints renders a field's validation markers as one sentence.
func constraints(markers []string) string {
	var out []string
	add := func(prefix, format string) {
		for _, m := range markers {
			if v, ok := strings.CutPrefix(m, prefix); ok {
				if v == "1" && strings.Contains(format, "least") {
					format = strings.Replace(format, "at least %s characters", "not empty", 1)
					out = append(out, format)
					continue
				}
				out = append(out, fmt.Sprintf(format, strings.Trim(v, "`")))
			}
		}
	}
	add("kubebuilder:validation:Minimum=", "minimum %s")
	add("kubebuilder:validation:Maximum=", "maximum %s")
	add("kubebuilder:validation:MinLength=", "at least %s characters")
	add("kubebuilder:validation:MaxLength=", "at most %s characters")
	add("kubebuilder:validation:MaxItems=", "at most %s items")
	add("kubebuilder:validation:items:MinLength=", "each at least %s characters")
	add("kubebuilder:validation:items:MaxLength=", "each at most %s characters")
	for _, m := range markers {
		if v, ok := strings.CutPrefix(m, "kubebuilder:validation:Pattern="); ok {
			out = append(out, "pattern `"+strings.Trim(v, "`")+"`")
		}
		if v, ok := strings.CutPrefix(m, "kubebuilder:validation:items:Pattern="); ok {
			out = append(out, "each matches `"+strings.Trim(v, "`")+"`")
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "<br>Schema: " + cell(strings.Join(out, "; ")) + "."
}

func codeList(vs []string) string {
	var q []string
	for _, v := range vs {
		q = append(q, "`"+v+"`")
	}
	return strings.Join(q, ", ")
}

// localIdents are the package's own types that expr names.
func (a *api) localIdents(expr ast.Expr) []string {
	var out []string
	ast.Inspect(expr, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SelectorExpr:
			return false
		case *ast.Ident:
			if _, ok := a.types[x.Name]; ok {
				out = append(out, x.Name)
			}
		}
		return true
	})
	return out
}

// typeString is a field's type as a reader wants it: the package's own
// types linked to their section, Kubernetes' to their Go docs.
func (a *api) typeString(expr ast.Expr) string {
	switch x := expr.(type) {
	case *ast.StarExpr:
		return a.typeString(x.X)
	case *ast.ArrayType:
		return "[]" + a.typeString(x.Elt)
	case *ast.MapType:
		return "map[" + a.typeString(x.Key) + "]" + a.typeString(x.Value)
	case *ast.Ident:
		if _, ok := a.types[x.Name]; ok {
			return fmt.Sprintf("[%s](#%s)", x.Name, ghslug.Slug(x.Name))
		}
		return x.Name
	case *ast.SelectorExpr:
		pkg := x.X.(*ast.Ident).Name
		return fmt.Sprintf("[%s.%s](https://pkg.go.dev/%s#%s)", pkg, x.Sel.Name, a.imports[pkg], x.Sel.Name)
	}
	return fmt.Sprintf("%T", expr)
}

// cell makes prose safe in a table cell (see chartdoc): '<', '>' and '*'
// outside code spans, and '|' everywhere.
func cell(s string) string {
	s = strings.ReplaceAll(s, "\n\n", "<br><br>")
	parts := strings.Split(s, "`")
	for i, p := range parts {
		if i%2 == 0 {
			p = strings.NewReplacer("<br>", "<br>", "<", "&lt;", ">", "&gt;", "*", `\*`).Replace(p)
		}
		parts[i] = strings.ReplaceAll(p, "|", `\|`)
	}
	return strings.Join(parts, "`")
}
