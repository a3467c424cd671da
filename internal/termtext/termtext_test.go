package termtext

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEscapeShowsControlCharactersInsteadOfSendingThem(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain text is unchanged", "ubuntu-latest, gpu: Gitea said ok", "ubuntu-latest, gpu: Gitea said ok"},
		{"non-ASCII letters are unchanged", "größe ü 日本", "größe ü 日本"},
		{"ESC of a colour sequence", "a\x1b[31mred", `a\x1b[31mred`},
		{"BEL and an OSC window title", "\x1b]0;owned\x07", `\x1b]0;owned\x07`},
		{"newline and carriage return cannot fake lines", "ok\r\nverdict: Running", `ok\r\nverdict: Running`},
		{"tab", "a\tb", `a\tb`},
		{"NUL", "a\x00b", `a\x00b`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"C1 CSI as UTF-8", "a\u009b31mb", `a\u009b31mb`},
		{"C1 NEL", "a\u0085b", `a\u0085b`},
		{"a byte that is not UTF-8", "a\xffb", `a\xffb`},
		{"a lone C1 byte (not UTF-8)", "a\x9bb", `a\x9bb`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Escape(tt.in))
		})
	}
}

// JSON keeps the values (a script decodes the same strings) while no raw
// control character reaches the terminal: encoding/json escapes C0 but
// writes DEL and C1 raw.
func TestJSONEscapesWhatEncodingJSONLeavesRaw(t *testing.T) {
	in := map[string]string{"label": "a\x1b[31m\x7f\u009b31m\u0085b größe"}
	raw, err := json.Marshal(in)
	require.NoError(t, err)
	out := JSON(raw)
	for _, b := range []byte("\x1b\x7f") {
		assert.NotContains(t, string(out), string(b))
	}
	assert.NotContains(t, string(out), "\u009b")
	assert.NotContains(t, string(out), "\u0085")
	var back map[string]string
	require.NoError(t, json.Unmarshal(out, &back))
	assert.Equal(t, in, back, "the same values")
}
