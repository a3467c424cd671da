package scaler

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// stalledGitea answers the org "stalled" only once stop is closed or the
// request's context ends (a target whose Gitea hangs), and every other org
// at once.
type stalledGitea struct {
	fast *fakeGitea
	stop <-chan struct{}
	mu   *sync.Mutex
	log  *[]string
}

func (s stalledGitea) Snapshot(ctx context.Context, t scope.Place) (gitea.Snapshot, error) {
	if t.Owner() != "stalled" {
		return s.fast.Snapshot(ctx, t)
	}
	select {
	case <-s.stop:
	case <-ctx.Done():
	}
	s.mu.Lock()
	*s.log = append(*s.log, "stalled listing answered")
	s.mu.Unlock()
	return gitea.Snapshot{}, ctx.Err()
}

// Issue 25.7: a group is served as soon as its own listing is in; a
// stalled listing of another target holds no other group back.
func TestAGroupIsServedAsSoonAsItsOwnListingIsIn(t *testing.T) {
	e := newEnv(t, newGroup("acme", 5), newGroup("slow", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "stalled" }))
	fast := &fakeGitea{snap: gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}}
	stop := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var log []string
	// The stalled listing answers once acme's runner Job exists, or at
	// the group timeout when the pass waits for it first.
	e.kube.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		log = append(log, "runner Job created")
		mu.Unlock()
		once.Do(func() { close(stop) })
		return false, nil, nil
	})
	sum := e.pass(func(d *Deps, c *Config) {
		c.Workers, c.GiteaConcurrency, c.GroupTimeout = 1, 2, 3*time.Second
		d.Gitea = func(string, string) (gitea.Client, error) {
			return stalledGitea{fast: fast, stop: stop, mu: &mu, log: &log}, nil
		}
	})
	assert.Equal(t, 1, sum.Created)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, log)
	assert.Equal(t, []string{"runner Job created", "stalled listing answered"}, log, "acme was served while the other listing stalled")
}
