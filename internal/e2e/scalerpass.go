//go:build e2e

// Scaler passes run by the test itself: bin/gitea-runner-scaler (the binary
// the bed's agent runs for listener pods) started as a local process, so a
// fault test decides when each pass runs, reads its exit code and log, and
// measures its peak memory.

package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const (
	// passGiteaTimeout is the scaler's --gitea-timeout in these passes:
	// short, so that a Gitea that hangs costs a test seconds, not the
	// default 10s, yet long enough for a healthy answer while the other
	// tests' real runners load the machine (2s was not).
	passGiteaTimeout = 5 * time.Second
	// passDeadline bounds one pass; a pass that runs longer fails the test.
	passDeadline = time.Minute
)

// PassOpts says how a pass runs.
type PassOpts struct {
	// Namespaces are served (-n); at least one, so that a pass never
	// touches another test's groups.
	Namespaces []string
	// Kubeconfig is the scaler's; empty means the bed's admin kubeconfig.
	Kubeconfig string
	// Args are more flags, e.g. the runner lifecycle's timeouts.
	Args []string
	// Deadline bounds the pass; 0 means passDeadline.
	Deadline time.Duration
	// Env is more of the process's environment (e.g. GOMEMLIMIT).
	Env []string
	// Memory, when not nil, is the memory cgroup the process runs in.
	Memory *MemoryCgroup
	// Binary is the scaler to run; empty means the bed's
	// bin/gitea-runner-scaler (a benchmark compares an older build).
	Binary string
}

// PassRun is a pass in flight.
type PassRun struct {
	Cmd      *exec.Cmd
	Out      *syncBuffer
	start    time.Time
	cancel   context.CancelFunc
	deadline time.Duration
	// HWM is the highest VmHWM sampled (bytes); stop ends the sampling
	// and sampled says it has ended.
	HWM atomic.Int64
	// RSS is the highest VmRSS sampled since the caller last swapped it
	// for 0: a loop's peak over one pass, where hwm is the whole run's.
	RSS atomic.Int64
	// Anon is the highest RssAnon sampled since the caller last swapped
	// it: the part of rss a memory limit cannot reclaim (rss also holds
	// the executable's pages, which the kernel drops under pressure).
	Anon    atomic.Int64
	stop    chan struct{}
	sampled chan struct{}
	// exited is closed once the process has ended, with waitErr.
	exited  chan struct{}
	waitErr error
}

// Exited is closed once the process has ended, however: a loop that a
// memory limit killed ends without the pass a caller waits for.
func (r *PassRun) Exited() <-chan struct{} { return r.exited }

// syncBuffer is the scaler's output, which a test may read while a loop
// writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// rssSampleEvery paces the sampling of a pass's VmHWM.
const rssSampleEvery = 5 * time.Millisecond

// sampleHWM reads the process's VmHWM from /proc until stop or its exit.
// getrusage cannot give a child's own peak: Go starts children with
// vfork, and exec carries the parent's (this test's) high-water mark into
// the child's ru_maxrss. VmHWM belongs to the process's own memory after
// exec (Start returns only once exec succeeded); being a high-water mark,
// sampling misses only a rise in the last few milliseconds before exit.
func (r *PassRun) sampleHWM(pid int) {
	defer close(r.sampled)
	file := fmt.Sprintf("/proc/%d/status", pid)
	tick := time.NewTicker(rssSampleEvery)
	defer tick.Stop()
	for {
		raw, err := os.ReadFile(file)
		// Once reaped, the pid could be another process's.
		if err != nil || !strings.Contains(string(raw), "Name:\tgitea-runner-sc") {
			return
		}
		for _, line := range strings.Split(string(raw), "\n") {
			for prefix, peak := range map[string]*atomic.Int64{"VmHWM:": &r.HWM, "VmRSS:": &r.RSS, "RssAnon:": &r.Anon} {
				if v, ok := strings.CutPrefix(line, prefix); ok {
					kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
					if err == nil && kib*1024 > peak.Load() {
						peak.Store(kib * 1024)
					}
				}
			}
		}
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
	}
}

// PassResult is how a pass ended.
type PassResult struct {
	Exit int
	Log  string
	Took time.Duration
	// PeakRSS is the process's own peak resident memory in bytes: the
	// kernel's high-water mark (VmHWM in /proc/<pid>/status) sampled every
	// rssSampleEvery while it ran (see sampleHWM).
	PeakRSS int64
}

// StartPass starts one pass of the scaler over the namespaces.
func (b *Testbed) StartPass(ctx context.Context, t *testing.T, o PassOpts) *PassRun {
	t.Helper()
	require.NotEmpty(t, o.Namespaces, "a pass serves the test's namespaces only")
	kubeconfig := o.Kubeconfig
	if kubeconfig == "" {
		kubeconfig = b.Kubeconfig
	}
	args := []string{"run", "--kubeconfig", kubeconfig, "--log-format", "text", "--log-level", "debug",
		"--gitea-timeout", passGiteaTimeout.String()}
	for _, ns := range o.Namespaces {
		args = append(args, "-n", ns)
	}
	if !slices.ContainsFunc(o.Args, func(a string) bool { return strings.HasPrefix(a, "--default-labels") }) {
		args = append(args, "--default-labels", HostLabel)
	}
	if !slices.ContainsFunc(o.Args, func(a string) bool { return strings.HasPrefix(a, "--allowed-gitea-urls") }) {
		args = append(args, "--allowed-gitea-urls", strings.Join(b.GiteaURLsOf(ctx, t, o.Namespaces), ","))
	}
	if !slices.ContainsFunc(o.Args, func(a string) bool { return strings.HasPrefix(a, "--runner-config-defaults") }) {
		raw, err := json.Marshal(bedRunnerConfig())
		require.NoError(t, err)
		args = append(args, "--runner-config-defaults", string(raw))
	}
	args = append(args, o.Args...)
	pctx, cancel := context.WithTimeout(ctx, cmp.Or(o.Deadline, passDeadline))
	cmd := exec.CommandContext(pctx, cmp.Or(o.Binary, filepath.Join(b.Root, "bin", "gitea-runner-scaler")), args...)
	// Nothing of the test's environment (KUBECONFIG, SCALER_*) reaches it.
	cmd.Env = append([]string{"HOME=" + t.TempDir()}, o.Env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	r := &PassRun{Cmd: cmd, Out: out, start: time.Now(), cancel: cancel, deadline: cmp.Or(o.Deadline, passDeadline),
		stop: make(chan struct{}), sampled: make(chan struct{}), exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start the scaler (is bin/gitea-runner-scaler built? scripts/testbed up builds it): %v", err)
	}
	if o.Memory != nil {
		if err := o.Memory.join(cmd.Process.Pid); err != nil {
			_ = cmd.Process.Kill()
			cancel()
			t.Fatalf("move the scaler into its memory cgroup: %v", err)
		}
	}
	go r.sampleHWM(cmd.Process.Pid)
	go func() {
		r.waitErr = cmd.Wait()
		close(r.exited)
	}()
	return r
}

// GiteaURLsOf are the bed's Gitea and every Gitea URL the groups of the
// namespaces name (fault proxies on loopback ports of their own): the
// platform allowing the Gitea it runs, as a pass without its own
// --allowed-gitea-urls does.
func (b *Testbed) GiteaURLsOf(ctx context.Context, t *testing.T, namespaces []string) []string {
	t.Helper()
	urls := []string{GiteaURL}
	for _, ns := range namespaces {
		list, err := b.Groups(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, g := range list.Items {
			if u, _, _ := unstructured.NestedString(g.Object, "spec", "gitea", "url"); u != "" && !slices.Contains(urls, u) {
				urls = append(urls, u)
			}
		}
	}
	return urls
}

// Wait waits for the pass to end. A pass that outlived passDeadline fails
// the test.
func (r *PassRun) Wait(t *testing.T) PassResult {
	t.Helper()
	defer r.cancel()
	<-r.exited
	err := r.waitErr
	close(r.stop)
	<-r.sampled
	res := PassResult{Exit: r.Cmd.ProcessState.ExitCode(), Log: r.Out.String(), Took: time.Since(r.start), PeakRSS: r.HWM.Load()}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("scaler pass: %v\n%s", err, Redact(Tail(res.Log, 40)))
	}
	if res.Exit < 0 {
		t.Fatalf("scaler pass killed after %s (deadline %s)\n%s", res.Took.Round(time.Millisecond), r.deadline, Redact(Tail(res.Log, 40)))
	}
	return res
}

// Pass runs one pass and waits for it.
func (b *Testbed) Pass(ctx context.Context, t *testing.T, o PassOpts) PassResult {
	t.Helper()
	return b.StartPass(ctx, t, o).Wait(t)
}

// RequireSanePass checks what every pass must do whatever it met: end with
// 0 (every group served) or 1 (a group failed), never 2 (usage, or Go's
// exit code for a panic), log no panic and no secret.
func RequireSanePass(t *testing.T, r PassResult, what string) {
	t.Helper()
	require.Contains(t, []int{0, 1}, r.Exit, "%s: exit code %d\n%s", what, r.Exit, Redact(Tail(r.Log, 40)))
	for _, bad := range []string{"panic", "goroutine "} {
		require.NotContains(t, r.Log, bad, "%s: the log shows a %q\n%s", what, bad, Redact(Tail(r.Log, 60)))
	}
	require.Equal(t, Redact(r.Log), r.Log, "%s: the log holds a token", what)
}

// PassFailures are the reasons the pass logged for its failed groups,
// by group name.
func PassFailures(r PassResult) map[string]string {
	out := map[string]string{}
	for _, l := range Lines(r.Log, `msg="pass failed for RunnerGroup"`) {
		out[LogField(l, "runnergroup")] = LogField(l, "reason")
	}
	return out
}

// LogField is the value of key in a text-format slog line.
func LogField(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if strings.HasPrefix(v, `"`) {
		if end := strings.Index(v[1:], `"`); end >= 0 {
			return v[1 : end+1]
		}
	}
	v, _, _ = strings.Cut(v, " ")
	return v
}

// ListenerMemoryLimit is the chart's default memory limit of the listener
// container, read from its values, so the figure a test holds a pass to is
// the one a platform team installs.
func (b *Testbed) ListenerMemoryLimit(t *testing.T) int64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(b.Root, "charts", ChartName, "values.yaml"))
	require.NoError(t, err)
	var values struct {
		Resources struct {
			Limits struct {
				Memory string `yaml:"memory"`
			} `yaml:"limits"`
		} `yaml:"resources"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &values))
	q, err := resource.ParseQuantity(values.Resources.Limits.Memory)
	require.NoError(t, err, "resources.limits.memory in the chart's values")
	return q.Value()
}

// MiB formats bytes as MiB for figures.
func MiB(n int64) float64 { return float64(n) / (1 << 20) }

// LifecyclePass runs one pass over ns with the lifecycle's timeouts.
func (b *Testbed) LifecyclePass(ctx context.Context, t *testing.T, ns string, idle, start time.Duration) PassResult {
	t.Helper()
	r := b.Pass(ctx, t, PassOpts{Namespaces: []string{ns}, Args: []string{
		"--runner-idle-timeout", idle.String(), "--runner-start-timeout", start.String()}})
	RequireSanePass(t, r, "lifecycle pass")
	return r
}

// ReapedMessages are the messages of ns's RunnerReaped events, a line each.
func (b *Testbed) ReapedMessages(ctx context.Context, t *testing.T, ns string) string {
	t.Helper()
	evs, err := b.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=RunnerReaped"})
	require.NoError(t, err)
	var said []string
	for _, ev := range evs.Items {
		said = append(said, ev.Message)
	}
	return strings.Join(said, "\n")
}
