package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The chart sets SCALER_RUNNER_SELF_REGISTRATION=true where the platform
// pins self-registration; unset, the scaler registers runners.
func TestRunnerSelfRegistrationFromEnvironment(t *testing.T) {
	for env, want := range map[string]bool{"": false, "false": false, "true": true} {
		t.Run("env "+env, func(t *testing.T) {
			if env != "" {
				t.Setenv("SCALER_RUNNER_SELF_REGISTRATION", env)
			}
			r, err := parse(t)
			require.NoError(t, err)
			opts, err := r.runnerOptions()
			require.NoError(t, err)
			assert.Equal(t, want, opts.SelfRegistration)
		})
	}
}
