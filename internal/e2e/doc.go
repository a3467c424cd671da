//go:build e2e

// Package e2e is the framework of the end-to-end tests: the test bed's real
// parts, a kube-apiserver with the real Job, CronJob, garbage-collector and
// TTL controllers, the kube-scheduler, fake nodes whose pods run as local
// processes (the scaler image runs bin/gitea-runner-scaler, runner images
// run Gitea's real runner, gitea-runner built from its source, through the
// images' entrypoint script run.sh, and the jobs' run: steps on the host),
// a real Gitea, and the Helm chart installed with the helm binary, the way
// a platform team installs it.
//
// The tests live in one package per area beside it, each with the build tag
// e2e: admission (the CRD's schema and CEL rules, the policies), bench (the
// scale and latency benchmarks), chart (installing, upgrading, uninstalling
// and configuring the chart), faults (Gitea and the API server failing under
// a pass), lifecycle (reaping runners and registrations), node (the real
// node's containers), runners (Gitea's real runner in its pod), scaler (the
// pass serving jobs, status and why) and tenancy (what one tenant
// cannot do to another). Tests install their own releases into namespaces of
// their own (prefix "e2e-"), use Gitea organisations, users and
// repositories with names unique to the run, and run in parallel. Gitea is
// set up through giteasetup, the client scripts/testbed and scripts/demo
// share.
//
// One file-name rule (cmd/gitea-runner-scaler's house test checks it):
// this package holds no test, only <concern>.go files, each named in the
// map below; an area package holds only _test.go files: main_test.go with
// its TestMain and nothing else, and <subject>_test.go files that each hold
// a Test or Benchmark function, their names repeating neither "e2e" nor
// the area. A helper that tests of two areas call lives here.
//
//	apiproxy.go     a proxy in front of the API server, for lost answers and slow writes
//	bed.go          the bed: one connection per test binary, the CRD, test contexts
//	cluster.go      namespaces, token Secrets, runner Jobs and their pods, RBAC
//	doc.go          this map
//	dump.go         what a failure shows of the namespaces under test, pod logs
//	faultproxy.go   a fault-injecting proxy in front of Gitea
//	faultscene.go   the scene of a fault test: runner pods that cannot start
//	featuregates.go the API server's feature gates, read from its /metrics
//	gitea.go        Gitea scenes (orgs, users, repositories, tokens, workflows) and jobs
//	groups.go       RunnerGroups: specs, create, read, patch, wait for passes
//	helm.go         installing the chart with the values every release starts from
//	jobwatch.go     watching one runner Job from the side
//	loopscaler.go   a looping scaler the test runs, with its /metrics and webhook
//	main.go         Run, every area's TestMain
//	manifests.go    reading YAML files and applying them as they are
//	memcg.go        a memory cgroup of its own for a scaler process
//	names.go        the product's names, and names unique to a run
//	redact.go       every token a test sees, kept out of messages and dumps
//	runnerimages.go Gitea's runner images for the real node, pushed on first use
//	scalerpass.go   scaler passes the test runs itself as local processes
//	scene.go        the usual scene: the chart serving one group of an org
//	serving.go      one runner Job per queued Gitea job, and hold files
//	share.go        how the areas' binaries share the bed: Parallel, Exclusive
//	stats.go        percentiles of measured waits
//	wait.go         polling until a condition holds
//
// Every top-level test starts with e2e.Parallel(t) or, when it needs the
// bed to itself (the quick start, the CRD's reinstall, the API server's
// restart, the benchmarks), e2e.Exclusive(t) with a comment saying why; a
// parallel subtest starts with e2e.ParallelSub(t). The house test checks
// it. The two hold file locks in the bed's folder, so the
// areas run at once (-p) and still see the bed as one binary did.
//
// Run with:
//
//	scripts/testbed up
//	go test -count=1 -p 4 -tags e2e -timeout 40m -v ./internal/e2e/...
//
// E2E_KEEP=1 keeps the namespaces, releases, organisations and
// repositories of a run for inspection.
package e2e
