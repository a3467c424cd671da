//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// LoopScaler is a looping scaler the test runs as a local process over one
// namespace, with /metrics and the webhook on loopback ports of their own.
type LoopScaler struct {
	// MetricsURL is its /metrics.
	MetricsURL string
}

// StartLoopScaler starts a looping scaler over ns that passes every
// interval, points a webhook of fx's repository at it, and returns once
// the group's first pass is recorded. The scaler stops when the test ends;
// its log goes beside the listeners'.
func (b *Testbed) StartLoopScaler(ctx context.Context, t *testing.T, ns, group string, fx ScopeFixture, interval time.Duration) LoopScaler {
	t.Helper()
	hook, metrics := FreeLoopbackAddr(t), FreeLoopbackAddr(t)
	secret := Uniq("hook-secret")
	Secrets.Add(secret)
	secretFile := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secretFile, []byte(secret), 0o600))
	deadline, ok := ctx.Deadline()
	require.True(t, ok, "a test context has a deadline")
	run := b.StartPass(ctx, t, PassOpts{Namespaces: []string{ns}, Deadline: time.Until(deadline),
		Args: []string{"--loop", "--interval", interval.String(), "--metrics-addr", metrics,
			"--webhook-addr", hook, "--webhook-secret-file", secretFile}})
	t.Cleanup(func() {
		_ = run.Cmd.Process.Signal(syscall.SIGTERM)
		res := run.Wait(t)
		file := filepath.Join(b.Dir, "logs", "pods", ns+"_loop-scaler_listener.log")
		if err := os.WriteFile(file, []byte(Redact(res.Log)), 0o644); err != nil {
			t.Errorf("write the scaler's log: %v", err)
		}
	})
	b.WaitPasses(ctx, t, ns, group, 0, nil, nil)
	require.NoError(t, fx.PushAs.CreateRepoHook(ctx, fx.Repo, "http://"+hook+"/webhook", secret))
	return LoopScaler{MetricsURL: "http://" + metrics + "/metrics"}
}

// Samples are the values of one metric's series whose labels include
// every pair of labels, by the series' name (a histogram's _count, _sum
// and _bucket{le=...} are series of their own).
func (l LoopScaler) Samples(ctx context.Context, metric string, labels map[string]string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.MetricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s", l.MetricsURL, resp.Status, body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric) {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok || !hasLabels(series, labels) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("series %s: %w", series, err)
		}
		out[series[:strings.IndexAny(series+"{", "{")]+labelOf(series, "le")] = v
	}
	return out, sc.Err()
}

// hasLabels says whether the series (name{a="b",...}) has every pair.
func hasLabels(series string, labels map[string]string) bool {
	for k, v := range labels {
		if !strings.Contains(series, k+`="`+v+`"`) {
			return false
		}
	}
	return true
}

// labelOf is `{le="X"}` for a series with label le, else "".
func labelOf(series, label string) string {
	_, rest, ok := strings.Cut(series, label+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return "{" + label + `="` + v + `"}`
}
