package cli

import (
	"errors"
	"fmt"
	"time"
)

// PassFlags shape one pass.
type PassFlags struct {
	DryRun       bool          `env:"SCALER_DRY_RUN" help:"Plan and print what would be done; write nothing."`
	SpawnTTL     time.Duration `env:"SCALER_SPAWN_TTL" default:"5m" help:"How long a claimed queued job waits for its runner before a retry."`
	Workers      int           `env:"SCALER_WORKERS" default:"4" help:"RunnerGroups served at once."`
	GroupTimeout time.Duration `env:"SCALER_GROUP_TIMEOUT" default:"30s" help:"Time one RunnerGroup's part of a pass may take; must be longer than --gitea-timeout."`
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
	return errors.Join(errs...)
}
