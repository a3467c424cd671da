package cli

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/metrics"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
)

// heapProfiler is the pass observer of --bench-heap-profile: the metrics'
// own, which after each pass also writes the heap profile as
// heap-<pass>.pprof in dir and logs the runtime's memory figures (and
// writes them as mem-<pass>.txt), so the
// benchmark can tell what a pass keeps. It embeds the metrics
// so the webhook's counters still reach them.
type heapProfiler struct {
	*metrics.Metrics
	dir    string
	log    *slog.Logger
	passes atomic.Int64
}

func (h *heapProfiler) ObservePass(sum passreport.Summary, took time.Duration, err error) {
	h.Metrics.ObservePass(sum, took, err)
	n := h.passes.Add(1)
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	attrs := []any{"pass", n, "heapInuseMiB", mibOf(m.HeapInuse), "heapAllocMiB", mibOf(m.HeapAlloc),
		"stackInuseMiB", mibOf(m.StackInuse), "sysMiB", mibOf(m.Sys), "heapReleasedMiB", mibOf(m.HeapReleased),
		"goroutines", runtime.NumGoroutine(), "gcs", m.NumGC}
	h.log.Info("memory after the pass", attrs...)
	_ = os.WriteFile(filepath.Join(h.dir, fmt.Sprintf("mem-%d.txt", n)), []byte(fmt.Sprintln(attrs...)), 0o644)
	f, ferr := os.Create(filepath.Join(h.dir, fmt.Sprintf("heap-%d.pprof", n)))
	if ferr != nil {
		h.log.Warn("cannot write the heap profile", "error", ferr)
		return
	}
	defer f.Close()
	if werr := pprof.Lookup("heap").WriteTo(f, 0); werr != nil {
		h.log.Warn("cannot write the heap profile", "error", werr)
	}
}

func mibOf(v uint64) string { return fmt.Sprintf("%.1f", float64(v)/(1<<20)) }
