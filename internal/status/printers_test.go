package status

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The -o forms kubectl users script with: name, jsonpath and
// custom-columns, over the same rows as json.
func TestKubectlOutputForms(t *testing.T) {
	rows := Rows(selected(t, listener{}), now)
	tests := []struct {
		format string
		want   string
	}{
		{"name", "runnergroup.gitea.bpg.pw/ci\nrunnergroup.gitea.bpg.pw/all\nrunnergroup.gitea.bpg.pw/app\n"},
		{`jsonpath={range .groups[*]}{.namespace}/{.name}={.queued}{"\n"}{end}`, "team-a/ci=3\nteam-b/all=0\nteam-b/app=0\n"},
		{"jsonpath={.groups[0].scalingActive.reason}", "AtCapacity"},
		{"jsonpath={.groups[*].nothing}", ""},
		{"custom-columns=GROUP:.name,READY:.ready.reason,CACHE:{.cache.reason}",
			"GROUP   READY               CACHE\nci      Reconciled          CacheReachable\nall     <none>              <none>\napp     GiteaUnauthorized   <none>\n"},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, Write(&buf, Report{Groups: rows}, tt.format))
			assert.Equal(t, tt.want, buf.String())
		})
	}
}

// A template that cannot work is refused before anything is read.
func TestParseFormatRefusesWhatCannotWork(t *testing.T) {
	for _, bad := range []string{"jsonpath=", "jsonpath={.groups[", "custom-columns=", "custom-columns=NAME", "custom-columns=:.name", "json=x", "wide"} {
		t.Run(bad, func(t *testing.T) {
			_, err := ParseFormat(bad)
			assert.Error(t, err)
		})
	}
}
