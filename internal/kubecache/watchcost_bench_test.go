package kubecache

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// apiEnv, when set, makes the test binary the fake API server of
// BenchmarkNamespaceWatches instead of running tests.
const apiEnv = "KUBECACHE_BENCH_FAKE_API"

func TestMain(m *testing.M) {
	if os.Getenv(apiEnv) != "" {
		serveFakeAPI()
		return
	}
	os.Exit(m.Run())
}

// BenchmarkNamespaceWatches measures what a namespace's watch caches
// cost a loop's process, as it reaches a real API server: over TLS and
// HTTP/2 on loopback, from a fake API server in a child process (this
// test binary again), so the server's own goroutines and buffers are not
// counted. N namespaces (BENCH_WATCH_NS, default 500) are watched with
// nothing in them (idle: runner Jobs and state ConfigMaps, the two
// watches every served namespace has) and with a runner Job each (busy:
// the pods' watch too). It prints, per namespace, the goroutines, their
// stacks and the heap in use once collected that the watches add;
// nothing is asserted. Run:
//
//	go test -run '^$' -bench BenchmarkNamespaceWatches -benchtime 1x ./internal/kubecache/
//
// BENCH_WATCH_PROFILE=DIR writes the goroutines, grouped by stack, there
// while the watches run (goroutines-idle.txt, goroutines-busy.txt).
func BenchmarkNamespaceWatches(b *testing.B) {
	namespaces := 500
	if v := os.Getenv("BENCH_WATCH_NS"); v != "" {
		if _, err := fmt.Sscanf(v, "%d", &namespaces); err != nil {
			b.Fatalf("BENCH_WATCH_NS=%q: want a number", v)
		}
	}
	cfg := startFakeAPI(b)
	for _, kind := range []string{"idle", "busy"} {
		b.Run(fmt.Sprintf("%s/namespaces=%d", kind, namespaces), func(b *testing.B) {
			for b.Loop() {
				kube, err := kubernetes.NewForConfig(cfg)
				if err != nil {
					b.Fatal(err)
				}
				// The client's connection is made before the baseline: a
				// loop has it anyway.
				if _, err := kube.CoreV1().ConfigMaps("warm").List(b.Context(), metav1.ListOptions{}); err != nil {
					b.Fatal(err)
				}
				before := measure()
				c := New(kube, nil)
				for i := range namespaces {
					ctx, cancel := context.WithTimeout(b.Context(), SyncTimeout)
					_, ok := c.Watch(ctx, fmt.Sprintf("%s-%03d", kind, i))
					cancel()
					if !ok {
						b.Fatalf("namespace %d: the caches did not sync", i)
					}
				}
				// The watches follow each list: wait until they all run.
				time.Sleep(time.Second)
				after := measure()
				writeGoroutines(b, kind)
				c.Stop()
				n := float64(namespaces)
				b.ReportMetric(float64(after.goroutines-before.goroutines)/n, "goroutines/ns")
				b.ReportMetric(float64(after.stack-before.stack)/n, "stack-B/ns")
				b.ReportMetric(float64(after.heap-before.heap)/n, "heap-B/ns")
			}
		})
	}
}

type usage struct {
	goroutines  int
	stack, heap int64
}

// writeGoroutines writes the goroutine profile, grouped by stack, as
// goroutines-KIND.txt in $BENCH_WATCH_PROFILE, when it is set.
func writeGoroutines(b *testing.B, kind string) {
	dir := os.Getenv("BENCH_WATCH_PROFILE")
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, "goroutines-"+kind+".txt"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("goroutine").WriteTo(f, 1); err != nil {
		b.Fatal(err)
	}
}

// measure is what the process holds once collected.
func measure() usage {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return usage{goroutines: runtime.NumGoroutine(), stack: int64(m.StackInuse), heap: int64(m.HeapInuse)}
}

// startFakeAPI runs this test binary as the fake API server and returns
// a client config for it; the server ends with the benchmark.
func startFakeAPI(b *testing.B) *rest.Config {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), apiEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close() // the server ends when its input does
		_ = cmd.Wait()
	})
	var url, cert string
	if _, err := fmt.Fscanln(bufio.NewReader(stdout), &url, &cert); err != nil {
		b.Fatalf("the fake API server did not start: %v", err)
	}
	der, err := base64.StdEncoding.DecodeString(cert)
	if err != nil {
		b.Fatal(err)
	}
	return &rest.Config{Host: url, QPS: 10000, Burst: 10000, ContentConfig: rest.ContentConfig{ContentType: "application/json"},
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}}
}

// serveFakeAPI answers what the caches ask, over TLS and HTTP/2, until
// its input ends: a list of runner Jobs, pods and ConfigMaps (one runner
// Job and its pod in namespaces named busy-*, none elsewhere) and a watch
// that stays open and sends nothing. It prints its URL and certificate.
func serveFakeAPI() {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(fakeAPI))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	fmt.Println(srv.URL, base64.StdEncoding.EncodeToString(srv.Certificate().Raw))
	_, _ = io.Copy(io.Discard, os.Stdin)
}

func fakeAPI(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/") // api/v1/namespaces/NS/KIND or apis/batch/v1/...
	namespace, kind := parts[len(parts)-2], parts[len(parts)-1]
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Query().Get("watch") != "" {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	apiVersion, listKind := "v1", map[string]string{"pods": "PodList", "configmaps": "ConfigMapList", "jobs": "JobList"}[kind]
	if kind == "jobs" {
		apiVersion = "batch/v1"
	}
	var items []any
	if strings.HasPrefix(namespace, "busy-") && kind != "configmaps" {
		items = append(items, map[string]any{"metadata": map[string]any{"name": "runner-1", "namespace": namespace, "resourceVersion": "1",
			"labels": map[string]string{v1alpha1.LabelRunnerGroupName: "ci"}}})
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": apiVersion, "kind": listKind,
		"metadata": map[string]string{"resourceVersion": "1"}, "items": items})
}
