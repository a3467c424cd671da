// Command image builds the scaler's OCI image without a Docker engine (these
// machines have none) and writes it as an OCI image layout: from scratch,
// the static binary, the CA bundle, /etc/passwd and /etc/group with the
// non-root user the chart runs as, and the OCI labels. `make image` calls
// it; the Dockerfile at the repository's root builds the same image for
// those who have Docker.
//
//	image -out bin/image -binary linux/amd64=PATH [-binary linux/arm64=PATH] \
//	      -ca /etc/ssl/certs/ca-certificates.crt -rootfs rootfs \
//	      -source URL -version V -revision SHA -created UNIX
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
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

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	s := Spec{Binaries: binaries{}}
	out := fs.String("out", "", "OCI image layout folder to write (replaced)")
	fs.Var(binaries(s.Binaries), "binary", "PLATFORM=PATH of a static scaler binary (repeat per platform)")
	fs.StringVar(&s.CAFile, "ca", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to ship")
	fs.StringVar(&s.RootFS, "rootfs", "rootfs", "folder of files copied as they are")
	fs.StringVar(&s.Source, "source", "", "org.opencontainers.image.source")
	fs.StringVar(&s.Version, "version", "", "org.opencontainers.image.version")
	fs.StringVar(&s.Revision, "revision", "", "org.opencontainers.image.revision")
	created := fs.String("created", "0", "creation time, Unix seconds (the commit's, for a reproducible digest)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("-out is required")
	}
	secs, err := strconv.ParseInt(*created, 10, 64)
	if err != nil {
		return fmt.Errorf("-created: %w", err)
	}
	s.Created = time.Unix(secs, 0).UTC()
	idx, err := Build(s)
	if err != nil {
		return err
	}
	if err := WriteLayout(*out, s.Version, idx); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: %s (%s)\n", *out, d, s.Version)
	return nil
}
