package reaper

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The package comment's file map names every file of the package, and
// only files that exist.
func TestTheFileMapNamesEveryFile(t *testing.T) {
	doc, err := os.ReadFile("reaper.go")
	require.NoError(t, err)
	head, _, found := strings.Cut(string(doc), "\npackage reaper")
	require.True(t, found)
	mapped := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^//\t([a-z_]+\.go)\s`).FindAllStringSubmatch(head, -1) {
		mapped[m[1]] = true
	}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		assert.True(t, mapped[f], "the file map in reaper.go's package comment does not name %s", f)
		delete(mapped, f)
	}
	assert.Empty(t, mapped, "the file map names files that do not exist")
}
