package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image is. The Dockerfile at the repository's root says the same
// in its own words; dockerfile_test.go holds the two together.
const (
	// BinaryPath is where the scaler lands; the chart calls it by name, so
	// its folder is on PATH.
	BinaryPath = "/usr/local/bin/gitea-runner-scaler"
	// CAPath is Go's first choice of CA bundle on Linux (crypto/x509), so
	// the scaler trusts public CAs with no SSL_CERT_FILE set.
	CAPath = "/etc/ssl/certs/ca-certificates.crt"
	// User is the chart's securityContext runAsUser:runAsGroup.
	User = "65532:65532"
	// Path is the image's PATH.
	Path = "PATH=/usr/local/bin"

	LabelSource   = "org.opencontainers.image.source"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelTitle    = "org.opencontainers.image.title"
	// RefName names the image in the OCI layout's index.json, which is
	// how skopeo's oci:DIR:TAG finds it.
	RefName = "org.opencontainers.image.ref.name"
)

// Entrypoint and Cmd: `run` unless the pod says otherwise.
var (
	Entrypoint = []string{BinaryPath}
	Cmd        = []string{"run"}
)

// Spec is one build of the image.
type Spec struct {
	// Binaries maps a platform ("linux/amd64") to its static scaler binary.
	Binaries map[string]string
	// CAFile is the CA bundle copied to CAPath (Debian's, on these machines).
	CAFile string
	// RootFS holds the files every image carries as they are (etc/passwd,
	// etc/group); the Dockerfile copies the same folder.
	RootFS   string
	Source   string
	Version  string
	Revision string
	// Created stamps the config and every file, so one commit always gives
	// one digest.
	Created time.Time
}

func (s Spec) validate() error {
	var errs []error
	if len(s.Binaries) == 0 {
		errs = append(errs, errors.New("no binary given"))
	}
	for p := range s.Binaries {
		if _, err := v1.ParsePlatform(p); err != nil || !strings.HasPrefix(p, "linux/") {
			errs = append(errs, fmt.Errorf("platform %q: want linux/ARCH", p))
		}
	}
	for name, v := range map[string]string{"source": s.Source, "version": s.Version, "revision": s.Revision, "CA file": s.CAFile, "rootfs": s.RootFS} {
		if strings.TrimSpace(v) == "" {
			errs = append(errs, fmt.Errorf("%s must not be empty", name))
		}
	}
	return errors.Join(errs...)
}

// Build makes one image per platform and the index over them.
func Build(s Spec) (v1.ImageIndex, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	platforms := make([]string, 0, len(s.Binaries))
	for p := range s.Binaries {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		img, err := buildOne(s, p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		plat, _ := v1.ParsePlatform(p)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				Platform: plat,
			},
		})
	}
	return idx, nil
}

func buildOne(s Spec, platform string) (v1.Image, error) {
	plat, err := v1.ParsePlatform(platform)
	if err != nil {
		return nil, err
	}
	files, err := s.files(s.Binaries[platform])
	if err != nil {
		return nil, err
	}
	layerTar, err := tarOf(files, s.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: s.Created}, CreatedBy: "gitea-runner-operator scripts/tools/image",
	}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = plat.OS, plat.Architecture, plat.Variant
	cfg.Created = v1.Time{Time: s.Created}
	cfg.Author = s.Source
	cfg.Config = v1.Config{
		User:       User,
		Env:        []string{Path},
		Entrypoint: Entrypoint,
		Cmd:        Cmd,
		Labels:     s.Labels(),
	}
	return mutate.ConfigFile(img, cfg)
}

// Labels are the image's OCI labels.
func (s Spec) Labels() map[string]string {
	return map[string]string{
		LabelSource:   s.Source,
		LabelVersion:  s.Version,
		LabelRevision: s.Revision,
		LabelTitle:    "gitea-runner-scaler",
	}
}

// file is one entry of the layer: content from a file on disk.
type file struct {
	name string // inside the image, without the leading /
	from string
	mode int64
}

func (s Spec) files(binary string) ([]file, error) {
	files := []file{
		{name: strings.TrimPrefix(BinaryPath, "/"), from: binary, mode: 0o755},
		{name: strings.TrimPrefix(CAPath, "/"), from: s.CAFile, mode: 0o644},
	}
	err := filepath.WalkDir(s.RootFS, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(s.RootFS, p)
		if err != nil {
			return err
		}
		files = append(files, file{name: filepath.ToSlash(rel), from: p, mode: 0o644})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rootfs: %w", err)
	}
	return files, nil
}

// tarOf writes the files and their folders, root-owned and stamped with
// one time, in a fixed order, as Docker's COPY would lay them down.
func tarOf(files []file, mtime time.Time) ([]byte, error) {
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		content, err := os.ReadFile(f.from)
		if err != nil {
			return nil, err
		}
		if err := writeDirs(tw, dirs, path.Dir(f.name), mtime); err != nil {
			return nil, err
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(content)), ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(content); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeDirs(tw *tar.Writer, done map[string]bool, dir string, mtime time.Time) error {
	if dir == "." || dir == "" || done[dir] {
		return nil
	}
	if err := writeDirs(tw, done, path.Dir(dir), mtime); err != nil {
		return err
	}
	done[dir] = true
	return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX})
}

// WriteLayout writes the index as an OCI image layout in dir, replacing
// what was there. index.json names the multi-platform index by the
// version, so `skopeo copy --all oci:DIR:VERSION` and `crane push DIR REF`
// both find it.
func WriteLayout(dir, version string, idx v1.ImageIndex) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{RefName: version}))
}
