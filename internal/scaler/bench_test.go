package scaler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
)

// BenchmarkPass measures whole passes through the real Gitea client against
// the HTTP fake (loopback) and fake Kubernetes clients, and reports the
// Gitea requests one pass costs. "steady" is the common case: every queued
// job already has its runner, so a pass only looks. Run:
//
//	go test -run '^$' -bench BenchmarkPass -benchmem ./internal/scaler/
//
// make bench measures the same on the real API server.
func BenchmarkPass(b *testing.B) {
	for _, groups := range []int{1, 10, 50} {
		benchmarkPass(b, groups)
	}
}

func benchmarkPass(b *testing.B, groups int) {
	b.Run(fmt.Sprintf("steady/groups=%d/queued=20", groups), func(b *testing.B) {
		srv := giteatest.New()
		defer srv.Close()
		srv.AddToken(secretToken, "admin", true)
		var scene giteatest.Scene
		var rgs []*v1alpha1.RunnerGroup
		id := int64(0)
		for g := range groups {
			org := fmt.Sprintf("org%d", g)
			scene.Orgs = append(scene.Orgs, giteatest.Org{Name: org})
			scene.Repos = append(scene.Repos, giteatest.Repo{Owner: org, Name: "app"})
			for range 20 {
				id++
				scene.Jobs = append(scene.Jobs, giteatest.Job{ID: id, Owner: org, Repo: "app", RunID: 1, Name: "build",
					Labels: []string{"ubuntu-latest"}, Status: giteatest.StatusQueued})
			}
			rgs = append(rgs, newGroup(fmt.Sprintf("g%d", g), 20, func(rg *v1alpha1.RunnerGroup) {
				rg.Spec.Org = org
				rg.Spec.Gitea.URL = srv.URL
			}))
		}
		if err := srv.Load(scene); err != nil {
			b.Fatal(err)
		}
		scopeTokens(srv, scene)
		e := newEnv(b, rgs...)
		sc := e.scaler(func(d *Deps, c *Config) {
			d.Gitea = func(url, token string) (gitea.Client, error) {
				return gitea.NewClient(url, token, gitea.Options{Timeout: 5 * time.Second})
			}
			d.Log = nil
			c.Workers = 4
		})
		if sum, err := sc.Pass(context.Background()); err != nil || sum.Created != 20*groups {
			b.Fatalf("first pass: %+v %v", sum, err)
		}
		srv.ResetRequests()
		b.ResetTimer()
		for b.Loop() {
			sum, err := sc.Pass(context.Background())
			if err != nil || sum.Created != 0 || len(sum.Failed) != 0 {
				b.Fatalf("steady pass: %+v %v", sum, err)
			}
		}
		b.ReportMetric(float64(srv.RequestCount())/float64(b.N), "gitea-requests/pass")
	})
}
