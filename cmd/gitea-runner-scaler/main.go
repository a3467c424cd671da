// Command gitea-runner-scaler runs scale passes for Gitea RunnerGroups; the
// Helm chart runs it from a CronJob (one pass per run) or a Deployment
// (--loop).
package main

import (
	"os"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.IO{Out: os.Stdout, Err: os.Stderr}))
}
