package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testdata/v1.md is the reference of testdata/v1 written by hand: it pins
// what a reader gets from each kind of comment and marker, and that notes
// for maintainers (comments apart from a doc comment, and a type comment's
// paragraphs after its first) stay out.
func TestRenderMatchesTheHandWrittenReference(t *testing.T) {
	a, err := load("testdata/v1")
	require.NoError(t, err)
	got, err := a.render("Widget")
	require.NoError(t, err)
	want, err := os.ReadFile("testdata/v1.md")
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
}

func TestRenderRefusesAnUnknownKind(t *testing.T) {
	a, err := load("testdata/v1")
	require.NoError(t, err)
	_, err = a.render("Gadget")
	assert.EqualError(t, err, "the package has no type Gadget")
}

func TestCheckFailsOnAStaleReferenceAndChangesNothing(t *testing.T) {
	out := filepath.Join(t.TempDir(), "README.md")
	require.NoError(t, os.WriteFile(out, []byte("old\n"), 0o644))

	err := run("testdata/v1", "Widget", out, true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is stale: run `make docs`")
	got, _ := os.ReadFile(out)
	assert.Equal(t, "old\n", string(got))

	require.NoError(t, run("testdata/v1", "Widget", out, false))
	require.NoError(t, run("testdata/v1", "Widget", out, true))
}
