//go:build e2e

package e2e

import (
	"flag"
	"os"
	"testing"
)

// e2eParallel is how many of the e2e tests run at once unless -parallel is
// given. The tests spend their time waiting on the cluster and Gitea, not on
// the CPU, so go test's default (GOMAXPROCS, 2 here) would only make the
// suite twice as long.
const e2eParallel = "8"

// Run is every area's TestMain: it sets -parallel to e2eParallel unless
// the command line gives it, then runs the area's tests.
func Run(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			explicit = true
		}
	})
	if !explicit {
		if err := flag.Set("test.parallel", e2eParallel); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
