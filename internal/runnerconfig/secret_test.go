package runnerconfig_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerconfig"
)

// TestWithSecret: the config a runner pod's init container writes from the
// rendered ConfigMap and the cache Secret (its env), as the runner reads it.
func TestWithSecret(t *testing.T) {
	rendered := []byte("# comment\nrunner:\n  capacity: 1\n  envs:\n    A: b\ncache:\n  enabled: true\n  external_server: http://cache.ns.svc:8088/\n")
	tests := map[string]struct {
		template []byte
		secret   string
		want     map[string]any
		wantErr  string
	}{
		"the secret joins the cache section": {
			template: rendered,
			secret:   `s3cr"et: with yaml's own characters # and a comment mark`,
			want: map[string]any{
				"runner": map[string]any{"capacity": 1, "envs": map[string]any{"A": "b"}},
				"cache": map[string]any{"enabled": true, "external_server": "http://cache.ns.svc:8088/",
					"external_secret": `s3cr"et: with yaml's own characters # and a comment mark`},
			},
		},
		"no secret: the cache is off, as the runner refuses a server without one": {
			template: rendered,
			secret:   "",
			want: map[string]any{
				"runner": map[string]any{"capacity": 1, "envs": map[string]any{"A": "b"}},
				"cache":  map[string]any{"enabled": false},
			},
		},
		"a config without a cache section gets one": {
			template: []byte("runner:\n  capacity: 1\n"),
			secret:   "x",
			want: map[string]any{
				"runner": map[string]any{"capacity": 1},
				"cache":  map[string]any{"external_secret": "x"},
			},
		},
		"not a mapping":                 {template: []byte("- a\n"), secret: "x", wantErr: "not a YAML mapping"},
		"a cache that is not a mapping": {template: []byte("cache: on\n"), secret: "x", wantErr: "cache is not a mapping"},
		"empty":                         {template: nil, secret: "x", wantErr: "empty"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			out, err := runnerconfig.WithSecret(tt.template, tt.secret)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.NotContains(t, err.Error(), tt.secret, "errors never carry the secret")
				return
			}
			require.NoError(t, err)
			var got map[string]any
			require.NoError(t, yaml.Unmarshal(out, &got))
			assert.Equal(t, tt.want, got)
		})
	}
}
