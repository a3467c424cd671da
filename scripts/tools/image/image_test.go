package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/pem"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// entry is one file of an image's flattened filesystem.
type entry struct {
	mode     int64
	uid, gid int
	typ      byte
	content  []byte
}

// filesOf flattens the image's layers as a runtime would.
func filesOf(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]entry{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		content, err := io.ReadAll(tr)
		require.NoError(t, err)
		out["/"+strings.TrimSuffix(hdr.Name, "/")] = entry{mode: hdr.Mode, uid: hdr.Uid, gid: hdr.Gid, typ: hdr.Typeflag, content: content}
	}
}

// checkImage holds one platform's image to what the chart and the
// Dockerfile expect of it.
func checkImage(t *testing.T, img v1.Image, platform string, labels map[string]string) map[string]entry {
	t.Helper()
	mt, err := img.MediaType()
	require.NoError(t, err)
	assert.Equal(t, types.OCIManifestSchema1, mt, "an OCI manifest")
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, platform, cfg.OS+"/"+cfg.Architecture)
	assert.Equal(t, []string{"/usr/local/bin/gitea-runner-scaler"}, cfg.Config.Entrypoint, "entrypoint")
	assert.Equal(t, []string{"run"}, cfg.Config.Cmd, "cmd")
	assert.Equal(t, "65532:65532", cfg.Config.User, "the chart's runAsUser:runAsGroup")
	assert.Contains(t, cfg.Config.Env, "PATH=/usr/local/bin", "the chart calls the binary by name")
	assert.Equal(t, labels, cfg.Config.Labels)

	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1, "from scratch: one layer, nothing beneath it")

	files := filesOf(t, img)
	var names []string
	for n, e := range files {
		if e.typ == tar.TypeReg {
			names = append(names, n)
		}
		assert.Zero(t, e.uid, "%s is root-owned, so the non-root user cannot change it", n)
		assert.Zero(t, e.gid, n)
	}
	assert.ElementsMatch(t, []string{"/usr/local/bin/gitea-runner-scaler", "/etc/ssl/certs/ca-certificates.crt", "/etc/passwd", "/etc/group"}, names)
	assert.Equal(t, int64(0o755), files["/usr/local/bin/gitea-runner-scaler"].mode)
	assert.Contains(t, string(files["/etc/passwd"].content), "nonroot:x:65532:65532:", "the user has a name, as some tools want")
	assert.Contains(t, string(files["/etc/group"].content), "nonroot:x:65532:")
	return files
}

// assertStatic fails for a binary that needs a dynamic loader, which an
// image from scratch does not have.
func assertStatic(t *testing.T, bin []byte) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(bin))
	require.NoError(t, err, "an ELF binary")
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "a static binary has no interpreter")
	}
}

func certCount(t *testing.T, bundle []byte) int {
	t.Helper()
	n := 0
	for {
		var b *pem.Block
		b, bundle = pem.Decode(bundle)
		if b == nil {
			return n
		}
		_, err := x509.ParseCertificate(b.Bytes)
		require.NoError(t, err)
		n++
	}
}

// fixture writes a binary, a CA bundle and a rootfs into a temp folder.
func fixture(t *testing.T) Spec {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	return Spec{
		Binaries: map[string]string{"linux/amd64": write("amd64/bin", "amd64 binary"), "linux/arm64": write("arm64/bin", "arm64 binary")},
		CAFile:   write("ca.crt", "bundle"),
		RootFS:   "rootfs",
		Source:   "https://example.test/src", Version: "v1.2.3", Revision: "abc123",
		Created: time.Unix(1700000000, 0).UTC(),
	}
}

func TestBuildMakesOneImagePerPlatformWithTheSameContent(t *testing.T) {
	s := fixture(t)
	idx, err := Build(s)
	require.NoError(t, err)
	mf, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, mf.Manifests, 2)
	want := map[string]string{
		"org.opencontainers.image.source": "https://example.test/src", "org.opencontainers.image.version": "v1.2.3",
		"org.opencontainers.image.revision": "abc123", "org.opencontainers.image.title": "gitea-runner-scaler",
	}
	for _, d := range mf.Manifests {
		platform := d.Platform.OS + "/" + d.Platform.Architecture
		img, err := idx.Image(d.Digest)
		require.NoError(t, err)
		files := checkImage(t, img, platform, want)
		assert.Equal(t, d.Platform.Architecture+" binary", string(files["/usr/local/bin/gitea-runner-scaler"].content), "each platform gets its own binary")
		assert.Equal(t, "bundle", string(files["/etc/ssl/certs/ca-certificates.crt"].content))
		cfg, err := img.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, s.Created, cfg.Created.UTC())
	}
}

func TestBuildIsReproducible(t *testing.T) {
	s := fixture(t)
	a, err := Build(s)
	require.NoError(t, err)
	b, err := Build(s)
	require.NoError(t, err)
	da, err := a.Digest()
	require.NoError(t, err)
	db, err := b.Digest()
	require.NoError(t, err)
	assert.Equal(t, da, db, "one commit, one digest")

	s.Revision = "def456"
	c, err := Build(s)
	require.NoError(t, err)
	dc, err := c.Digest()
	require.NoError(t, err)
	assert.NotEqual(t, da, dc, "the revision label is part of the image")
}

func TestBuildRefusesAnIncompleteSpec(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Spec)
		wantErr string
	}{
		{"no binary", func(s *Spec) { s.Binaries = nil }, "no binary given"},
		{"not linux", func(s *Spec) { s.Binaries = map[string]string{"windows/amd64": "x"} }, `platform "windows/amd64": want linux/ARCH`},
		{"no version", func(s *Spec) { s.Version = "" }, "version must not be empty"},
		{"no revision", func(s *Spec) { s.Revision = " " }, "revision must not be empty"},
		{"no source", func(s *Spec) { s.Source = "" }, "source must not be empty"},
		{"missing binary file", func(s *Spec) { s.Binaries = map[string]string{"linux/amd64": "/nonexistent/bin"} }, "/nonexistent/bin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fixture(t)
			tt.mutate(&s)
			_, err := Build(s)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestWriteLayoutNamesTheIndexByVersion(t *testing.T) {
	s := fixture(t)
	idx, err := Build(s)
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "image")
	require.NoError(t, WriteLayout(dir, s.Version, idx))
	lp, err := layout.ImageIndexFromPath(dir)
	require.NoError(t, err)
	mf, err := lp.IndexManifest()
	require.NoError(t, err)
	require.Len(t, mf.Manifests, 1)
	assert.Equal(t, types.OCIImageIndex, mf.Manifests[0].MediaType)
	assert.Equal(t, "v1.2.3", mf.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
	want, err := idx.Digest()
	require.NoError(t, err)
	assert.Equal(t, want, mf.Manifests[0].Digest)
}

// TestReleaseImage checks the image `make image` wrote: `make test-image`
// sets IMAGE_LAYOUT, IMAGE_VERSION and IMAGE_REVISION.
func TestReleaseImage(t *testing.T) {
	dir := os.Getenv("IMAGE_LAYOUT")
	if dir == "" {
		t.Skip("IMAGE_LAYOUT is not set: run `make test-image`")
	}
	version, revision := os.Getenv("IMAGE_VERSION"), os.Getenv("IMAGE_REVISION")
	require.NotEmpty(t, version)
	require.NotEmpty(t, revision)

	lp, err := layout.ImageIndexFromPath(dir)
	require.NoError(t, err)
	top, err := lp.IndexManifest()
	require.NoError(t, err)
	require.Len(t, top.Manifests, 1)
	assert.Equal(t, version, top.Manifests[0].Annotations[RefName])
	idx, err := lp.ImageIndex(top.Manifests[0].Digest)
	require.NoError(t, err)
	mf, err := idx.IndexManifest()
	require.NoError(t, err)

	want := map[string]string{
		LabelSource: "https://github.com/gitea-runner-operator/gitea-runner-operator", LabelVersion: version,
		LabelRevision: revision, LabelTitle: "gitea-runner-scaler",
	}
	ran := false
	for _, d := range mf.Manifests {
		platform := d.Platform.OS + "/" + d.Platform.Architecture
		t.Run(platform, func(t *testing.T) {
			img, err := idx.Image(d.Digest)
			require.NoError(t, err)
			files := checkImage(t, img, platform, want)
			system, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
			require.NoError(t, err)
			bundle := files["/etc/ssl/certs/ca-certificates.crt"].content
			assert.Equal(t, system, bundle, "Debian's bundle, as it is")
			assert.Greater(t, certCount(t, bundle), 50, "a real CA bundle")
			assertStatic(t, files["/usr/local/bin/gitea-runner-scaler"].content)
			if platform != runtime.GOOS+"/"+runtime.GOARCH {
				return
			}
			// The binary is static: it runs here as it would in the
			// empty image.
			bin := filepath.Join(t.TempDir(), "gitea-runner-scaler")
			require.NoError(t, os.WriteFile(bin, files["/usr/local/bin/gitea-runner-scaler"].content, 0o755))
			out, err := exec.Command(bin, "version").CombinedOutput()
			require.NoError(t, err, string(out))
			assert.Equal(t, version+"\n", string(out), "the binary says the version the label says")
			ran = true
		})
	}
	assert.True(t, ran, "the image has a binary for %s/%s that was run", runtime.GOOS, runtime.GOARCH)
}
