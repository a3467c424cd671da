package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerconfig"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scaler"
)

// RunCmd is `gitea-runner-scaler run`: its flags, a group per concern.
type RunCmd struct {
	KubeFlags           `embed:""`
	GroupSelectionFlags `embed:""`
	LoopFlags           `embed:""`
	PassFlags           `embed:""`
	ObservabilityFlags  `embed:""`
	RunnerFlags         `embed:""`
	GiteaFlags          `embed:""`
	KubeClientFlags     `embed:""`
	LifecycleFlags      `embed:""`
	TenancyFlags        `embed:""`
	RunnerCacheFlags    `embed:""`
}

// Validate runs at parse time, so bad values exit with ExitUsage before
// anything talks to a cluster. Each group checks its own flags, and every
// error is reported at once: a new group with checks joins this list.
// (The groups' methods are lowercase because kong would otherwise call
// each on its own and stop at the first group that fails.)
func (r *RunCmd) Validate() error {
	return errors.Join(
		r.GroupSelectionFlags.validate(),
		r.LoopFlags.validate(),
		r.PassFlags.validate(),
		r.RunnerFlags.validate(),
		r.GiteaFlags.validate(),
		r.KubeClientFlags.validate(),
		r.LifecycleFlags.validate(),
		r.TenancyFlags.validate(),
		r.RunnerCacheFlags.validate(),
		r.crossGroupRules(),
	)
}

// crossGroupRules are the rules that tie two groups.
func (r *RunCmd) crossGroupRules() error {
	var errs []error
	if r.GroupTimeout <= r.GiteaTimeout {
		errs = append(errs, fmt.Errorf("--group-timeout (%s) must be longer than --gitea-timeout (%s), or a group could never finish a slow request", r.GroupTimeout, r.GiteaTimeout))
	}
	if r.DeletedNamespacesMirror != "" && r.DeletedNamespacesGiteaURL != "" {
		if p, err := giteaPolicy(r.AllowedGiteaURLs); err == nil {
			if err := p.Check(r.DeletedNamespacesGiteaURL); err != nil {
				errs = append(errs, fmt.Errorf("--deleted-namespaces-gitea-url: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// runWith runs the scaler on the given clients (tests pass fakes) and
// returns the exit code.
func (r *RunCmd) runWith(deps scaler.Deps) int {
	cfg, err := r.scalerConfig()
	if err != nil {
		deps.Log.Error("invalid configuration", "error", err)
		return ExitUsage
	}
	sc, err := scaler.New(deps, cfg)
	if err != nil {
		deps.Log.Error("invalid configuration", "error", err)
		return ExitUsage
	}
	r.logStart(deps.Log, cfg)
	if r.WebhookAddr != "" {
		stop, err := r.serveWebhook(sc, deps)
		if err != nil {
			deps.Log.Error("cannot serve the webhook", "addr", r.WebhookAddr, "error", err)
			return ExitFailed
		}
		defer stop()
	}
	if err := sc.Run(context.Background(), scaler.RunOptions{Loop: r.Loop, Interval: r.Interval}); err != nil {
		return ExitFailed
	}
	return ExitOK
}

// logStart logs the settings a scaler starts with (never a secret: the
// sweep's token only as set or not).
func (r *RunCmd) logStart(log *slog.Logger, cfg scaler.Config) {
	log.Info("scaler starting", "version", version(), "loop", r.Loop, "interval", r.Interval, "namespaces", r.Namespace,
		"selector", r.Selector, "excludeSelectors", r.ExcludeSelector, "dryRun", r.DryRun,
		"groupTimeout", r.GroupTimeout, "giteaCAFile", r.GiteaCAFile, "kubeQPS", r.KubeQPS, "kubeBurst", r.KubeBurst, "giteaConcurrency", r.GiteaConcurrency,
		"runnerIdleTimeout", r.RunnerIdleTimeout, "runnerStartTimeout", r.RunnerStartTimeout, "webhookAddr", r.WebhookAddr,
		"runnerTemplate", r.RunnerTemplate, "runnerTemplatePinned", cfg.Runner.Pinned.String(),
		"defaultFlavour", cfg.Runner.DefaultFlavour, "flavourPinned", cfg.Runner.FlavourPinned, "userNamespacedRunnerImage", cfg.Runner.UserNamespaced.Image,
		"runnerConfigDefaults", runnerconfig.String(cfg.Runner.Config.Defaults), "runnerConfigPinned", runnerconfig.String(cfg.Runner.Config.Pinned),
		"allowedGiteaURLs", r.AllowedGiteaURLs, "trustUnlabelledNamespaces", r.TrustUnlabelledNamespaces, "userNamespacesPodSecurityStandards", r.UserNamespacesPodSecurityStandards, "clusterWideReads", r.ClusterWideReads,
		"deletedNamespacesMirror", r.DeletedNamespacesMirror, "deletedNamespacesGiteaURL", r.DeletedNamespacesGiteaURL, "deletedNamespacesToken", r.DeletedNamespacesToken != "")
	if len(r.AllowedGiteaURLs) == 0 {
		log.Warn("no allowed Gitea URLs: a RunnerGroup may send its API token to any host but loopback, link-local and metadata addresses; set --allowed-gitea-urls")
	}
}
