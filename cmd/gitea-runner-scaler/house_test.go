package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
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

// mappedPackages keep a file map in their package comment (a line
// "//\tname.go  what it holds" per file): the packages a newcomer enters
// most, whose files are many.
var mappedPackages = []string{"cli", "reaper", "runnerjob", "scaler"}

// Each mapped package's file map says where a change goes: it names every
// file of the package, and only files that exist.
func TestEveryFileMapNamesEveryFile(t *testing.T) {
	entry := regexp.MustCompile(`(?m)^//\t([a-z0-9_]+\.go)\s`)
	for _, pkg := range mappedPackages {
		t.Run(pkg, func(t *testing.T) {
			dir := filepath.Join("../../internal", pkg)
			files, err := filepath.Glob(filepath.Join(dir, "*.go"))
			require.NoError(t, err)
			mapped := map[string]bool{}
			var mapFile string
			for _, f := range files {
				src, err := os.ReadFile(f)
				require.NoError(t, err)
				head, _, found := strings.Cut(string(src), "\npackage "+pkg)
				if !found || !strings.Contains(head, "// Package "+pkg+" ") {
					continue
				}
				mapFile = filepath.Base(f)
				for _, m := range entry.FindAllStringSubmatch(head, -1) {
					mapped[m[1]] = true
				}
			}
			require.NotEmpty(t, mapped, "internal/%s's package comment has no file map", pkg)
			for _, f := range files {
				name := filepath.Base(f)
				if strings.HasSuffix(name, "_test.go") {
					continue
				}
				assert.True(t, mapped[name], "the file map in internal/%s/%s does not name %s", pkg, mapFile, name)
				delete(mapped, name)
			}
			assert.Empty(t, mapped, "internal/%s's file map names files that do not exist", pkg)
		})
	}
}
