package metrics

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
)

// BenchmarkGroupSeriesMemory measures, per group, what the endpoint
// keeps: the heap still in use, once collected, after two full passes
// over G groups in N namespaces (each group with a runner created, a
// reap and a job's startup and execution, so every series has a value),
// less what it held before them; what the second pass and one scrape
// allocate; and what a scrape holds once it has gathered every series,
// before it writes them. The groups' names are made before the
// baseline, as a scaler has them in its RunnerGroups. Nothing is
// asserted. Run:
//
//	go test -run '^$' -bench BenchmarkGroupSeriesMemory -benchtime 3x ./internal/metrics/
//
// BENCH_MEM=G/N picks the size (default 5000/500).
func BenchmarkGroupSeriesMemory(b *testing.B) {
	groups, namespaces := 5000, 500
	if v := os.Getenv("BENCH_MEM"); v != "" {
		if _, err := fmt.Sscanf(v, "%d/%d", &groups, &namespaces); err != nil {
			b.Fatalf("BENCH_MEM=%q: want G/N", v)
		}
	}
	stats := make([]passreport.GroupStats, groups)
	for i := range stats {
		stats[i] = passreport.GroupStats{
			Namespace: fmt.Sprintf("team-%03d", i%namespaces), Name: fmt.Sprintf("g%04d", i),
			Queued: 1, Running: 1, Active: 2, Idle: 1, Max: 5, Created: 1, IdleReaps: 1,
			Startups: []time.Duration{12 * time.Second}, Executions: []time.Duration{4 * time.Minute},
		}
	}
	var retained, passed, scraped, gathered uint64
	for b.Loop() {
		before := liveHeap()
		m := New()
		m.ObservePass(passreport.Summary{GroupStats: stats}, time.Second, nil)
		allocated := totalAlloc()
		m.ObservePass(passreport.Summary{GroupStats: stats}, time.Second, nil)
		passed += totalAlloc() - allocated
		retained += liveHeap() - before

		h := m.Handler()
		allocated = totalAlloc()
		h.ServeHTTP(discardingWriter{http.Header{}}, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		scraped += totalAlloc() - allocated

		// A scrape gathers every series before it writes one: what it
		// holds then is the most it adds to the heap.
		before = liveHeap()
		families, err := m.Registry().Gather()
		if err != nil {
			b.Fatal(err)
		}
		gathered += liveHeap() - before
		runtime.KeepAlive(families)
		runtime.KeepAlive(m)
	}
	n := float64(b.N) * float64(groups)
	b.ReportMetric(float64(retained)/n, "retained-B/group")
	b.ReportMetric(float64(passed)/n, "pass-alloc-B/group")
	b.ReportMetric(float64(scraped)/n, "scrape-alloc-B/group")
	b.ReportMetric(float64(gathered)/n, "scrape-live-B/group")
}

// totalAlloc is how many bytes the process has allocated so far.
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// liveHeap is the heap's live bytes once collected.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// discardingWriter is a ResponseWriter that drops the body, so a
// scrape's allocations are the endpoint's, not those of a buffer that
// would keep its output.
type discardingWriter struct{ header http.Header }

func (w discardingWriter) Header() http.Header       { return w.header }
func (discardingWriter) Write(p []byte) (int, error) { return io.Discard.Write(p) }
func (discardingWriter) WriteHeader(int)             {}
