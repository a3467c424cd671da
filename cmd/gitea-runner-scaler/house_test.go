package main

import (
	"go/ast"
	"go/parser"
	"go/token"
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
var mappedPackages = []string{"cli", "e2e", "reaper", "runnerjob", "scaler"}

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

// e2eOthers are the folders under internal/e2e that are not test areas.
var e2eOthers = map[string]bool{"cmd": true, "giteasetup": true, "testdata": true}

// The end-to-end suite keeps one file-name rule (internal/e2e's package
// comment): the framework holds no test; an area holds only _test.go files,
// main_test.go with its TestMain alone, and <subject>_test.go files that
// each hold a test and whose names repeat neither "e2e" nor the area.
func TestE2EFileNameRule(t *testing.T) {
	testFunc := regexp.MustCompile(`(?m)^func ((Test|Benchmark)[A-Z]\w*)\(`)
	tests := func(src []byte) (main bool, others int) {
		for _, m := range testFunc.FindAllSubmatch(src, -1) {
			if string(m[1]) == "TestMain" {
				main = true
			} else {
				others++
			}
		}
		return main, others
	}
	root := "../../internal/e2e"
	framework, err := filepath.Glob(filepath.Join(root, "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, framework)
	for _, f := range framework {
		assert.False(t, strings.HasSuffix(f, "_test.go"), "%s: the framework holds no test; a test goes in its area", f)
	}
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	areas := 0
	for _, e := range entries {
		if !e.IsDir() || e2eOthers[e.Name()] {
			continue
		}
		areas++
		area := e.Name()
		files, err := filepath.Glob(filepath.Join(root, area, "*.go"))
		require.NoError(t, err)
		hasMain := false
		for _, f := range files {
			name := filepath.Base(f)
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			if !assert.True(t, strings.HasSuffix(name, "_test.go"), "%s: an area holds only _test.go files; a helper two areas call goes in internal/e2e", f) {
				continue
			}
			assert.Contains(t, string(src), "\npackage "+area+"\n", "%s: an area's package is named for its folder", f)
			main, others := tests(src)
			if name == "main_test.go" {
				hasMain = true
				assert.True(t, main, "%s holds the area's TestMain", f)
				assert.Zero(t, others, "%s holds TestMain alone", f)
				continue
			}
			assert.False(t, main, "%s: TestMain belongs in main_test.go", f)
			assert.NotZero(t, others, "%s holds no Test or Benchmark function: its helpers belong beside the tests that call them", f)
			assert.NotContains(t, name, "e2e", "%s: the path already says e2e", f)
			assert.False(t, strings.HasPrefix(name, area+"_"), "%s: the folder already says %s", f, area)
		}
		assert.True(t, hasMain, "internal/e2e/%s has no main_test.go", area)
	}
	assert.NotZero(t, areas, "no test area under internal/e2e")
}

// Every top-level e2e test says how it shares the bed with the other
// areas' binaries, which go test runs at once (internal/e2e/share.go): its
// body starts, after any skip checks, with e2e.Parallel(t) or
// e2e.Exclusive(t) (or e2e.ExclusiveWhen), and a bare t.Parallel() would
// bypass the bed's locks.
func TestE2ETestsSayHowTheyShareTheBed(t *testing.T) {
	callOf := func(s ast.Stmt) string {
		es, ok := s.(*ast.ExprStmt)
		if !ok {
			return ""
		}
		call, ok := es.X.(*ast.CallExpr)
		if !ok {
			return ""
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return ""
		}
		if x, ok := sel.X.(*ast.Ident); ok {
			return x.Name + "." + sel.Sel.Name
		}
		return ""
	}
	files, err := filepath.Glob("../../internal/e2e/*/*_test.go")
	require.NoError(t, err)
	tests := 0
	for _, path := range files {
		if e2eOthers[filepath.Base(filepath.Dir(path))] {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			tests++
			share := ""
			for _, s := range fn.Body.List {
				if _, isSkipCheck := s.(*ast.IfStmt); isSkipCheck && share == "" {
					continue
				}
				if _, isDecl := s.(*ast.AssignStmt); isDecl && share == "" {
					continue
				}
				switch c := callOf(s); c {
				case "e2e.Parallel", "e2e.Exclusive", "e2e.ExclusiveWhen":
					assert.Empty(t, share, "%s: %s says twice how it shares the bed", path, fn.Name.Name)
					share = c
				}
				if share == "" {
					break
				}
			}
			// Anywhere in the test: an Exclusive test that then paused as
			// parallel would hold the bed until its binary's sequential
			// tests, waiting for the bed, were done; a subtest calls
			// e2e.ParallelSub, which takes a bed-wide slot.
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Parallel" {
						if x, ok := sel.X.(*ast.Ident); ok && x.Name == "t" {
							assert.Fail(t, "a bare t.Parallel", "%s: %s: use e2e.Parallel(t) or, in a subtest, e2e.ParallelSub(t), which take the bed's locks", path, fn.Name.Name)
						}
					}
				}
				return true
			})
			assert.NotEmpty(t, share, "%s: %s must start with e2e.Parallel(t) or e2e.Exclusive(t)", path, fn.Name.Name)
		}
	}
	assert.NotZero(t, tests)
}
