package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The read-only tools read what the passes recorded, by the rules the
// passes share through leaf packages: none of them imports the engine,
// directly or through another package, so they cannot lean on its
// internals and a change inside the engine cannot change what they say.
func TestTheReadOnlyToolsDoNotImportTheEngine(t *testing.T) {
	const module = "github.com/gitea-runner-operator/gitea-runner-operator/"
	for _, reader := range []string{"internal/why", "internal/status", "internal/metrics"} {
		t.Run(reader, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./"+reader)
			cmd.Dir = "../.."
			out, err := cmd.Output()
			require.NoError(t, err)
			deps := strings.Fields(string(out))
			require.Contains(t, deps, module+reader, "go list names the package itself among its dependencies")
			assert.NotContains(t, deps, module+"internal/scaler", "%s imports the engine", reader)
		})
	}
}
