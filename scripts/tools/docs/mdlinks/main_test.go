package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
}

func TestCheck(t *testing.T) {
	target := "# Guide\n\n## Install the chart\n\n## `why`: a job's runner\n\n## Example\n\n## Example\n\n<a id=\"custom\"></a>\n\nSetext title\n------------\n\n```sh\n# not a heading\n```\n"
	tests := map[string]struct {
		readme string
		want   []string
	}{
		"working links": {
			readme: "[a](docs/guide.md) [b](docs/guide.md#install-the-chart) [c](docs/guide.md#why-a-jobs-runner)\n" +
				"[d](docs/guide.md#example-1) [e](docs/guide.md#custom) [f](docs/guide.md#setext-title) [g](docs/)\n" +
				"[h](#top) [i](https://example.com/missing) [j](main.go#L3) [k](<docs/guide.md>)\n\n# Top\n\n[ref]: docs/guide.md#example\n",
		},
		"broken file": {
			readme: "# Top\n\nSee [x](docs/gone.md).\n",
			want:   []string{"README.md:3: docs/gone.md: no such file or folder"},
		},
		"broken anchor in another file": {
			readme: "[x](docs/guide.md#install)\n",
			want:   []string{"README.md:1: docs/guide.md#install: no heading or anchor #install in guide.md"},
		},
		"broken anchor in the same file": {
			readme: "# Top\n\n[x](#bottom)\n",
			want:   []string{"README.md:3: #bottom: no heading or anchor #bottom in README.md"},
		},
		"a heading inside a code block is no anchor": {
			readme: "[x](docs/guide.md#not-a-heading)\n",
			want:   []string{"README.md:1: docs/guide.md#not-a-heading: no heading or anchor #not-a-heading in guide.md"},
		},
		"links in code are not links": {
			readme: "`[x](gone.md)`\n\n```md\n[y](gone.md)\n```\n",
		},
		"a broken reference definition": {
			readme: "[x][r]\n\n[r]: gone.md\n",
			want:   []string{"README.md:3: gone.md: no such file or folder"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, map[string]string{
				"README.md":     tc.readme,
				"docs/guide.md": target,
				"main.go":       "package main\n",
				// Caches are not the project's docs.
				".cache/mod/x.md": "[x](gone.md)\n",
			})
			problems, _, err := check(root)
			require.NoError(t, err)
			assert.Equal(t, tc.want, problems)
		})
	}
}
