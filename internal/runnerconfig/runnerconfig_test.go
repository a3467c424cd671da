package runnerconfig_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerconfig"
)

// TestMergeRules is the README's table, one case per rule.
func TestMergeRules(t *testing.T) {
	defaults := &v1alpha1.RunnerConfig{
		Log: &v1alpha1.RunnerLogConfig{Level: ptr.To("info")},
		Runner: &v1alpha1.RunnerRunnerConfig{
			Envs:          map[string]string{"HTTP_PROXY": "http://proxy", "TEAM": "platform"},
			Timeout:       ptr.To("3h"),
			FetchInterval: ptr.To("2s"),
		},
		Container: &v1alpha1.RunnerContainerConfig{ValidVolumes: []string{"a", "b"}, ForcePull: ptr.To(true)},
	}
	group := &v1alpha1.RunnerConfig{
		Runner: &v1alpha1.RunnerRunnerConfig{
			Envs:    map[string]string{"TEAM": "web", "NODE_ENV": "test"},
			Timeout: ptr.To("30m"),
		},
		Container: &v1alpha1.RunnerContainerConfig{ValidVolumes: []string{"c"}, ForcePull: ptr.To(false)},
	}
	pinned := &v1alpha1.RunnerConfig{
		Runner:    &v1alpha1.RunnerRunnerConfig{Envs: map[string]string{"NO_PROXY": ".svc"}},
		Container: &v1alpha1.RunnerContainerConfig{DockerHost: ptr.To("-")},
	}
	got := runnerconfig.Merge(defaults, group, pinned)

	assert.Equal(t, "info", *got.Log.Level, "a scalar no later layer sets stays")
	assert.Equal(t, "30m", *got.Runner.Timeout, "a later layer's scalar replaces")
	assert.Equal(t, "2s", *got.Runner.FetchInterval)
	assert.False(t, *got.Container.ForcePull, "a later layer's false replaces true")
	assert.Equal(t, map[string]string{"HTTP_PROXY": "http://proxy", "TEAM": "web", "NODE_ENV": "test", "NO_PROXY": ".svc"}, got.Runner.Envs, "envs merge by name")
	assert.Equal(t, []string{"c"}, got.Container.ValidVolumes, "a list is replaced whole")
	assert.Equal(t, "-", *got.Container.DockerHost, "pinned applies over the group")
	assert.Equal(t, map[string]string{"HTTP_PROXY": "http://proxy", "TEAM": "platform"}, defaults.Runner.Envs, "the layers are not changed")

	empty := runnerconfig.Merge(nil, nil, nil)
	assert.Equal(t, v1alpha1.RunnerConfig{}, empty)
}

func TestCheckGroup(t *testing.T) {
	pinned := &v1alpha1.RunnerConfig{
		Runner:    &v1alpha1.RunnerRunnerConfig{Envs: map[string]string{"HTTP_PROXY": "http://proxy"}, Timeout: ptr.To("1h")},
		Container: &v1alpha1.RunnerContainerConfig{DockerHost: ptr.To("-")},
	}
	tests := map[string]struct {
		group *v1alpha1.RunnerConfig
		want  []string
	}{
		"nothing":              {},
		"fields not pinned":    {group: &v1alpha1.RunnerConfig{Runner: &v1alpha1.RunnerRunnerConfig{Envs: map[string]string{"A": "b"}, FetchInterval: ptr.To("1s")}}},
		"a pinned scalar":      {group: &v1alpha1.RunnerConfig{Runner: &v1alpha1.RunnerRunnerConfig{Timeout: ptr.To("5h")}}, want: []string{"spec.runnerConfig.runner.timeout is pinned by the platform"}},
		"a pinned env":         {group: &v1alpha1.RunnerConfig{Runner: &v1alpha1.RunnerRunnerConfig{Envs: map[string]string{"HTTP_PROXY": "http://mine", "A": "b"}}}, want: []string{"spec.runnerConfig.runner.envs.HTTP_PROXY is pinned"}},
		"a pinned docker_host": {group: &v1alpha1.RunnerConfig{Container: &v1alpha1.RunnerContainerConfig{DockerHost: ptr.To("")}}, want: []string{"spec.runnerConfig.container.docker_host is pinned"}},
		"reserved fields, under an older CRD": {
			group: &v1alpha1.RunnerConfig{Runner: &v1alpha1.RunnerRunnerConfig{File: ptr.To(".runner"), Labels: []string{"x"}, Capacity: ptr.To[int32](4), EnvFile: ptr.To(".env"), ShutdownTimeout: ptr.To("1h")}, Cache: &v1alpha1.RawSection{Raw: []byte(`{"enabled":true}`)}},
			want: []string{
				"spec.runnerConfig.runner.file is owned by the scaler", "spec.runnerConfig.runner.labels is owned by the scaler",
				"spec.runnerConfig.runner.capacity must be 1", "spec.runnerConfig.runner.env_file is owned by the scaler",
				"spec.runnerConfig.runner.shutdown_timeout is owned by the scaler", "spec.runnerConfig.cache is owned by the scaler",
			},
		},
		"capacity 1 is allowed": {group: &v1alpha1.RunnerConfig{Runner: &v1alpha1.RunnerRunnerConfig{Capacity: ptr.To[int32](1)}}},
		"a bad duration":        {group: &v1alpha1.RunnerConfig{Runner: &v1alpha1.RunnerRunnerConfig{FetchInterval: ptr.To("soon")}}, want: []string{`spec.runnerConfig.runner.fetch_interval "soon" is not a duration`}},
		"a bad env name":        {group: &v1alpha1.RunnerConfig{Runner: &v1alpha1.RunnerRunnerConfig{Envs: map[string]string{"A-B": "x"}}}, want: []string{`runner.envs: "A-B" is not an environment variable name`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := runnerconfig.CheckGroup(tc.group, pinned)
			if len(tc.want) == 0 {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestShutdownTimeout(t *testing.T) {
	tests := map[time.Duration]time.Duration{
		0:                             0,
		10 * time.Second:              5 * time.Second,
		60 * time.Second:              30 * time.Second,
		120 * time.Second:             60 * time.Second,
		300 * time.Second:             180 * time.Second,
		3*time.Hour + 120*time.Second: 3 * time.Hour,
	}
	for grace, want := range tests {
		assert.Equal(t, want, runnerconfig.ShutdownTimeout(grace), "grace %s", grace)
	}
}

// TestRender reads the rendered file back as the runner's keys: what the
// scaler owns is always there, the layers' values as set, nothing else.
func TestRender(t *testing.T) {
	c := runnerconfig.Merge(nil, &v1alpha1.RunnerConfig{
		Log:       &v1alpha1.RunnerLogConfig{Level: ptr.To("debug")},
		Runner:    &v1alpha1.RunnerRunnerConfig{Envs: map[string]string{"B": "2", "A": "1"}, Timeout: ptr.To("45m"), FetchInterval: ptr.To("500ms")},
		Container: &v1alpha1.RunnerContainerConfig{Privileged: ptr.To(false), ValidVolumes: []string{"data"}},
	}, nil)
	tests := map[string]struct {
		cache runnerconfig.Cache
		want  map[string]any
	}{
		"without a shared cache the runner's own is off": {want: map[string]any{"enabled": false}},
		"with one, every runner uses it":                 {cache: runnerconfig.Cache{ExternalServer: "http://10.96.0.7:8088/"}, want: map[string]any{"enabled": true, "external_server": "http://10.96.0.7:8088/"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			raw, err := runnerconfig.Render(c, 120*time.Second, tc.cache)
			require.NoError(t, err)
			again, err := runnerconfig.Render(c, 120*time.Second, tc.cache)
			require.NoError(t, err)
			assert.Equal(t, raw, again, "the same group renders the same bytes")
			var got map[string]any
			require.NoError(t, yaml.Unmarshal(raw, &got))
			assert.Equal(t, map[string]any{
				"log": map[string]any{"level": "debug"},
				"runner": map[string]any{
					"capacity": 1, "shutdown_timeout": "1m0s", "envs": map[string]any{"A": "1", "B": "2"},
					"timeout": "45m", "fetch_interval": "500ms",
				},
				"cache":     tc.want,
				"container": map[string]any{"privileged": false, "valid_volumes": []any{"data"}},
			}, got)
		})
	}
}

func TestParseLayer(t *testing.T) {
	tests := map[string]struct {
		raw     string
		want    *v1alpha1.RunnerConfig
		wantErr string
	}{
		"empty":                 {raw: "  \n"},
		"a layer":               {raw: "runner:\n  fetch_interval: 500ms\n  envs:\n    A: b\n", want: &v1alpha1.RunnerConfig{Runner: &v1alpha1.RunnerRunnerConfig{FetchInterval: ptr.To("500ms"), Envs: map[string]string{"A": "b"}}}},
		"a typo":                {raw: "runner:\n  fetch_intervall: 1s\n", wantErr: `unknown field "fetch_intervall"`},
		"a key the scaler owns": {raw: "runner:\n  capacity: 2\n", wantErr: "runnerConfig.defaults.runner.capacity must be 1"},
		"not yaml":              {raw: "runner: [", wantErr: "runnerConfig.defaults"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := runnerconfig.ParseLayer([]byte(tc.raw), "runnerConfig.defaults")
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestNeedsPrivileged(t *testing.T) {
	tests := map[string]struct {
		c    v1alpha1.RunnerContainerConfig
		want []string
	}{
		"harmless settings": {c: v1alpha1.RunnerContainerConfig{
			Network: ptr.To("bridge"), Privileged: ptr.To(false), ValidVolumes: []string{"data", "cache.v1"}, DockerHost: ptr.To("-"),
			Options: ptr.To("--add-host=gitea.example.com:10.0.0.1 -e A=b --memory 2g -m2g --cpus=2 --shm-size 1g -u 1000"),
		}},
		"privileged":           {c: v1alpha1.RunnerContainerConfig{Privileged: ptr.To(true)}, want: []string{"container.privileged: true"}},
		"host network":         {c: v1alpha1.RunnerContainerConfig{Network: ptr.To("host")}, want: []string{"container.network: host"}},
		"a host path":          {c: v1alpha1.RunnerContainerConfig{ValidVolumes: []string{"data", "/var/run/docker.sock"}}, want: []string{`container.valid_volumes "/var/run/docker.sock"`}},
		"a glob":               {c: v1alpha1.RunnerContainerConfig{ValidVolumes: []string{"**"}}, want: []string{`container.valid_volumes "**"`}},
		"another docker_host":  {c: v1alpha1.RunnerContainerConfig{DockerHost: ptr.To("tcp://node:2375")}, want: []string{`container.docker_host "tcp://node:2375"`}},
		"--privileged":         {c: v1alpha1.RunnerContainerConfig{Options: ptr.To("--memory 1g --privileged")}, want: []string{"container.options: --privileged not among"}},
		"-v and --mount":       {c: v1alpha1.RunnerContainerConfig{Options: ptr.To("-v /:/host --mount=type=bind,src=/,dst=/h")}, want: []string{"-v, --mount not among"}},
		"--cap-add and --pid":  {c: v1alpha1.RunnerContainerConfig{Options: ptr.To("--cap-add SYS_ADMIN --pid=host --network host")}, want: []string{"--cap-add, --pid, --network not among"}},
		"combined short flags": {c: v1alpha1.RunnerContainerConfig{Options: ptr.To("-itv /:/h")}, want: []string{"-itv not among"}},
		"a quoted flag":        {c: v1alpha1.RunnerContainerConfig{Options: ptr.To("'--privileged'")}, want: []string{"quotes, backslashes"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := runnerconfig.NeedsPrivileged(v1alpha1.RunnerConfig{Container: &tc.c})
			require.Len(t, got, len(tc.want), "%v", got)
			for i, w := range tc.want {
				assert.Contains(t, got[i], w)
			}
		})
	}
}
