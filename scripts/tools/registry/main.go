// Command registry is distribution's OCI registry (the one behind Docker
// Hub and most self-hosted registries) with only the filesystem storage
// driver: the test bed runs it on loopback so that `make release` pushes to
// a real registry in the release e2e test. Upstream's cmd/registry also
// links the S3, Azure and GCS drivers, which the bed never uses and which
// more than double a cold build.
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
