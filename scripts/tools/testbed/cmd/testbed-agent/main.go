// Command testbed-agent plays the kubelet for pods bound to the test bed's fake
// (kwok) nodes: it runs their containers as local processes, reports pod status, and
// removes deleted pods. Every flag also reads an environment variable (shown in the
// flag's help); a flag given on the command line wins.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gitea-runner-operator/gitea-runner-operator/scripts/tools/testbed/internal/agent"
)

type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

func envInt(name string, def int) int {
	var n int
	if _, err := fmt.Sscan(os.Getenv(name), &n); err == nil {
		return n
	}
	return def
}

func main() {
	os.Exit(run())
}

func run() int {
	var (
		kubeconfig   = flag.String("kubeconfig", envOr("KUBECONFIG", ""), "admin kubeconfig of the test bed (KUBECONFIG)")
		apiServer    = flag.String("api-server", envOr("TESTBED_API_SERVER", ""), "API server URL for pod kubeconfigs; default: the kubeconfig's (TESTBED_API_SERVER)")
		caFile       = flag.String("ca-file", envOr("TESTBED_CA_FILE", ""), "CA file for pod kubeconfigs; empty: skip TLS verification (TESTBED_CA_FILE)")
		nodeSelector = flag.String("node-selector", envOr("TESTBED_NODE_SELECTOR", "testbed.gitea.bpg.pw/fake-node=true"), "label selector of the fake nodes (TESTBED_NODE_SELECTOR)")
		scalerBin    = flag.String("scaler-bin", envOr("TESTBED_SCALER_BIN", ""), "binary for images ending in gitea-runner-scaler (TESTBED_SCALER_BIN)")
		steeredBin   = flag.String("steered-runner-bin", envOr("TESTBED_STEERED_RUNNER_BIN", ""), "binary for steered-runner images (TESTBED_STEERED_RUNNER_BIN)")
		runnerDir    = flag.String("gitea-runner-dir", envOr("TESTBED_GITEA_RUNNER_DIR", ""), "directory with gitea-runner and its image's run.sh, for gitea/runner and gitea/act_runner images (TESTBED_GITEA_RUNNER_DIR)")
		runnerConfig = flag.String("gitea-runner-config", envOr("TESTBED_GITEA_RUNNER_CONFIG", ""), "CONFIG_FILE for runner containers whose env sets none; empty: the runner's defaults (TESTBED_GITEA_RUNNER_CONFIG)")
		logDir       = flag.String("log-dir", envOr("TESTBED_POD_LOG_DIR", ""), "directory for <ns>_<pod>_<container>.log (TESTBED_POD_LOG_DIR)")
		workDir      = flag.String("work-dir", envOr("TESTBED_AGENT_DIR", ""), "directory for pod working dirs and tokens (TESTBED_AGENT_DIR)")
		maxPods      = flag.Int("max-pods", envInt("TESTBED_MAX_PODS", 16), "pods run at once (TESTBED_MAX_PODS)")
		backoff      = flag.Duration("backoff", envDuration("TESTBED_RESTART_BACKOFF", time.Second), "first restart back-off (TESTBED_RESTART_BACKOFF)")
		backoffMax   = flag.Duration("backoff-max", envDuration("TESTBED_RESTART_BACKOFF_MAX", 10*time.Second), "longest restart back-off (TESTBED_RESTART_BACKOFF_MAX)")
		logLevel     = flag.String("log-level", envOr("TESTBED_AGENT_LOG_LEVEL", "info"), "debug|info|warn|error (TESTBED_AGENT_LOG_LEVEL)")
		runnerEnv    listFlag
		runnerDirs   listFlag
	)
	flag.Var(&runnerDirs, "gitea-runner-release", "VERSION=DIR: the runner release that plays runner images tagged VERSION (3.1.0, v3.1.0, 3.1.0-dind...), as --gitea-runner-dir; repeatable")
	flag.Var(&runnerEnv, "runner-env", "NAME=value set for steered-runner processes before the pod's env; repeatable (TESTBED_RUNNER_ENV, ';'-separated)")
	flag.Parse()
	if len(runnerEnv) == 0 && os.Getenv("TESTBED_RUNNER_ENV") != "" {
		runnerEnv = strings.Split(os.Getenv("TESTBED_RUNNER_ENV"), ";")
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "bad --log-level:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	if *kubeconfig == "" {
		log.Error("--kubeconfig is required")
		return 2
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Error("cannot load kubeconfig", "err", err)
		return 2
	}
	// The agent writes a status per container change; the default 5 QPS would make
	// a burst of runner pods lag.
	restConfig.QPS, restConfig.Burst = 50, 100
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		log.Error("cannot build client", "err", err)
		return 2
	}
	if *apiServer == "" {
		*apiServer = restConfig.Host
	}

	releaseDirs := map[string]string{}
	for _, kv := range runnerDirs {
		version, dir, ok := strings.Cut(kv, "=")
		if !ok || version == "" || dir == "" {
			log.Error("bad --gitea-runner-release: want VERSION=DIR", "value", kv)
			return 2
		}
		releaseDirs[version] = dir
	}

	a, err := agent.New(agent.Config{
		Client:                 client,
		NodeSelector:           *nodeSelector,
		APIServer:              *apiServer,
		CAFile:                 *caFile,
		ScalerBin:              *scalerBin,
		SteeredRunnerBin:       *steeredBin,
		GiteaRunnerDir:         *runnerDir,
		GiteaRunnerReleaseDirs: releaseDirs,
		GiteaRunnerConfig:      *runnerConfig,
		LogDir:                 *logDir,
		WorkDir:                *workDir,
		RunnerEnv:              runnerEnv,
		MaxPods:                *maxPods,
		BackoffBase:            *backoff,
		BackoffMax:             *backoffMax,
		Logger:                 log,
	})
	if err != nil {
		log.Error("bad configuration", "err", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := a.Run(ctx); err != nil {
		log.Error("agent failed", "err", err)
		return 1
	}
	log.Info("agent stopped")
	return 0
}
