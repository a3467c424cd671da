// Command steered-runner is the runner a test steers on the bed: it registers with
// Gitea through the real runner protocol, takes a task, holds it while a test asks
// (see the steeredrunner package) and reports a result without running any step.
//
// Exit codes: 0 the task(s) were served; 1 an error, or no task before
// TEST_RUNNER_IDLE_TIMEOUT; 2 bad configuration.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/scripts/tools/testbed/internal/steeredrunner"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if len(os.Args) > 1 && (os.Args[1] == "-h" || os.Args[1] == "--help") {
		fmt.Println("usage: steered-runner (configured by GITEA_* and TEST_RUNNER_* environment variables)")
		return
	}
	cfg, err := steeredrunner.LoadConfig(os.Getenv)
	if err != nil {
		log.Error("bad configuration", "err", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	r := steeredrunner.New(cfg, log, &http.Client{Timeout: 30 * time.Second})
	err = r.Run(ctx)
	switch {
	case err == nil:
		log.Info("exiting")
	case errors.Is(err, context.Canceled):
		log.Info("terminated")
		os.Exit(143)
	default:
		log.Error("runner failed", "err", err)
		os.Exit(1)
	}
}
