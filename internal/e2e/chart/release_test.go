//go:build e2e

// The release path: `make release` against the bed's OCI registry, then
// the chart installed from oci:// as a user would.

package chart

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

const (
	ociIndex    = "application/vnd.oci.image.index.v1+json"
	ociManifest = "application/vnd.oci.image.manifest.v1+json"
	helmConfig  = "application/vnd.cncf.helm.config.v1+json"
	spdxJSON    = "application/spdx+json"
)

// bedRegistry is the host:port of the bed's OCI registry (scripts/testbed
// env exports it).
func bedRegistry() string {
	if r := os.Getenv("TESTBED_REGISTRY"); r != "" {
		return r
	}
	return "127.0.0.1:25000"
}

// ociGet fetches a manifest or blob from the bed's registry and returns its
// body and the digest the registry names it by.
func ociGet(ctx context.Context, t *testing.T, url, accept string) ([]byte, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", url, body)
	sum := sha256.Sum256(body)
	own := "sha256:" + hex.EncodeToString(sum[:])
	if d := resp.Header.Get("Docker-Content-Digest"); d != "" {
		require.Equal(t, own, d, "the registry's digest of %s is that of its content", url)
	}
	return body, own
}

type ociDescriptor struct {
	MediaType    string            `json:"mediaType"`
	ArtifactType string            `json:"artifactType"`
	Digest       string            `json:"digest"`
	Platform     map[string]string `json:"platform"`
}

type ociDoc struct {
	MediaType    string          `json:"mediaType"`
	ArtifactType string          `json:"artifactType"`
	Config       ociDescriptor   `json:"config"`
	Layers       []ociDescriptor `json:"layers"`
	Manifests    []ociDescriptor `json:"manifests"`
	Subject      *ociDescriptor  `json:"subject"`
}

// TestReleasePushesAnImageAndAChartPinnedToItsDigest runs the maintainers'
// `make release` against the bed's registry (distribution's, on loopback),
// installs the chart from oci:// with helm, and holds the installed CronJob
// to the image the registry serves: the same digest. The bed's agent does
// not pull images, so the proof is the CronJob's image reference against the
// registry's manifest digest. The SBOM must hang off that image, and a key
// given to the release signs the image and attests the SBOM. The default
// runner image reaches the scaler pinned by the digest the release was
// given (the bed cannot reach Docker Hub, where `make release` reads it
// otherwise; `release digest` is held to the bed's registry instead).
func TestReleasePushesAnImageAndAChartPinnedToItsDigest(t *testing.T) {
	// Alone on the bed: `make release` builds images on both cores, and other
	// tests' short Gitea timeouts would fire.
	e2e.Exclusive(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 15*time.Minute)
	reg := bedRegistry()
	version := fmt.Sprintf("0.0.0-e2e.%d", time.Now().Unix())
	prefix := reg + "/e2e-release"
	image := prefix + "/gitea-runner-scaler"

	// A throwaway signing key, outside the repository; its password only
	// ever travels in the environment.
	cosign := cosignBinary(ctx, t, b.Root)
	keys := t.TempDir()
	password := rand.Text()
	releaseKey := generateKeyPair(ctx, t, cosign, keys, "release", password)
	otherKey := generateKeyPair(ctx, t, cosign, keys, "other", password)

	// The release, as a maintainer runs it (the bed's registry has no TLS,
	// and the bed no way to the public transparency log).
	mctx, cancel := context.WithTimeout(ctx, 12*time.Minute)
	defer cancel()
	runnerDigest := "sha256:" + strings.Repeat("5e", 32)
	cmd := exec.CommandContext(mctx, "make", "--no-print-directory", "release",
		"VERSION="+version, "REGISTRY="+prefix, "RELEASE_PLAIN_HTTP=true",
		"COSIGN_KEY="+releaseKey+".key", "COSIGN_TLOG_UPLOAD=false", "RELEASE_RUNNER_DIGEST="+runnerDigest)
	cmd.Dir = b.Root
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+password)
	out, err := cmd.CombinedOutput()
	require.NotContains(t, string(out), password, "make release never shows the key's password")
	require.NoError(t, err, "make release:\n%s", e2e.Tail(string(out), 60))
	t.Logf("make release:\n%s", e2e.Tail(string(out), 8))

	// What the registry serves under the tag: a two-platform index.
	body, digest := ociGet(ctx, t, "http://"+reg+"/v2/e2e-release/gitea-runner-scaler/manifests/"+version, ociIndex)
	var idx ociDoc
	require.NoError(t, json.Unmarshal(body, &idx))
	assert.Equal(t, ociIndex, idx.MediaType)
	var platforms []string
	for _, m := range idx.Manifests {
		platforms = append(platforms, m.Platform["os"]+"/"+m.Platform["architecture"])
	}
	assert.ElementsMatch(t, []string{"linux/amd64", "linux/arm64"}, platforms)
	local, err := os.ReadFile(filepath.Join(b.Root, "bin", "release", "image.digest"))
	require.NoError(t, err)
	assert.Equal(t, digest, strings.TrimSpace(string(local)), "make release pushed what it built")
	// release digest, which pins the runner image in a real release, reads
	// what the registry serves for a tag.
	dcmd := exec.CommandContext(ctx, "go", "run", "-mod=readonly", "./release", "digest", "-plain-http", "-ref", image+":"+version)
	dcmd.Dir = filepath.Join(b.Root, "scripts", "tools", "image")
	dout, err := dcmd.CombinedOutput()
	require.NoError(t, err, "release digest:\n%s", dout)
	assert.Equal(t, digest, strings.TrimSpace(string(dout)))

	// Signed and attested with the release's key: cosign verifies both
	// with its public key, and neither with another key nor for an image
	// nobody signed (one platform's manifest; the release signs the index).
	signed := image + "@" + digest
	unsigned := image + "@" + idx.Manifests[0].Digest
	for _, c := range []struct {
		name    string
		args    []string
		succeed bool
	}{
		{"the signature with the release's key", []string{"verify", "--key", releaseKey + ".pub", signed}, true},
		{"the SBOM attestation with the release's key", []string{"verify-attestation", "--type", "spdxjson", "--key", releaseKey + ".pub", signed}, true},
		{"the signature with another key", []string{"verify", "--key", otherKey + ".pub", signed}, false},
		{"the SBOM attestation with another key", []string{"verify-attestation", "--type", "spdxjson", "--key", otherKey + ".pub", signed}, false},
		{"an unsigned image", []string{"verify", "--key", releaseKey + ".pub", unsigned}, false},
		{"an unattested image", []string{"verify-attestation", "--type", "spdxjson", "--key", releaseKey + ".pub", unsigned}, false},
	} {
		args := append(c.args[:len(c.args):len(c.args)], "--insecure-ignore-tlog", "--allow-insecure-registry", "--allow-http-registry")
		out, err := exec.CommandContext(ctx, cosign, args...).CombinedOutput()
		if c.succeed {
			assert.NoError(t, err, "cosign verifies %s:\n%s", c.name, e2e.Tail(string(out), 20))
		} else {
			assert.Error(t, err, "cosign refuses %s:\n%s", c.name, e2e.Tail(string(out), 20))
		}
	}

	// The SBOM hangs off the image. distribution's registry has no
	// referrers API, so the pusher keeps the referrers tag schema's tag.
	body, _ = ociGet(ctx, t, "http://"+reg+"/v2/e2e-release/gitea-runner-scaler/manifests/"+strings.Replace(digest, ":", "-", 1), ociIndex)
	var refs ociDoc
	require.NoError(t, json.Unmarshal(body, &refs))
	require.Len(t, refs.Manifests, 1, "one referrer: the SBOM")
	assert.Equal(t, spdxJSON, refs.Manifests[0].ArtifactType)
	body, _ = ociGet(ctx, t, "http://"+reg+"/v2/e2e-release/gitea-runner-scaler/manifests/"+refs.Manifests[0].Digest, ociManifest)
	var art ociDoc
	require.NoError(t, json.Unmarshal(body, &art))
	require.NotNil(t, art.Subject)
	assert.Equal(t, digest, art.Subject.Digest)
	require.Len(t, art.Layers, 1)
	body, _ = ociGet(ctx, t, "http://"+reg+"/v2/e2e-release/gitea-runner-scaler/blobs/"+art.Layers[0].Digest, "")
	var sbom struct {
		SPDXVersion       string   `json:"spdxVersion"`
		DocumentDescribes []string `json:"documentDescribes"`
		Packages          []struct {
			SPDXID    string `json:"SPDXID"`
			Name      string `json:"name"`
			Checksums []struct {
				Algorithm     string `json:"algorithm"`
				ChecksumValue string `json:"checksumValue"`
			} `json:"checksums"`
		} `json:"packages"`
	}
	require.NoError(t, json.Unmarshal(body, &sbom))
	assert.Equal(t, "SPDX-2.3", sbom.SPDXVersion)
	require.Len(t, sbom.DocumentDescribes, 1, "the SBOM describes the image")
	names := map[string]bool{}
	described := false
	for _, p := range sbom.Packages {
		names[p.Name] = true
		if p.SPDXID == sbom.DocumentDescribes[0] {
			described = true
			require.Len(t, p.Checksums, 1)
			assert.Equal(t, "SHA256", p.Checksums[0].Algorithm)
			assert.Equal(t, strings.TrimPrefix(digest, "sha256:"), p.Checksums[0].ChecksumValue, "the SBOM names the image by its digest")
		}
	}
	assert.True(t, described, "the described package %s is in the SBOM", sbom.DocumentDescribes[0])
	for _, m := range []string{"gitea-runner-scaler", "stdlib", "k8s.io/client-go", "code.gitea.io/sdk/gitea"} {
		assert.True(t, names[m], "the SBOM lists %s", m)
	}

	// The chart is a helm OCI artifact.
	body, _ = ociGet(ctx, t, "http://"+reg+"/v2/e2e-release/charts/gitea-runner-operator/manifests/"+version, ociManifest)
	var chart ociDoc
	require.NoError(t, json.Unmarshal(body, &chart))
	assert.Equal(t, helmConfig, chart.Config.MediaType)

	// Installed from oci:// with nothing but the platform's own values:
	// the image comes from the pushed chart. Suspended: no pass is needed
	// to read the CronJob.
	ns := b.Namespace(ctx, t, "release", nil)
	values := e2e.BaseValues()
	delete(values, "image")
	values["cronjob"] = map[string]any{"suspend": true}
	file := e2e.ValuesFile(t, values)
	rel := "rel"
	t.Cleanup(func() {
		if e2e.Keep() {
			return
		}
		ctx, cancel := e2e.CleanupContext()
		defer cancel()
		if out, err := b.Helm(ctx, "uninstall", rel, "--namespace", ns); err != nil && !strings.Contains(out, "not found") {
			t.Errorf("helm uninstall %s -n %s: %v\n%s", rel, ns, err, e2e.Redact(out))
		}
	})
	hctx, hcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer hcancel()
	hout, err := b.Helm(hctx, "install", rel, "oci://"+prefix+"/charts/gitea-runner-operator", "--version", version,
		"--plain-http", "--namespace", ns, "--values", file)
	require.NoError(t, err, "helm install from oci://:\n%s", e2e.Redact(hout))

	cjs, err := b.Kube.BatchV1().CronJobs(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, cjs.Items, 1, "the default listener's CronJob")
	containers := cjs.Items[0].Spec.JobTemplate.Spec.Template.Spec.Containers
	require.Len(t, containers, 1)
	assert.Equal(t, image+":"+version+"@"+digest, containers[0].Image,
		"the installed CronJob runs the image the registry serves, pinned by digest")
	runnerImage, ok := e2e.EnvOf(containers[0], "SCALER_RUNNER_IMAGE")
	require.True(t, ok)
	assert.Equal(t, "docker.io/"+runnerjob.DefaultImage+"@"+runnerDigest, runnerImage.Value,
		"runner pods pull the default runner image by the digest the release pinned")
	assert.Equal(t, version, cjs.Items[0].Labels["app.kubernetes.io/version"])
}

// cosignBinary builds cosign (make cosign, pinned in scripts/tools/cosign)
// unless the cache has it, and returns its path.
func cosignBinary(ctx context.Context, t *testing.T, root string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "-s", "cosign")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make cosign:\n%s", e2e.Tail(string(out), 30))
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// generateKeyPair writes a cosign key pair dir/name.key (encrypted with
// password) and dir/name.pub, and returns dir/name.
func generateKeyPair(ctx context.Context, t *testing.T, cosign, dir, name, password string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, cosign, "generate-key-pair", "--output-key-prefix", name)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+password)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "cosign generate-key-pair:\n%s", e2e.Tail(string(out), 20))
	return filepath.Join(dir, name)
}
