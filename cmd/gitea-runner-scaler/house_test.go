package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// CONTRIBUTING.md's map of the house names every package under internal/,
// so a newcomer finds each one there and a new package comes with its line.
func TestContributingNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("../../CONTRIBUTING.md")
	require.NoError(t, err)
	named := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "internal/") {
			named[strings.TrimSuffix(f[0], "/")] = true
		}
	}
	err = filepath.WalkDir("../../internal", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case !d.IsDir():
			return nil
		case d.Name() == "testdata":
			return filepath.SkipDir
		}
		gofiles, _ := filepath.Glob(filepath.Join(path, "*.go"))
		if len(gofiles) == 0 {
			return nil
		}
		pkg := strings.TrimPrefix(filepath.ToSlash(path), "../../")
		assert.True(t, named[pkg], "CONTRIBUTING.md's map of the house does not name %s", pkg)
		return nil
	})
	require.NoError(t, err)
}
