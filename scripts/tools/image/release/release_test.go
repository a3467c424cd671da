package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

const chartDir = "../../../../charts/gitea-runner-operator"

// testBinary is a Go binary with build information: this test's own.
func testBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return exe
}

func testSpec(t *testing.T) SBOMSpec {
	return SBOMSpec{
		Repository: "registry.example/gro/gitea-runner-scaler",
		Version:    "1.2.3",
		Digest:     v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)},
		Binaries:   map[string]string{runtime.GOOS + "/" + runtime.GOARCH: testBinary(t)},
		Created:    time.Unix(1700000000, 0),
		Source:     "https://github.com/gitea-runner-operator/gitea-runner-operator",
		CABundle:   testCABundle(t),
	}
}

// testCABundle stands in for the host's CA bundle: the SBOM reads only its bytes.
func testCABundle(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "ca-certificates.crt")
	require.NoError(t, os.WriteFile(f, []byte("-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"), 0o644))
	return f
}

func TestSBOMListsEveryModuleOfTheBinaryByPURL(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the SBOM describes linux binaries")
	}
	s := testSpec(t)
	raw, err := BuildSBOM(s)
	require.NoError(t, err)
	var doc spdxDocument
	require.NoError(t, json.Unmarshal(raw, &doc))
	assert.Equal(t, "SPDX-2.3", doc.SPDXVersion)
	assert.Equal(t, "CC0-1.0", doc.DataLicense)
	assert.Equal(t, "2023-11-14T22:13:20Z", doc.CreationInfo.Created)
	assert.Contains(t, doc.DocumentNamespace, s.Digest.Hex, "one namespace per image")

	idRE := regexp.MustCompile(`^SPDXRef-[A-Za-z0-9.-]+$`)
	byID := map[string]spdxPackage{}
	purls := map[string]bool{}
	for _, p := range doc.Packages {
		assert.Regexp(t, idRE, p.SPDXID)
		_, dup := byID[p.SPDXID]
		assert.False(t, dup, "SPDXID %s is used twice", p.SPDXID)
		byID[p.SPDXID] = p
		for _, r := range p.ExternalRefs {
			purls[r.ReferenceLocator] = true
		}
	}
	for _, r := range doc.Relationships {
		for _, id := range []string{r.SPDXElementID, r.RelatedSPDXElement} {
			if id != "SPDXRef-DOCUMENT" {
				assert.Contains(t, byID, id, "relationship %v names a package that is not there", r)
			}
		}
	}

	info, err := buildinfo.ReadFile(testBinary(t))
	require.NoError(t, err)
	require.NotEmpty(t, info.Deps, "the test binary links testify and go-containerregistry")
	for _, d := range info.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		assert.True(t, purls[goPURL(m.Path, m.Version)], "%s %s is missing", m.Path, m.Version)
	}
	assert.True(t, purls["pkg:golang/stdlib@"+info.GoVersion], "the standard library is listed")

	require.Len(t, doc.DocumentDescribes, 1)
	img := byID[doc.DocumentDescribes[0]]
	assert.Equal(t, "CONTAINER", img.PrimaryPackagePurpose)
	assert.Equal(t, []spdxChecksum{{"SHA256", s.Digest.Hex}}, img.Checksums, "the image by its index digest")
	assert.Equal(t, "pkg:oci/gitea-runner-scaler@sha256%3A"+s.Digest.Hex+"?repository_url=registry.example%2Fgro%2Fgitea-runner-scaler&tag=1.2.3",
		img.ExternalRefs[0].ReferenceLocator)

	var bins []spdxPackage
	for _, r := range doc.Relationships {
		if r.SPDXElementID == img.SPDXID && r.RelationshipType == "CONTAINS" {
			bins = append(bins, byID[r.RelatedSPDXElement])
		}
	}
	require.Len(t, bins, 2, "the binary and the CA bundle")
	ca := byID["SPDXRef-File-ca-certificates.crt"]
	assert.Contains(t, bins, ca, "the image contains the CA bundle")
	caContent, err := os.ReadFile(s.CABundle)
	require.NoError(t, err)
	caSum := sha256.Sum256(caContent)
	assert.Equal(t, []spdxChecksum{{"SHA256", hex.EncodeToString(caSum[:])}}, ca.Checksums, "the CA bundle by its SHA-256")
	assert.Contains(t, ca.Comment, "/etc/ssl/certs/ca-certificates.crt")
	bins = slices.DeleteFunc(bins, func(p spdxPackage) bool { return p.SPDXID == ca.SPDXID })
	content, err := os.ReadFile(testBinary(t))
	require.NoError(t, err)
	sum := sha256.Sum256(content)
	assert.Equal(t, []spdxChecksum{{"SHA256", hex.EncodeToString(sum[:])}}, bins[0].Checksums, "the binary by its SHA-256")
	deps := 0
	for _, r := range doc.Relationships {
		if r.SPDXElementID == bins[0].SPDXID && r.RelationshipType == "DEPENDS_ON" {
			deps++
		}
	}
	assert.Equal(t, len(info.Deps)+1, deps, "the binary depends on each module and the standard library")

	again, err := BuildSBOM(s)
	require.NoError(t, err)
	assert.Equal(t, string(raw), string(again), "one input, one SBOM")
}

func TestSBOMRefusesWhatItCannotDescribe(t *testing.T) {
	other := "linux/arm64"
	if runtime.GOARCH == "arm64" {
		other = "linux/amd64"
	}
	for _, tc := range []struct {
		name   string
		change func(*SBOMSpec)
		want   string
	}{
		{"no binary", func(s *SBOMSpec) { s.Binaries = nil }, "no binary given"},
		{"no digest", func(s *SBOMSpec) { s.Digest = v1.Hash{} }, "must all be set"},
		{"no CA bundle", func(s *SBOMSpec) { s.CABundle = "" }, "must all be set"},
		{"a CA bundle that is not there", func(s *SBOMSpec) { s.CABundle = filepath.Join(t.TempDir(), "none") }, "CA bundle"},
		{"a binary of another platform", func(s *SBOMSpec) { s.Binaries = map[string]string{other: testBinary(t)} }, "was built for"},
		{"not a Go binary", func(s *SBOMSpec) {
			f := filepath.Join(t.TempDir(), "x")
			require.NoError(t, os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755))
			s.Binaries = map[string]string{runtime.GOOS + "/" + runtime.GOARCH: f}
		}, "read Go build information"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testSpec(t)
			tc.change(&s)
			_, err := BuildSBOM(s)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// writeLayout writes a random two-platform index as `make image` names it.
func writeLayout(t *testing.T, version string) (string, v1.ImageIndex) {
	t.Helper()
	idx, err := random.Index(256, 1, 2)
	require.NoError(t, err)
	dir := t.TempDir()
	lp, err := layout.Write(dir, empty.Index)
	require.NoError(t, err)
	require.NoError(t, lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{refName: version})))
	return dir, idx
}

func TestLayoutIndexFindsTheVersion(t *testing.T) {
	dir, idx := writeLayout(t, "1.2.3")
	_, d, err := LayoutIndex(dir, "1.2.3")
	require.NoError(t, err)
	want, err := idx.Digest()
	require.NoError(t, err)
	assert.Equal(t, want, d)

	_, _, err = LayoutIndex(dir, "1.2.4")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `has 0 images named "1.2.4"`)
}

func TestPushKeepsTheDigestAndAttachesTheSBOM(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	dir, _ := writeLayout(t, "1.2.3")
	idx, want, err := LayoutIndex(dir, "1.2.3")
	require.NoError(t, err)

	ref, err := PushIndex(idx, host+"/gro/gitea-runner-scaler", "1.2.3", true)
	require.NoError(t, err)
	assert.Equal(t, want.String(), ref.DigestStr(), "the layout's digest is the pushed one")
	tag, err := name.NewTag(host+"/gro/gitea-runner-scaler:1.2.3", name.Insecure)
	require.NoError(t, err)
	got, err := remote.Head(tag)
	require.NoError(t, err)
	assert.Equal(t, want, got.Digest, "the tag names the index")
	assert.Equal(t, types.OCIImageIndex, got.MediaType)
	remoteDigest, err := RemoteDigest(host+"/gro/gitea-runner-scaler:1.2.3", true)
	require.NoError(t, err)
	assert.Equal(t, want, remoteDigest, "release digest reads back what the tag names")
	_, err = RemoteDigest(host+"/gro/gitea-runner-scaler:9.9.9", true)
	require.ErrorContains(t, err, "the digest of "+host+"/gro/gitea-runner-scaler:9.9.9")

	sbom := []byte(`{"spdxVersion":"SPDX-2.3"}`)
	art, err := Attach(ref, sbom, SPDXMediaType, "gitea-runner-scaler-1.2.3.spdx.json")
	require.NoError(t, err)
	refs, err := remote.Referrers(ref)
	require.NoError(t, err)
	m, err := refs.IndexManifest()
	require.NoError(t, err)
	require.Len(t, m.Manifests, 1, "the SBOM is the image's one referrer")
	assert.Equal(t, art.DigestStr(), m.Manifests[0].Digest.String())
	assert.Equal(t, SPDXMediaType, m.Manifests[0].ArtifactType)

	img, err := remote.Image(art)
	require.NoError(t, err)
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	rc, err := layers[0].Compressed()
	require.NoError(t, err)
	content, err := io.ReadAll(rc)
	require.NoError(t, err)
	assert.Equal(t, sbom, content)
	mf, err := img.Manifest()
	require.NoError(t, err)
	require.NotNil(t, mf.Subject)
	assert.Equal(t, want, mf.Subject.Digest)
}

func TestPinChartChangesOnlyTheImageAndVersions(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "chart")
	digest := "sha256:" + strings.Repeat("0f", 32)
	pin := ChartPin{Version: "1.2.3", Repository: "127.0.0.1:5000/gro/gitea-runner-scaler", Digest: digest}
	require.NoError(t, PinChart(chartDir, dst, pin))

	var values struct {
		Image struct{ Repository, Tag, Digest string }
	}
	raw, err := os.ReadFile(filepath.Join(dst, "values.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &values))
	assert.Equal(t, pin.Repository, values.Image.Repository)
	assert.Equal(t, "1.2.3", values.Image.Tag)
	assert.Equal(t, digest, values.Image.Digest)
	assert.Equal(t, 3, changedLines(t, filepath.Join(chartDir, "values.yaml"), filepath.Join(dst, "values.yaml")),
		"only image.repository, tag and digest change; every comment stays")

	var chart struct {
		Version     string            `yaml:"version"`
		AppVersion  string            `yaml:"appVersion"`
		Annotations map[string]string `yaml:"annotations"`
	}
	raw, err = os.ReadFile(filepath.Join(dst, "Chart.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &chart))
	assert.Equal(t, "1.2.3", chart.Version)
	assert.Equal(t, "1.2.3", chart.AppVersion)
	assert.Contains(t, chart.Annotations["artifacthub.io/images"], "image: "+pin.Repository+":1.2.3@"+digest+"\n")
	assert.Equal(t, 3, changedLines(t, filepath.Join(chartDir, "Chart.yaml"), filepath.Join(dst, "Chart.yaml")))

	for _, f := range []string{"templates/cronjob.yaml", "values.schema.json", "README.md"} {
		a, err := os.ReadFile(filepath.Join(chartDir, f))
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(dst, f))
		require.NoError(t, err)
		assert.Equal(t, string(a), string(b), "%s is copied as it is", f)
	}
}

// TestPinChartPinsTheDefaultRunnerImageByDigest: with a runner digest the
// copy's scaler.runnerImage and the annotation's runner entry name the
// annotated runner image by that digest, and nothing else changes beside
// the scaler's pin.
func TestPinChartPinsTheDefaultRunnerImageByDigest(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "chart")
	runnerDigest := "sha256:" + strings.Repeat("ab", 32)
	pin := ChartPin{Version: "1.2.3", Repository: "r/gitea-runner-scaler", Digest: "sha256:" + strings.Repeat("0f", 32), RunnerDigest: runnerDigest}
	require.NoError(t, PinChart(chartDir, dst, pin))

	src, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	image, err := annotatedImage(src, runnerImageName)
	require.NoError(t, err)
	require.NotContains(t, image, "@", "the source chart names the runner image by tag")

	var values struct {
		Scaler struct {
			RunnerImage string `yaml:"runnerImage"`
		}
	}
	raw, err := os.ReadFile(filepath.Join(dst, "values.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &values))
	assert.Equal(t, image+"@"+runnerDigest, values.Scaler.RunnerImage)
	assert.Equal(t, 4, changedLines(t, filepath.Join(chartDir, "values.yaml"), filepath.Join(dst, "values.yaml")),
		"the scaler's three image values and scaler.runnerImage")

	chart, err := os.ReadFile(filepath.Join(dst, "Chart.yaml"))
	require.NoError(t, err)
	got, err := annotatedImage(chart, runnerImageName)
	require.NoError(t, err)
	assert.Equal(t, image+"@"+runnerDigest, got)
	assert.Equal(t, 4, changedLines(t, filepath.Join(chartDir, "Chart.yaml"), filepath.Join(dst, "Chart.yaml")))
}

func TestPinChartLeavesARunnerImageThePlatformChose(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	require.NoError(t, copyDir(chartDir, src))
	raw, err := os.ReadFile(filepath.Join(src, "values.yaml"))
	require.NoError(t, err)
	raw, err = setScalar(raw, "my/runner:1", "scaler", "runnerImage")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(src, "values.yaml"), raw, 0o644))
	err = PinChart(src, filepath.Join(t.TempDir(), "dst"), ChartPin{Version: "1.2.3", Repository: "r/x",
		Digest: "sha256:" + strings.Repeat("0", 64), RunnerDigest: "sha256:" + strings.Repeat("1", 64)})
	require.ErrorContains(t, err, `scaler.runnerImage is "my/runner:1"`)
}

func changedLines(t *testing.T, a, b string) int {
	t.Helper()
	ra, err := os.ReadFile(a)
	require.NoError(t, err)
	rb, err := os.ReadFile(b)
	require.NoError(t, err)
	la, lb := strings.Split(string(ra), "\n"), strings.Split(string(rb), "\n")
	require.Equal(t, len(la), len(lb), "no line is added or removed")
	n := 0
	for i := range la {
		if la[i] != lb[i] {
			n++
		}
	}
	return n
}

func TestSetScalarKeepsTheRestOfTheLine(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "a:\n  b: old\n", "a:\n  b: \"new\"\n"},
		{"empty quoted", "a:\n  b: \"\"\n", "a:\n  b: \"new\"\n"},
		{"single quoted with comment", "a:\n  b: 'o ld' # why\n", "a:\n  b: \"new\" # why\n"},
		{"plain with comment", "a:\n  b: old  # why\nc: 1\n", "a:\n  b: \"new\"  # why\nc: 1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := setScalar([]byte(tc.in), "new", "a", "b")
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(out))
		})
	}
	_, err := setScalar([]byte("a:\n  c: 1\n"), "new", "a", "b")
	require.EqualError(t, err, "a.b is missing")
	_, err = setScalar([]byte("a:\n  b: |\n    x\n"), "new", "a", "b")
	require.EqualError(t, err, "a.b is a block scalar")
}

func TestPinChartRefusesAChartWhoseImagesAnnotationDoesNotNameTheImage(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	require.NoError(t, copyDir(chartDir, src))
	raw, err := os.ReadFile(filepath.Join(src, "Chart.yaml"))
	require.NoError(t, err)
	raw = []byte(strings.Replace(string(raw), "gitea-runner-scaler:0.", "gitea-runner-scaler:9.", 1))
	require.NoError(t, os.WriteFile(filepath.Join(src, "Chart.yaml"), raw, 0o644))
	err = PinChart(src, filepath.Join(t.TempDir(), "dst"), ChartPin{Version: "1.2.3", Repository: "r/x", Digest: "sha256:" + strings.Repeat("0", 64)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "must name \"ghcr.io/gitea-runner-operator/gitea-runner-scaler:0.1.0\" exactly once")
}

func TestVersionMustBeSemVer(t *testing.T) {
	for v, ok := range map[string]bool{"1.2.3": true, "0.1.0-rc.1": true, "v1.2.3": false, "1.2": false, "e0635c5": false, "1.2.3+meta": false, "01.2.3": false} {
		assert.Equal(t, ok, checkVersion(v) == nil, v)
	}
}

// TestChartMetadataIsWhatArtifactHubReads holds Chart.yaml's metadata to
// what ArtifactHub parses (https://artifacthub.io/docs/topics/annotations/helm/):
// each annotation that holds YAML parses into its documented fields.
func TestChartMetadataIsWhatArtifactHubReads(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	var chart struct {
		Home        string              `yaml:"home"`
		Sources     []string            `yaml:"sources"`
		Maintainers []map[string]string `yaml:"maintainers"`
		Annotations map[string]string   `yaml:"annotations"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &chart))
	const repo = "https://github.com/gitea-runner-operator/gitea-runner-operator"
	assert.Equal(t, repo, chart.Home)
	assert.Contains(t, chart.Sources, repo)
	require.NotEmpty(t, chart.Maintainers)
	for _, m := range chart.Maintainers {
		assert.NotEmpty(t, m["name"], "a maintainer has a name")
	}
	assert.Equal(t, "Apache-2.0", chart.Annotations["artifacthub.io/license"], "the LICENSE file's")
	for _, k := range []string{"artifacthub.io/operator", "artifacthub.io/prerelease", "artifacthub.io/containsSecurityUpdates"} {
		assert.Contains(t, []string{"true", "false"}, chart.Annotations[k], k)
	}

	list := func(key string) []map[string]string {
		var out []map[string]string
		require.NoError(t, yaml.Unmarshal([]byte(chart.Annotations[key]), &out), key)
		require.NotEmpty(t, out, key)
		return out
	}
	for _, l := range list("artifacthub.io/links") {
		assert.Regexp(t, `^https://`, l["url"], "link %q", l["name"])
		assert.NotEmpty(t, l["name"])
	}
	kinds := []string{"added", "changed", "deprecated", "removed", "fixed", "security"}
	for _, c := range list("artifacthub.io/changes") {
		assert.Contains(t, kinds, c["kind"])
		assert.NotEmpty(t, c["description"])
	}
	images := map[string]string{}
	for _, im := range list("artifacthub.io/images") {
		images[im["name"]] = im["image"]
	}
	assert.Contains(t, images, scalerImageName, "make release pins this entry")
	for _, c := range list("artifacthub.io/crds") {
		assert.Equal(t, "RunnerGroup", c["kind"])
		assert.Equal(t, "runnergroups.gitea.bpg.pw", c["name"])
		_, err := os.Stat(filepath.Join("../../../../crds", "gitea.bpg.pw_"+strings.Split(c["name"], ".")[0]+".yaml"))
		assert.NoError(t, err, "the CRD the annotation names is in crds/")
	}
}
