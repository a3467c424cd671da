// Command release is the part of `make release` that speaks to a registry
// or edits the chart; the Makefile builds the binaries, the image layout
// (scripts/tools/image) and packages and pushes the chart with helm.
//
//	release sbom  -layout bin/image -version V -repository REPO -binary linux/amd64=PATH ... -created UNIX -source URL -ca FILE [-ca-version V] -out FILE
//	release push  -layout bin/image -version V -repository REPO [-sbom FILE] [-plain-http] [-digest-file FILE]
//	release chart -chart DIR -out DIR -version V -repository REPO -digest sha256:... [-runner-digest sha256:...]
//	release digest -ref IMAGE [-plain-http]
//
// The SBOM names the image by the digest it gets when pushed, which is the
// layout's: pushing changes no byte.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

type binaries map[string]string

func (b binaries) String() string { return fmt.Sprint(map[string]string(b)) }
func (b binaries) Set(v string) error {
	platform, file, ok := strings.Cut(v, "=")
	if !ok || platform == "" || file == "" {
		return fmt.Errorf("want PLATFORM=PATH, got %q", v)
	}
	b[platform] = file
	return nil
}

// semver is what helm accepts as a chart version and what the image is
// tagged with (no "+build": an OCI tag cannot hold a plus).
var semver = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

func checkVersion(v string) error {
	if !semver.MatchString(v) {
		return fmt.Errorf("-version %q: want a semantic version x.y.z or x.y.z-pre, without a leading v", v)
	}
	return nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("want a command: sbom, push, chart or digest")
	}
	switch args[0] {
	case "sbom":
		return runSBOM(args[1:])
	case "push":
		return runPush(args[1:])
	case "chart":
		return runChart(args[1:])
	case "digest":
		return runDigest(args[1:])
	}
	return fmt.Errorf("unknown command %q: want sbom, push, chart or digest", args[0])
}

func runSBOM(args []string) error {
	fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
	s := SBOMSpec{Binaries: binaries{}}
	dir := fs.String("layout", "", "OCI image layout of the image")
	fs.StringVar(&s.Version, "version", "", "release version (names the image in the layout)")
	fs.StringVar(&s.Repository, "repository", "", "image repository it is pushed to")
	fs.Var(binaries(s.Binaries), "binary", "PLATFORM=PATH of the scaler binary in that platform's image (repeat)")
	fs.StringVar(&s.Source, "source", "", "the project's repository URL")
	fs.StringVar(&s.CABundle, "ca", "", "the CA bundle file the image builder copied into the image")
	fs.StringVar(&s.CABundleVersion, "ca-version", "", "its package's version, if known")
	created := fs.String("created", "", "creation time, Unix seconds (the commit's)")
	out := fs.String("out", "", "SPDX JSON file to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *out == "" {
		return errors.New("sbom: -layout and -out are required")
	}
	if err := checkVersion(s.Version); err != nil {
		return err
	}
	secs, err := strconv.ParseInt(*created, 10, 64)
	if err != nil {
		return fmt.Errorf("-created: %w", err)
	}
	s.Created = time.Unix(secs, 0)
	if _, s.Digest, err = LayoutIndex(*dir, s.Version); err != nil {
		return err
	}
	doc, err := BuildSBOM(s)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(*out, doc, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s (SPDX 2.3) for %s@%s\n", *out, s.Repository, s.Digest)
	return nil
}

func runPush(args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	dir := fs.String("layout", "", "OCI image layout to push from")
	version := fs.String("version", "", "release version: the image's name in the layout and its tag")
	repository := fs.String("repository", "", "image repository to push to (REGISTRY/NAME)")
	sbom := fs.String("sbom", "", "SPDX JSON file to attach to the image (OCI referrer)")
	plainHTTP := fs.Bool("plain-http", false, "speak plain HTTP to the registry (a test registry on loopback)")
	digestFile := fs.String("digest-file", "", "file to write the pushed image's digest to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *repository == "" {
		return errors.New("push: -layout and -repository are required")
	}
	if err := checkVersion(*version); err != nil {
		return err
	}
	idx, _, err := LayoutIndex(*dir, *version)
	if err != nil {
		return err
	}
	ref, err := PushIndex(idx, *repository, *version, *plainHTTP)
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s:%s as %s\n", *repository, *version, ref)
	if *sbom != "" {
		raw, err := os.ReadFile(*sbom)
		if err != nil {
			return err
		}
		art, err := Attach(ref, raw, SPDXMediaType, filepath.Base(*sbom))
		if err != nil {
			return err
		}
		fmt.Printf("attached %s to it as %s\n", filepath.Base(*sbom), art)
	}
	if *digestFile != "" {
		return os.WriteFile(*digestFile, []byte(ref.DigestStr()+"\n"), 0o644)
	}
	return nil
}

func runChart(args []string) error {
	fs := flag.NewFlagSet("chart", flag.ContinueOnError)
	src := fs.String("chart", "", "chart folder to copy")
	dst := fs.String("out", "", "folder to write the pinned copy to (replaced)")
	var pin ChartPin
	fs.StringVar(&pin.Version, "version", "", "release version (chart version, appVersion, image tag)")
	fs.StringVar(&pin.Repository, "repository", "", "image repository the image was pushed to")
	fs.StringVar(&pin.Digest, "digest", "", "the pushed image's digest (sha256:...)")
	fs.StringVar(&pin.RunnerDigest, "runner-digest", "", "digest of the runner image Chart.yaml's artifacthub.io/images names (release digest); empty leaves it by tag")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *src == "" || *dst == "" || pin.Repository == "" {
		return errors.New("chart: -chart, -out and -repository are required")
	}
	if err := checkVersion(pin.Version); err != nil {
		return err
	}
	if _, err := v1.NewHash(pin.Digest); err != nil {
		return fmt.Errorf("-digest %q: %w", pin.Digest, err)
	}
	if pin.RunnerDigest != "" {
		if _, err := v1.NewHash(pin.RunnerDigest); err != nil {
			return fmt.Errorf("-runner-digest %q: %w", pin.RunnerDigest, err)
		}
	}
	if err := PinChart(*src, *dst, pin); err != nil {
		return err
	}
	fmt.Printf("wrote %s: version %s, image %s:%s@%s, default runner image by digest %q\n", *dst, pin.Version, pin.Repository, pin.Version, pin.Digest, pin.RunnerDigest)
	return nil
}

// runDigest prints the digest a registry gives for an image reference (of
// an index for a multi-platform image): what `release chart -runner-digest`
// pins.
func runDigest(args []string) error {
	fs := flag.NewFlagSet("digest", flag.ContinueOnError)
	ref := fs.String("ref", "", "image reference, e.g. docker.io/gitea/runner:3.1.0-dind-rootless")
	plainHTTP := fs.Bool("plain-http", false, "speak plain HTTP to the registry")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ref == "" {
		return errors.New("digest: -ref is required")
	}
	d, err := RemoteDigest(*ref, *plainHTTP)
	if err != nil {
		return err
	}
	fmt.Println(d)
	return nil
}
