package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// PassFlags shape one pass.
type PassFlags struct {
	DryRun       bool          `env:"SCALER_DRY_RUN" help:"Plan and print what would be done; write nothing."`
	SpawnTTL     time.Duration `env:"SCALER_SPAWN_TTL" default:"5m" help:"How long a claimed queued job waits for its runner before a retry."`
	Workers      int           `env:"SCALER_WORKERS" default:"4" help:"RunnerGroups served at once."`
	GroupTimeout time.Duration `env:"SCALER_GROUP_TIMEOUT" default:"30s" help:"Time one RunnerGroup's part of a pass may take; must be longer than --gitea-timeout."`
	// A CronJob pass remembers nothing: without it, every pass asks Gitea
	// again whether each registration token is its scope's.
	RegistrationChecks string `env:"SCALER_REGISTRATION_CHECKS" placeholder:"NS/NAME" help:"Keep the registration token checks' verdicts (under a digest, never a token) in this ConfigMap of the release namespace, where no tenant writes, for the next passes; empty keeps them in a loop's memory only."`
}

// validate checks the spawn TTL and the workers; the group timeout's rule
// ties it to --gitea-timeout (crossGroupRules).
func (f *PassFlags) validate() error {
	var errs []error
	if f.SpawnTTL <= 0 {
		errs = append(errs, fmt.Errorf("--spawn-ttl must be positive, got %s", f.SpawnTTL))
	}
	if f.Workers < 1 || f.Workers > 64 {
		errs = append(errs, fmt.Errorf("--workers must be between 1 and 64, got %d", f.Workers))
	}
	if f.RegistrationChecks != "" {
		if ns, name, ok := strings.Cut(f.RegistrationChecks, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			errs = append(errs, fmt.Errorf("--registration-checks must be namespace/name, got %q", f.RegistrationChecks))
		}
	}
	return errors.Join(errs...)
}

// keptRegistrationChecks is where verdicts are kept, nil when nowhere.
func (f *PassFlags) keptRegistrationChecks() *types.NamespacedName {
	ns, name, ok := strings.Cut(f.RegistrationChecks, "/")
	if !ok {
		return nil
	}
	return &types.NamespacedName{Namespace: ns, Name: name}
}
