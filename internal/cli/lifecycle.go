package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scaler"
)

// LifecycleFlags say when runners go: idle surplus runners, runner Jobs
// that never start, orphan registrations, and the registrations of
// deleted namespaces.
type LifecycleFlags struct {
	RunnerIdleTimeout  time.Duration `env:"SCALER_RUNNER_IDLE_TIMEOUT" default:"10m" help:"How long a runner beyond the queued jobs stays idle (since a pass last saw it at work) before it is disabled in Gitea and its Job deleted; 0 turns that and the removal of orphan registrations off (both need the runners API)."`
	RunnerStartTimeout time.Duration `env:"SCALER_RUNNER_START_TIMEOUT" default:"10m" help:"How long a runner Job's pod may take to start before the Job is deleted and the group says why; 0 never deletes one."`
	// The sweep of the registrations deleted namespaces leave in Gitea
	// (scaler.DeletedNamespaces): the platform team's opt-in.
	DeletedNamespacesMirror   string `env:"SCALER_DELETED_NAMESPACES_MIRROR" placeholder:"NS/NAME" help:"Keep a copy of what each served namespace registered with Gitea in this ConfigMap (the release namespace's, where no tenant writes), and remove the registrations of namespaces that are gone; empty does neither."`
	DeletedNamespacesGiteaURL string `env:"SCALER_DELETED_NAMESPACES_GITEA_URL" placeholder:"URL" help:"The Gitea the sweep's token is for; only registrations recorded on this Gitea are removed, and the token goes nowhere else."`
	DeletedNamespacesToken    string `env:"SCALER_DELETED_NAMESPACES_TOKEN" placeholder:"TOKEN" help:"Gitea API token that may list and delete the runners of the scopes served (the chart reads it from a Secret); empty deletes nothing and reports what is left."`
	DeletedNamespacesPerPass  int    `env:"SCALER_DELETED_NAMESPACES_PER_PASS" default:"4" placeholder:"N" help:"Deleted namespaces swept per pass, at most; the others wait for later passes."`
}

// validate checks the timeouts and the sweep's flags; whether the allowed
// Gitea URLs allow the sweep's is crossGroupRules'. Its errors never hold
// the token.
func (f *LifecycleFlags) validate() error {
	var errs []error
	if f.RunnerIdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("--runner-idle-timeout must be 0 (off) or more, got %s", f.RunnerIdleTimeout))
	}
	if f.RunnerStartTimeout < 0 {
		errs = append(errs, fmt.Errorf("--runner-start-timeout must be 0 (off) or more, got %s", f.RunnerStartTimeout))
	}
	return errors.Join(append(errs, f.validateSweep()...)...)
}

func (f *LifecycleFlags) validateSweep() []error {
	if f.DeletedNamespacesMirror == "" {
		if f.DeletedNamespacesToken != "" || f.DeletedNamespacesGiteaURL != "" {
			return []error{errors.New("the sweep's Gitea URL and token (SCALER_DELETED_NAMESPACES_*) need --deleted-namespaces-mirror")}
		}
		return nil
	}
	var errs []error
	if ns, name, ok := strings.Cut(f.DeletedNamespacesMirror, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		errs = append(errs, fmt.Errorf("--deleted-namespaces-mirror must be namespace/name, got %q", f.DeletedNamespacesMirror))
	}
	if f.DeletedNamespacesToken != "" && f.DeletedNamespacesGiteaURL == "" {
		errs = append(errs, errors.New("the sweep's token needs --deleted-namespaces-gitea-url, the only Gitea it may be sent to"))
	}
	if f.DeletedNamespacesPerPass < 0 {
		errs = append(errs, fmt.Errorf("--deleted-namespaces-per-pass must be 0 (the default, %d) or more, got %d", scaler.DefaultDeletedNamespacesPerPass, f.DeletedNamespacesPerPass))
	}
	return errs
}

// deletedNamespaces is the sweep's configuration, nil when it is off.
func (f *LifecycleFlags) deletedNamespaces() *scaler.DeletedNamespaces {
	if f.DeletedNamespacesMirror == "" {
		return nil
	}
	ns, name, _ := strings.Cut(f.DeletedNamespacesMirror, "/")
	return &scaler.DeletedNamespaces{Namespace: ns, ConfigMap: name, GiteaURL: f.DeletedNamespacesGiteaURL,
		Token: f.DeletedNamespacesToken, MaxPerPass: f.DeletedNamespacesPerPass}
}
