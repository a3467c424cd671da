// Package cli is the scaler's command line: flags (each also read from an
// environment variable, which is how the Helm chart configures it), their
// validation, logging, and the wiring of real clients into the scaler,
// whose Run makes the passes.
//
// The run command's flags come in groups, a file each, that check their
// own flags (TestEveryFileMapNamesEveryFile keeps this map whole):
//
//	cli.go        the root command, Main, the exit codes
//	version.go    what this build is: -X, else the Go build info
//	run.go        `run`: its groups, the rules that tie two, runWith
//	kubeconfig.go where the cluster is, for every command
//	kubeclient.go how fast and how widely run reads it
//	groupselection.go  the RunnerGroups a listener serves
//	pass.go       one pass: dry run, spawn TTL, workers, group timeout
//	loop.go       --loop, its interval and the endpoints only a loop serves
//	webhook.go    Gitea's webhook: address and secret
//	observability.go  logs, and the benchmark's heap profile
//	heapprofile.go  the pass observer that writes it
//	gitea.go      the bounds of the requests to Gitea
//	giteapolicy.go  where a group's API token may be sent (run and why)
//	runner.go     the runner pods: image, labels, template, config layers
//	runnercache.go  the shared cache, and the runner pods' init command
//	lifecycle.go  when runners go: idle, never started, deleted namespaces
//	tenancy.go    what a RunnerGroup's writer may make the scaler do
//	wiring.go     the real clients, the scaler's Config and Deps
//	servers.go    the loop's HTTP endpoints: metrics, /healthz, webhook
//	status.go     `status`, and the selection the read-only commands share
//	why.go        `why`
//	checkgroup.go `check-group`: a group checked by why's rules
//	enable.go     `enable-namespace`
package cli

import (
	"fmt"
	"io"

	"github.com/alecthomas/kong"
)

// Exit codes.
const (
	ExitOK = 0
	// ExitFailed: a RunnerGroup failed, or the pass could not run at all.
	// The CronJob's Job then shows as failed in its history.
	ExitFailed = 1
	// ExitUsage: bad flags or environment.
	ExitUsage = 2
)

// CLI is the root command.
type CLI struct {
	Run     RunCmd     `cmd:"" help:"Run one scale pass over the selected RunnerGroups (or keep passing with --loop)."`
	Version VersionCmd `cmd:"" help:"Print the version."`
	// RenderRunnerConfig runs in runner pods, as their init container.
	RenderRunnerConfig RenderRunnerConfigCmd `cmd:"" help:"Runner pods' init container (with the shared cache): write the runner config from the rendered ConfigMap and the cache secret in GITEA_RUNNER_CACHE_SECRET."`
	Status             StatusCmd             `cmd:"" help:"Show one line per selected RunnerGroup from its status: demand, runners, last pass, conditions. Read-only."`
	EnableNamespace    EnableNamespaceCmd    `cmd:"" name:"enable-namespace" help:"Enable a tenant namespace in one step: bind the tenant ClusterRole to the scaler, set its Pod Security level and grants, and label its token Secret; with --dry-run and -o as kubectl users expect."`
	Why                WhyCmd                `cmd:"" help:"Explain why a Gitea job has or has not got a runner: the groups that could serve it, the one assigned, labels no group offers, needs:, capacity, the runner pod. Read-only; asks Gitea with a selected group's API token, read with your own rights, and only where a pass would send it."`
	CheckGroup         CheckGroupCmd         `cmd:"" name:"check-group" help:"Check a RunnerGroup, in the cluster or in a file before it is created, as a pass and why would: the listener serves it, its spec, Gitea URL, namespace, grant and token Secrets, and Gitea's answer to its token; each gap with its fix. Read-only; exits 1 when something is missing."`
}

// VersionCmd is `gitea-runner-scaler version`.
type VersionCmd struct{}

// IO carries the streams, so tests can swap them.
type IO struct {
	Out, Err io.Writer
}

// Main parses args and runs the command; it returns the process exit code.
func Main(args []string, streams IO) int {
	var c CLI
	exit := -1
	parser, err := kong.New(&c,
		kong.Name("gitea-runner-scaler"),
		kong.Description("Starts one ephemeral Gitea runner (gitea/runner) Job per queued Gitea Actions job, within each RunnerGroup's limits."),
		kong.UsageOnError(),
		kong.Writers(streams.Out, streams.Err),
		kong.Exit(func(code int) { exit = code }),
	)
	if err != nil {
		fmt.Fprintf(streams.Err, "gitea-runner-scaler: %v\n", err)
		return ExitUsage
	}
	kctx, err := parser.Parse(args)
	if exit >= 0 { // --help
		return exit
	}
	if err != nil {
		fmt.Fprintf(streams.Err, "gitea-runner-scaler: %v\n", err)
		return ExitUsage
	}
	switch kctx.Command() {
	case "version":
		fmt.Fprintln(streams.Out, version())
		return ExitOK
	case "status":
		return c.Status.run(streams)
	case "render-runner-config":
		return c.RenderRunnerConfig.run(streams)
	case "enable-namespace <namespace>":
		return c.EnableNamespace.run(streams)
	case "why <job>":
		return c.Why.run(streams)
	case "check-group", "check-group <group>":
		return c.CheckGroup.run(streams)
	default:
		return c.Run.run(streams)
	}
}

// userAgent names this binary and its version in every request it sends,
// to Kubernetes and to Gitea.
func userAgent() string { return "gitea-runner-scaler/" + version() }
