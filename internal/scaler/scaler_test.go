package scaler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name  string
		setup setup
		want  string
	}{
		{name: "no Kubernetes client", setup: func(d *Deps, _ *Config) { d.Kube = nil }, want: "no Kubernetes client"},
		{name: "no RunnerGroup client", setup: func(d *Deps, _ *Config) { d.Groups = nil }, want: "no RunnerGroup client"},
		{name: "no Gitea factory", setup: func(d *Deps, _ *Config) { d.Gitea = nil }, want: "no Gitea client factory"},
		{name: "spawn TTL of 0", setup: func(_ *Deps, c *Config) { c.SpawnTTL = 0 }, want: "the spawn TTL must be positive"},
		{name: "bad selector", setup: func(_ *Deps, c *Config) { c.Selector = "a in (" }, want: "invalid selector"},
		{name: "exclude selector of everything", setup: func(_ *Deps, c *Config) { c.ExcludeSelectors = []string{""} }, want: "would exclude every RunnerGroup"},
		{name: "bad JSON exclude selector", setup: func(_ *Deps, c *Config) { c.ExcludeSelectors = []string{`{"matchLabel":{}}`} }, want: "invalid exclude selector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			deps, cfg := e.inputs()
			tt.setup(&deps, &cfg)
			_, err := New(deps, cfg)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

// Only the required dependencies: the logger, the dry-run output, the clock
// and the Job names take their defaults, and too few workers mean one.
func TestNewFillsDefaults(t *testing.T) {
	e := newEnv(t, newGroup("ci", 1))
	e.gitea.snap.Queued = append(e.gitea.snap.Queued, queued(1, "ubuntu-latest"))
	deps, cfg := e.inputs()
	deps.Log, deps.Out, deps.Now, deps.NewJobName = nil, nil, nil, nil
	cfg.Workers = 0

	sc, err := New(deps, cfg)
	require.NoError(t, err)
	assert.Equal(t, 1, sc.cfg.Workers)
	sum, err := sc.Pass(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Created)
	require.Len(t, e.jobs(), 1)
	assert.Regexp(t, `^ci-[a-z0-9]{5}$`, e.jobs()[0].Name, "runnerjob.NewName")
	assert.WithinDuration(t, time.Now(), e.group("ci").Status.LastCheckTime.Time, time.Minute, "the real clock, not the test's")
}

// A Scaler not made by New has nothing to talk to; it says so instead of
// panicking.
func TestZeroScalerAsksForNew(t *testing.T) {
	_, err := (&Scaler{}).Pass(context.Background())
	assert.ErrorContains(t, err, "not made by scaler.New")
	assert.ErrorContains(t, (&Scaler{}).Run(context.Background(), RunOptions{}), "not made by scaler.New")
}
