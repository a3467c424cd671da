package scaler

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// BenchmarkSteadyLoopPassWithRunners measures a loop's steady pass over
// groups that all have runner Jobs: every queued job has its runner, so a
// pass creates nothing and only keeps the runner config of the Jobs it
// sees. Run:
//
//	go test -run '^$' -bench BenchmarkSteadyLoopPassWithRunners -benchmem -count 5 ./internal/scaler/
func BenchmarkSteadyLoopPassWithRunners(b *testing.B) {
	const groups, runners = 20, 3
	var rgs []*v1alpha1.RunnerGroup
	var snap gitea.Snapshot
	for g := range groups {
		label := fmt.Sprintf("pool-%d", g)
		rgs = append(rgs, newGroup(fmt.Sprintf("g%02d", g), runners, withLabels(label), func(rg *v1alpha1.RunnerGroup) { rg.Generation = 1 }))
		for r := range runners {
			snap.Queued = append(snap.Queued, queued(int64(g*runners+r+1), label))
		}
	}
	e := newEnv(b, rgs...)
	e.gitea.snap = snap
	sc, _ := watchingScaler(b, e, func(d *Deps, _ *Config) { d.Log = nil })
	ctx := context.Background()
	if sum, err := sc.Pass(ctx); err != nil || sum.Created != groups*runners {
		b.Fatalf("first pass: created %d, want %d: %v", sum.Created, groups*runners, err)
	}
	b.ResetTimer()
	for b.Loop() {
		sum, err := sc.Pass(ctx)
		if err != nil || sum.Created != 0 || len(sum.Failed) != 0 {
			b.Fatalf("steady pass: %+v %v", sum, err)
		}
	}
}

// BenchmarkKeepRunnerConfig measures what a loop's steady pass spends on
// one group's runner config alone: the group has runner Jobs, and the
// ConfigMap the pass listed is as the group wants it. Run:
//
//	go test -run '^$' -bench BenchmarkKeepRunnerConfig -benchmem -count 5 ./internal/scaler/
func BenchmarkKeepRunnerConfig(b *testing.B) {
	ctx := context.Background()
	rg := newGroup("ci", 3, func(rg *v1alpha1.RunnerGroup) { rg.Generation = 1 })
	e := newEnv(b, rg)
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest"), queued(2, "ubuntu-latest"), queued(3, "ubuntu-latest")}}
	sc, _ := watchingScaler(b, e, func(d *Deps, _ *Config) { d.Log = nil })
	if sum, err := sc.Pass(ctx); err != nil || sum.Created != 3 {
		b.Fatalf("first pass: created %d: %v", sum.Created, err)
	}
	cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(ctx, runnerjob.ConfigMapName("ci"), metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	nss := newNamespaces()
	nss.listConfigMaps(ns, state.Listed{cm.Name: cm})
	g := &groupRun{rg: e.group("ci"), log: sc.log, namespaces: nss}
	jobs := e.jobs()
	e.kube.ClearActions()
	b.ResetTimer()
	for b.Loop() {
		sc.keepRunnerConfig(ctx, g, jobs)
	}
	b.StopTimer()
	if n := len(e.kube.Actions()); n != 0 {
		b.Fatalf("a steady pass sent %d requests for the runner config", n)
	}
}
