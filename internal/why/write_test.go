package why

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// Labels come from RunnerGroup writers and Gitea, messages and notes carry
// condition messages and Gitea's errors: every format prints them with
// their control characters escaped, and JSON and YAML keep the values.
func TestWriteEscapesTerminalControlCharacters(t *testing.T) {
	evil := "gpu\x1b]0;owned\x07\x1b[1A\r\nverdict: Running\u009b31m\x7f"
	rep := &Report{
		Job:         JobInfo{ID: 7, Repo: "acme/app", Status: StatusQueued, Labels: []string{evil}},
		Verdict:     VerdictLabelsNotOffered,
		Groups:      []GroupVerdict{{Group: "ci/a", InScope: true, MissingLabels: []string{evil}, Labels: []string{evil}}},
		Runner:      &Runner{Group: "ci/a", Job: "a-1", Reason: evil, Message: evil},
		Explanation: []string{"It lacks " + evil + "."},
		Notes:       []string{"group ci/b: " + evil},
	}
	for _, format := range []string{"text", "json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, Write(&buf, rep, format))
			for _, r := range buf.String() {
				if (r < 0x20 && r != '\n') || (r >= 0x7f && r <= 0x9f) {
					t.Fatalf("raw control character %U in %q", r, buf.String())
				}
			}
			var back Report
			switch format {
			case "json":
				require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
			case "yaml":
				var v any
				require.NoError(t, yaml.Unmarshal(buf.Bytes(), &v))
				raw, err := json.Marshal(v)
				require.NoError(t, err)
				require.NoError(t, json.Unmarshal(raw, &back))
			default:
				assert.NotContains(t, buf.String(), "\nverdict: Running", "no line can be faked")
				assert.Contains(t, buf.String(), `gpu\x1b]0;owned\x07\x1b[1A\r\nverdict: Running\u009b31m\x7f`)
				return
			}
			assert.Equal(t, evil, back.Job.Labels[0])
			assert.Equal(t, evil, back.Runner.Message)
			assert.Equal(t, "group ci/b: "+evil, back.Notes[0])
		})
	}
}
