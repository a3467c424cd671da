package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const chartYAML = "name: demo\nversion: 1.2.3\nappVersion: \"4.5\"\nkubeVersion: \">=1.34.0-0\"\n"

const readme = `# demo

<!-- chartdoc:begin chart -->
stale
<!-- chartdoc:end chart -->

## Values

<!-- chartdoc:begin values -->
stale
<!-- chartdoc:end values -->

Hand-written text after the table.
`

func TestRenderWritesTheMarkedRegionsOnly(t *testing.T) {
	values := `# Maintainers' note, not a description.

## The image.
image:
  ## Image tag; empty means the chart's appVersion.
  tag: ""
  ## Pulls it.
  pullPolicy: IfNotPresent
## Names, each "spec.<pod field>"; SCALER_* are reserved | kept.
## Example:
## pinned: [spec.nodeSelector]
pinned: []
## Workers.
workers: 4
`
	out, err := render([]byte(readme), []byte(values), []byte(chartYAML))
	require.NoError(t, err)
	want := "# demo\n\n" +
		"<!-- chartdoc:begin chart -->\n" +
		"| Chart | Version | App version | Kubernetes |\n| --- | --- | --- | --- |\n" +
		"| `demo` | `1.2.3` | `4.5` | `>=1.34.0-0` |\n" +
		"<!-- chartdoc:end chart -->\n\n## Values\n\n" +
		"<!-- chartdoc:begin values -->\n" +
		"| Key | Type | Default | Description |\n| --- | --- | --- | --- |\n" +
		"| `image` | object |  | The image. |\n" +
		"| `image.tag` | string | `\"\"` | Image tag; empty means the chart's appVersion. |\n" +
		"| `image.pullPolicy` | string | `IfNotPresent` | Pulls it. |\n" +
		"| `pinned` | list | `[]` | Names, each \"spec.&lt;pod field&gt;\"; SCALER_\\* are reserved \\| kept. [Example](#example-pinned). |\n" +
		"| `workers` | int | `4` | Workers. |\n" +
		"\n### Examples of values\n\n#### Example: pinned\n\n```yaml\npinned: [spec.nodeSelector]\n```\n" +
		"<!-- chartdoc:end values -->\n\nHand-written text after the table.\n"
	assert.Equal(t, want, string(out))

	again, err := render(out, []byte(values), []byte(chartYAML))
	require.NoError(t, err)
	assert.Equal(t, string(out), string(again), "rendering is idempotent")
}

func TestRenderRefuses(t *testing.T) {
	tests := map[string]struct {
		readme, values string
		wantErr        string
	}{
		"a value without a comment names the key and its line": {
			readme:  readme,
			values:  "## Documented.\na: 1\nb:\n  ## Documented.\n  c: 2\n  d: 3\n",
			wantErr: "these have none:\n  b (values.yaml line 3)\n  b.d (values.yaml line 6)",
		},
		"a maintainers' # comment is no description": {
			readme:  readme,
			values:  "# only for maintainers\na: 1\n",
			wantErr: "a (values.yaml line 2)",
		},
		"a block separated by a blank line is no description": {
			readme:  readme,
			values:  "## About something else.\n\na: 1\n",
			wantErr: "a (values.yaml line 3)",
		},
		"no markers": {
			readme:  "# demo\n",
			values:  "## A.\na: 1\n",
			wantErr: `README.md needs a line "<!-- chartdoc:begin chart -->"`,
		},
		"a marker twice": {
			readme:  readme + "<!-- chartdoc:begin values -->\n",
			values:  "## A.\na: 1\n",
			wantErr: `README.md has "<!-- chartdoc:begin values -->" twice`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := render([]byte(tc.readme), []byte(tc.values), []byte(chartYAML))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

func TestCheckFailsOnAStaleReadmeAndChangesNothing(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	write("Chart.yaml", chartYAML)
	write("values.yaml", "## A.\na: 1\n")
	write("README.md", readme)

	err := run(dir, true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is stale: run `make docs`")
	got, _ := os.ReadFile(filepath.Join(dir, "README.md"))
	assert.Equal(t, readme, string(got))

	require.NoError(t, run(dir, false))
	require.NoError(t, run(dir, true), "a freshly written README passes the check")
}
