package scaler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/kubecache"
)

// asLoop makes the Scaler a loop's whose watch caches never sync: it reads
// the API server as a single pass does, and keeps what a loop keeps
// between passes.
func asLoop(d *Deps, _ *Config) {
	d.Cache = &stillCache{views: map[string]kubecache.View{}, refused: map[string]bool{}}
}

// A Scaler without watch caches makes a CronJob's single pass: whatever
// it learnt is gone at the next pass, so two passes of it ask Gitea and
// the API server what two CronJob runs would. A loop asks once.
func TestOnlyALoopRemembersBetweenPasses(t *testing.T) {
	tests := []struct {
		name   string
		mode   setup
		loop   bool
		checks int
		who    int
	}{
		{"single passes", func(*Deps, *Config) {}, false, 2, 2},
		{"a loop", asLoop, true, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newServedEnv(t, newGroup("acme", 5, servedAt(t0)))
			e.clusterWide()
			e.bind(ns)
			c := &checkingGitea{fakeGitea: e.gitea, active: map[string]string{"org acme": "reg-" + secretToken}}
			sc := e.scaler(checkedBy(c), withClusterWide, tt.mode, func(d *Deps, _ *Config) { d.Now = func() time.Time { return t0 } })
			assert.Equal(t, tt.loop, sc.mem != nil, "only a loop has a memory")
			e.kube.ClearActions()
			for range 2 {
				sum, err := sc.Pass(context.Background())
				require.NoError(t, err)
				require.Empty(t, sum.Failed)
			}
			assert.Equal(t, tt.checks, c.checks, "registration token checks")
			who := 0
			for _, a := range e.kube.Actions() {
				if a.GetVerb() == "create" && a.GetResource().Resource == "selfsubjectreviews" {
					who++
				}
			}
			assert.Equal(t, tt.who, who, "asked who the scaler is")
		})
	}
}
