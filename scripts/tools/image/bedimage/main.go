// Command bedimage puts images in the test bed's registry for its real
// node, which pulls them as a cluster pulls from any registry:
//
//	bedimage binary -file PATH -ref REF       a one-binary image from scratch (the pause image)
//	bedimage layout -dir DIR -name N -ref REF the image index named N in an OCI layout (make image's)
//	bedimage runner -base ROOTFS.tar.gz ...   Gitea's three runner flavours of one version over a
//	                                          Debian root file system (runner.go)
//	bedimage job -base ROOTFS.tar.gz -ref REF the image a job's container runs
//
// The bed's registry speaks plain HTTP on loopback, so every push does.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bedimage:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("want a subcommand: binary, layout, runner or job")
	}
	switch args[0] {
	case "binary":
		return runBinary(args[1:])
	case "layout":
		return runLayout(args[1:])
	case "runner":
		return runRunner(args[1:])
	case "job":
		return runJob(args[1:])
	}
	return fmt.Errorf("unknown subcommand %q", args[0])
}

func runBinary(args []string) error {
	fs := flag.NewFlagSet("binary", flag.ContinueOnError)
	file := fs.String("file", "", "static binary: the image's one file, at /<its name>, and its entrypoint")
	ref := fs.String("ref", "", "REGISTRY/NAME:TAG to push to")
	user := fs.String("user", "65535:65535", "the image's user")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" || *ref == "" {
		return errors.New("binary: -file and -ref are required")
	}
	img, err := BinaryImage(*file, *user)
	if err != nil {
		return err
	}
	return push(img, *ref)
}

// BinaryImage is an image of one static binary at /NAME, its entrypoint.
func BinaryImage(file, user string) (v1.Image, error) {
	bin := "/" + path.Base(file)
	layer, err := binaryLayer(file, bin)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint = []string{bin}
	cf.Config.User = user
	return mutate.ConfigFile(img, cf)
}

func runLayout(args []string) error {
	fs := flag.NewFlagSet("layout", flag.ContinueOnError)
	dir := fs.String("dir", "", "OCI image layout")
	nm := fs.String("name", "", "the index's name in the layout (make image's VERSION)")
	ref := fs.String("ref", "", "REGISTRY/NAME:TAG to push to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *nm == "" || *ref == "" {
		return errors.New("layout: -dir, -name and -ref are required")
	}
	root, err := layout.ImageIndexFromPath(*dir)
	if err != nil {
		return err
	}
	m, err := root.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range m.Manifests {
		if d.Annotations["org.opencontainers.image.ref.name"] != *nm {
			continue
		}
		idx, err := root.ImageIndex(d.Digest)
		if err != nil {
			return err
		}
		r, err := name.NewTag(*ref, name.Insecure)
		if err != nil {
			return err
		}
		if err := remote.WriteIndex(r, idx); err != nil {
			return fmt.Errorf("push %s: %w", r, err)
		}
		fmt.Printf("pushed %s@%s\n", r, d.Digest)
		return nil
	}
	return fmt.Errorf("the layout %s has no index named %q", *dir, *nm)
}
