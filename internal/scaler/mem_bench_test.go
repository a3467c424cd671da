package scaler

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/metrics"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
)

// BenchmarkPassMemory measures what a scaler keeps in memory over the
// fakes, G groups spread over N namespaces (10 orgs, nothing to create):
// a CronJob pass (a fresh Scaler, no caches) and a loop (watch caches
// over the fake clientsets, its steady pass; loop-wide: with the
// cluster-wide caches of --cluster-wide-reads), each with the metrics
// endpoint as its Observer, as the binary wires it in every mode. It
// prints, as metrics, the heap and goroutine stacks the scaler adds to
// what the fakes hold, once
// collected (live) and the highest seen while the passes ran (peak,
// sampled every 5 ms); nothing is asserted. Run:
//
//	go test -run '^$' -bench BenchmarkPassMemory -benchtime 1x ./internal/scaler/
//
// BENCH_MEM=G/N picks the size (default 5000/500); BENCH_MEM_PROFILE=DIR
// writes each mode's heap profile there before and after its steady
// pass (compare with -diff_base), for
// `go tool pprof -top -sample_index=inuse_space`.
func BenchmarkPassMemory(b *testing.B) {
	groups, namespaces := 5000, 500
	if v := os.Getenv("BENCH_MEM"); v != "" {
		if _, err := fmt.Sscanf(v, "%d/%d", &groups, &namespaces); err != nil {
			b.Fatalf("BENCH_MEM=%q: want G/N", v)
		}
	}
	for _, mode := range []string{"cronjob", "loop", "loop-wide"} {
		b.Run(fmt.Sprintf("%s/groups=%d/namespaces=%d", mode, groups, namespaces), func(b *testing.B) {
			for b.Loop() {
				benchmarkPassMemory(b, mode, groups, namespaces)
			}
		})
	}
}

func benchmarkPassMemory(b *testing.B, mode string, groups, namespaces int) {
	var rgs []*v1alpha1.RunnerGroup
	for i := range groups {
		rgs = append(rgs, newGroup(fmt.Sprintf("g%04d", i), 5, inNamespace(fmt.Sprintf("team-%03d", i%namespaces)), func(rg *v1alpha1.RunnerGroup) {
			rg.Spec.Org = fmt.Sprintf("org-%d", i%10)
			rg.Generation = 1 // as the API server gives it, so a loop keeps its verdicts
		}))
	}
	e := newEnv(b, rgs...)
	for n := range namespaces {
		nsObj, err := e.kube.CoreV1().Namespaces().Get(context.Background(), fmt.Sprintf("team-%03d", n), metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		nsObj.ResourceVersion = "1"
		if err := e.kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("namespaces"), nsObj, ""); err != nil {
			b.Fatal(err)
		}
		for _, s := range []*corev1.Secret{secret("api", secretToken), secret("reg", "reg-"+secretToken)} {
			s.Namespace = fmt.Sprintf("team-%03d", n)
			if err := e.kube.Tracker().Add(s); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The wall clock (the fakes' moves a second per reading, which would
	// make every status a heartbeat), the flags' defaults (4 workers,
	// 1,500 new groups a pass at --kube-qps 50), no logs.
	cronjob := func() *Scaler {
		return e.scaler(func(d *Deps, c *Config) {
			// The plain client: the fixture's keeps a copy of every group it lists.
			d.Groups = runnergroups.Client{Dynamic: e.dyn}
			d.Log, d.Now = nil, time.Now
			d.Observer = metrics.New() // as every mode's process has it
			c.Workers, c.NewGroupsPerPass = 4, 1500
		})
	}
	ctx := context.Background()
	pass := func(s *Scaler) passreport.Summary {
		sum, err := s.loggedPass(ctx) // as the loop makes them: the Observer hears of it
		if err != nil || len(sum.Failed) > 0 || sum.Created > 0 {
			b.Fatalf("%s pass: %v failed=%d created=%d", mode, err, len(sum.Failed), sum.Created)
		}
		return sum
	}
	// CronJob passes serve every new group first, so what the fakes keep
	// of them (states, statuses) is in the baseline.
	for pass(cronjob()).Deferred > 0 {
	}
	e.logs = &lockedBuffer{}
	base := collected()

	s := cronjob
	if mode == "loop" || mode == "loop-wide" {
		sc, c := watchingScaler(b, e, func(d *Deps, _ *Config) { d.Observer = metrics.New() })
		if mode == "loop-wide" {
			if err := c.WatchClusterWide(ctx); err != nil {
				b.Fatal(err)
			}
		}
		sc.log, sc.now = slog.New(slog.DiscardHandler), time.Now
		sc.cfg.Workers, sc.cfg.NewGroupsPerPass = 4, 1500
		s = func() *Scaler { return sc }
		pass(sc) // starts every namespace's caches
	}
	e.kube.ClearActions()
	e.dyn.ClearActions()
	writeHeapProfile(b, fmt.Sprintf("heap-%s-%d-%d-before.pprof", mode, groups, namespaces))
	// The steady pass starts from a collection, with or without a
	// profile: otherwise its peak is wherever the first passes left the
	// collector's goal (over 120 MiB without the collection, under 40
	// with it, for the same pass).
	runtime.GC()
	var peak atomic.Uint64
	stop := sampleMemory(&peak)
	last := s()
	allocated := totalAlloc()
	pass(last)
	allocated = totalAlloc() - allocated
	stop()
	live := collected()
	writeHeapProfile(b, fmt.Sprintf("heap-%s-%d-%d.pprof", mode, groups, namespaces))
	runtime.KeepAlive(last)
	b.ReportMetric(mib(live.heap-base.heap), "live-heap-MiB")
	b.ReportMetric(mib(live.stack-base.stack), "stack-MiB")
	b.ReportMetric(float64(live.goroutines-base.goroutines), "goroutines")
	b.ReportMetric(mib(peak.Load()-base.heap-base.stack), "steady-peak-MiB")
	b.ReportMetric(mib(allocated), "steady-alloc-MiB")
}

// totalAlloc is how many bytes the process has allocated so far.
func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// writeHeapProfile writes the heap profile as name in $BENCH_MEM_PROFILE,
// when it is set.
func writeHeapProfile(b *testing.B, name string) {
	dir := os.Getenv("BENCH_MEM_PROFILE")
	if dir == "" {
		return
	}
	runtime.GC()
	f, err := os.Create(dir + "/" + name)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

type memNow struct {
	heap, stack uint64
	goroutines  int
}

// collected is the heap in use after a collection, and the stacks.
func collected() memNow {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memNow{heap: m.HeapInuse, stack: m.StackInuse, goroutines: runtime.NumGoroutine()}
}

// sampleMemory keeps in peak the most heap and stack in use seen, every 5 ms, until stop is called.
func sampleMemory(peak *atomic.Uint64) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if v := m.HeapInuse + m.StackInuse; v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

func mib(v uint64) float64 { return float64(int64(v)) / (1 << 20) }
