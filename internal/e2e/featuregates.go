//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// featureLine is one gate in the API server's /metrics: the gauge
// kubernetes_feature_enabled{name="...",stage="..."} 1 or 0.
var featureLine = regexp.MustCompile(`^kubernetes_feature_enabled\{(?:[^}]*,)?name="([^"]+)"[^}]*\} ([01])$`)

// FeatureGates are the API server's feature gates as its /metrics shows
// them (every gate it knows, on or off; a gate removed after it went GA
// is missing, and on): a test of what a gate changes
// asks the server itself, so it holds whatever the bed was started with
// (scripts/testbed's TESTBED_APISERVER_FEATURE_GATES) and whichever
// Kubernetes release it runs.
func (b *Testbed) FeatureGates(ctx context.Context, t *testing.T) map[string]bool {
	t.Helper()
	raw, err := b.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	require.NoError(t, err, "the API server's /metrics")
	gates := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		if m := featureLine.FindStringSubmatch(sc.Text()); m != nil {
			gates[m[1]] = m[2] == "1"
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, gates, "no kubernetes_feature_enabled in the API server's /metrics")
	return gates
}

// PodSecurityPlatform is the pre-check's setting (tenancy.Platform) that
// agrees with the bed's API server on a pod in a namespace with an enforce
// label: Pod Security relaxed for user-namespaced pods when the server's
// gate UserNamespacesPodSecurityStandards is on. Unlabelled namespaces are
// not trusted: the tests check that the scaler holds them to baseline.
func (b *Testbed) PodSecurityPlatform(ctx context.Context, t *testing.T) tenancy.Platform {
	t.Helper()
	return tenancy.Platform{UserNamespacesPodSecurityStandards: b.FeatureGates(ctx, t)["UserNamespacesPodSecurityStandards"]}
}
