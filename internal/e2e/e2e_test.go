//go:build e2e

// End-to-end tests on the test bed's real parts: a kube-apiserver with the
// real Job, CronJob, garbage-collector and TTL controllers, the kube-scheduler,
// fake nodes whose pods run as local processes (the scaler image runs
// bin/gitea-runner-scaler, runner images run Gitea's real runner, gitea-runner
// built from its source, through the images' entrypoint script run.sh, and
// the jobs' run: steps on the host), a real Gitea, and the Helm chart installed with
// the helm binary, the way a platform team installs it.
//
// The tests in scaler_e2e_test.go and chart_e2e_test.go each install their
// own release into namespaces of their own (prefix "e2e-"), use Gitea
// organisations, users and repositories with names unique to the run, and
// run in parallel. Every test file uses the one bed (bed_test.go) and the
// helpers beside it, one file per concern: names, redaction, waits, cluster
// objects, RunnerGroups, the usual scene (scene_test.go: servedGroup),
// manifests, helm, serving and dumps. The fault tests (faults_*_test.go)
// run scaler passes themselves (scalerpass_test.go) in a scene of their own
// (faultscene_test.go), through proxies in front of Gitea
// (faultproxy_test.go) and the API server (apiproxy_test.go). Gitea is set up through giteasetup,
// the client scripts/testbed and scripts/demo share; gitea_test.go fits it
// to tests. Run with:
//
//	scripts/testbed up
//	go test -count=1 -tags e2e -timeout 25m -v ./internal/e2e/
//
// E2E_KEEP=1 keeps the namespaces, releases, organisations and repositories
// of a run for inspection.
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

func TestMain(m *testing.M) {
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
