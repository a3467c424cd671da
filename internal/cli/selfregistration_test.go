package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The chart sets SCALER_RUNNER_SELF_REGISTRATION=false to have the scaler
// register runners; unset, runner pods register themselves.
func TestRunnerSelfRegistrationFromEnvironment(t *testing.T) {
	for env, want := range map[string]bool{"": true, "false": false, "true": true} {
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
