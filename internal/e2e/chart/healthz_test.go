//go:build e2e

package chart

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
)

// TestLoopingListenerServesHealthz installs the chart in mode deployment
// with its liveness endpoint on (the default; baseValues turns it off for
// the other tests) and reads /healthz where the chart's probe would: 200
// with the time since the last pass once the listener passes. The agent
// does not play probes, so this proves the chart's wiring and the binary's
// endpoint; internal/metrics' tests prove the 503 once passes stop.
func TestLoopingListenerServesHealthz(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 5*time.Minute)
	port := freePort(t)
	values := e2e.DeploymentValues()
	values["deployment"] = map[string]any{"liveness": map[string]any{"enabled": true, "port": port}}
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "healthz", Max: 1, Values: values})
	dump := func() string { return b.DumpNamespaces(s.NS) }
	b.WaitPasses(ctx, t, s.NS, s.Group, 1, dump, nil)

	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", port)
	e2e.WaitUntil(ctx, t, e2e.StepWait, "GET "+url+" answers 200", dump, func(ctx context.Context) (bool, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.HasPrefix(string(body), "ok: last pass ended"),
			fmt.Sprintf("%d %s", resp.StatusCode, body), nil
	})
}

// freePort is a loopback TCP port free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}
