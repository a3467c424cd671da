package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerconfig"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// RunnerCacheFlags give each served namespace's runners the shared cache
// (the chart's runnerCache).
type RunnerCacheFlags struct {
	RunnerCacheURL        string `env:"SCALER_RUNNER_CACHE_URL" placeholder:"URL" help:"Base URL of each namespace's gitea-runner cache-server, {namespace} replaced by the group's namespace, e.g. http://gitea-runner-cache.{namespace}.svc:8088/; runners get it as cache.external_server. Empty: no shared cache, the runners' cache is off."`
	RunnerCacheSecretName string `env:"SCALER_RUNNER_CACHE_SECRET_NAME" default:"gitea-runner-cache" placeholder:"NAME" help:"Secret, in each group's namespace, whose key external_secret is the cache server's shared secret; runner pods read it by secretKeyRef. A namespace without it gets runners with the cache off."`
	RunnerConfigImage     string `env:"SCALER_RUNNER_CONFIG_IMAGE" placeholder:"IMAGE" help:"Image of the runner pods' init container that writes the runner config with the cache secret (this scaler's image; its render-runner-config command). Needed with --runner-cache-url."`
}

// validate checks the shared cache's flags: an http(s) URL without
// credentials (it is written into every runner's config and handed to
// jobs as ACTIONS_CACHE_URL), a Secret name, and the init container's
// image.
func (f *RunnerCacheFlags) validate() error {
	if f.RunnerCacheURL == "" {
		return nil
	}
	var errs []error
	u, err := url.Parse(strings.ReplaceAll(f.RunnerCacheURL, "{namespace}", "ns"))
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		errs = append(errs, fmt.Errorf("--runner-cache-url %q: must be an http or https URL, e.g. http://gitea-runner-cache.{namespace}.svc:8088/", f.RunnerCacheURL))
	case u.User != nil:
		errs = append(errs, errors.New("--runner-cache-url must not carry credentials: the runners send the cache secret themselves"))
	}
	if msgs := validation.IsDNS1123Subdomain(f.RunnerCacheSecretName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--runner-cache-secret-name %q is not a Secret name: %s", f.RunnerCacheSecretName, strings.Join(msgs, "; ")))
	}
	if f.RunnerConfigImage == "" {
		errs = append(errs, errors.New("--runner-cache-url needs --runner-config-image (the scaler's own image): runner pods write their config with the cache secret in an init container of it"))
	}
	return errors.Join(errs...)
}

// cacheOptions are the runner Jobs' cache settings; none without a URL.
func (f *RunnerCacheFlags) cacheOptions() runnerjob.CacheOptions {
	if f.RunnerCacheURL == "" {
		return runnerjob.CacheOptions{}
	}
	return runnerjob.CacheOptions{URL: cacheURL(f.RunnerCacheURL), SecretName: f.RunnerCacheSecretName, Image: f.RunnerConfigImage}
}

// cacheURL ends the URL with a slash: the runner hands it to jobs as
// ACTIONS_CACHE_URL, to which cache clients append "_apis/...".
func cacheURL(s string) string {
	if strings.HasSuffix(s, "/") {
		return s
	}
	return s + "/"
}

// RenderRunnerConfigCmd is `gitea-runner-scaler render-runner-config`, the
// init container of runner pods with the shared cache: gitea/runner reads
// cache.external_secret only from its config file, and a Secret reaches a
// pod only through secretKeyRef (here GITEA_RUNNER_CACHE_SECRET), so the
// file with the secret is written in the pod, on a memory-backed emptyDir.
// The secret is read from the environment, never from a flag, and never
// printed.
type RenderRunnerConfigCmd struct {
	Template string `env:"GITEA_RUNNER_CONFIG_TEMPLATE" required:"" placeholder:"PATH" help:"The runner config the scaler rendered (the group's ConfigMap, mounted)."`
	Out      string `env:"GITEA_RUNNER_CONFIG_OUT" required:"" placeholder:"PATH" help:"Where to write the runner's config (its CONFIG_FILE)."`
}

func (c *RenderRunnerConfigCmd) run(streams IO) int {
	log := slog.New(slog.NewTextHandler(streams.Err, nil))
	secret := os.Getenv(runnerconfig.SecretEnv)
	if err := c.render(secret); err != nil {
		log.Error("cannot write the runner config", "error", err)
		return ExitFailed
	}
	if secret == "" {
		log.Info("wrote the runner config: shared cache off, the namespace has no cache Secret", "path", c.Out)
	} else {
		log.Info("wrote the runner config: shared cache on", "path", c.Out)
	}
	return ExitOK
}

func (c *RenderRunnerConfigCmd) render(secret string) error {
	template, err := os.ReadFile(c.Template)
	if err != nil {
		return err
	}
	out, err := runnerconfig.WithSecret(template, secret)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Template, err)
	}
	// Written whole or not at all: the runner must never read half a file.
	tmp, err := os.CreateTemp(filepath.Dir(c.Out), ".config-*.yaml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	// 0644: the runner container may run as another user than this one;
	// the file is on the pod's own memory-backed volume.
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), c.Out)
}
