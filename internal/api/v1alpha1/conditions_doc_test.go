package v1alpha1

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every reason a group's conditions or events can carry has a row in the
// README's troubleshooting tables ("| `Reason` |"): a reason added here
// without saying what it means and how to fix it fails this test.
func TestEveryReasonIsInTheTroubleshootingDocs(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "conditions.go", nil, 0)
	require.NoError(t, err)
	var reasons []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if strings.HasPrefix(name.Name, "Reason") && i < len(vs.Values) {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					reasons = append(reasons, v)
				}
			}
		}
		return true
	})
	require.NotEmpty(t, reasons)

	section := troubleshootingSection(t, "../../..")
	for _, r := range reasons {
		if !strings.Contains(section, "| `"+r+"` |") && !strings.Contains(section, "`"+r+"` (") {
			assert.Failf(t, "undocumented reason", "reason %s has no row in the docs' troubleshooting section", r)
		}
	}
}

// troubleshootingSection is the "Troubleshooting by condition reason"
// section, up to the next heading of its level or higher, from whichever
// Markdown file of the repository holds it: the docs are split over
// several files by topic, and sections move between them.
func troubleshootingSection(t *testing.T, root string) string {
	t.Helper()
	const title = " Troubleshooting by condition reason"
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".md") {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines := strings.Split(string(raw), "\n")
		for i, l := range lines {
			level := len(l) - len(strings.TrimLeft(l, "#"))
			if level == 0 || l[level:] != title {
				continue
			}
			end := len(lines)
			for j := i + 1; j < len(lines); j++ {
				if n := len(lines[j]) - len(strings.TrimLeft(lines[j], "#")); n > 0 && n <= level && strings.HasPrefix(lines[j][n:], " ") {
					end = j
					break
				}
			}
			found = append(found, strings.Join(lines[i:end], "\n"))
		}
		return nil
	})
	require.NoError(t, err)
	require.Len(t, found, 1, "exactly one Markdown file has the heading %q", strings.TrimSpace(title))
	return found[0]
}
