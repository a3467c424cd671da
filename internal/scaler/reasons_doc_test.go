package scaler

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
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
	f, err := parser.ParseFile(token.NewFileSet(), "reasons.go", nil, 0)
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

	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(raw)
	start := strings.Index(readme, "### Troubleshooting by condition reason")
	require.GreaterOrEqual(t, start, 0, "README has the troubleshooting section")
	section := readme[start:]
	if end := strings.Index(section[4:], "\n## "); end >= 0 {
		section = section[:end+4]
	}
	for _, r := range reasons {
		if !strings.Contains(section, "| `"+r+"` |") && !strings.Contains(section, "`"+r+"` (") {
			assert.Failf(t, "undocumented reason", "reason %s has no row in README's troubleshooting section", r)
		}
	}
}
