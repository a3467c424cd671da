package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWebhookFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(file, []byte("  from-file\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantErr    string
		wantSecret string
		secretErr  string
	}{
		{name: "secret from the env", args: []string{"--loop", "--webhook-addr", ":8080"}, env: map[string]string{"SCALER_WEBHOOK_SECRET": "s3"}, wantSecret: "s3"},
		{name: "secret from a file, trimmed", args: []string{"--loop", "--webhook-addr", ":8080", "--webhook-secret-file", file}, wantSecret: "from-file"},
		{name: "an empty file", args: []string{"--loop", "--webhook-addr", ":8080", "--webhook-secret-file", empty}, secretErr: "is empty"},
		{name: "a missing file", args: []string{"--loop", "--webhook-addr", ":8080", "--webhook-secret-file", filepath.Join(dir, "nope")}, secretErr: "cannot read --webhook-secret-file"},
		{name: "no secret", args: []string{"--loop", "--webhook-addr", ":8080"}, wantErr: "--webhook-addr needs a secret"},
		{name: "two secrets", args: []string{"--loop", "--webhook-addr", ":8080", "--webhook-secret-file", file}, env: map[string]string{"SCALER_WEBHOOK_SECRET": "s3"}, wantErr: "give the webhook secret once"},
		{name: "no loop", args: []string{"--webhook-addr", ":8080"}, env: map[string]string{"SCALER_WEBHOOK_SECRET": "s3"}, wantErr: "--webhook-addr needs --loop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			r, err := parse(t, tt.args...)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			secret, err := r.webhookSecret()
			if tt.secretErr != "" {
				require.ErrorContains(t, err, tt.secretErr)
				assert.NotContains(t, err.Error(), "from-file")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantSecret, string(secret))
		})
	}
}
