package cli

import (
	"errors"
	"fmt"
	"time"
)

// LoopFlags keep the scaler passing, and what only a loop serves: metrics,
// a liveness check and Gitea's webhook.
type LoopFlags struct {
	Loop        bool          `env:"SCALER_LOOP" help:"Pass again every --interval until SIGTERM; the pass in flight is finished first."`
	Interval    time.Duration `env:"SCALER_INTERVAL" default:"30s" help:"Time between the starts of passes with --loop."`
	MetricsAddr string        `env:"SCALER_METRICS_ADDR" placeholder:"HOST:PORT" help:"With --loop, serve Prometheus metrics on this address at /metrics (e.g. ':9090'); empty serves none. A single pass logs the same numbers in its 'pass finished' line."`
	HealthAddr  string        `env:"SCALER_HEALTH_ADDR" placeholder:"HOST:PORT" help:"With --loop, serve GET /healthz on this address (e.g. ':8081') for a liveness probe: 503 when no pass ended within --healthz-stale-intervals intervals plus --group-timeout; empty serves none."`
	// 5 intervals: a pass longer than that is stuck, not slow (see
	// healthzStale for the group timeout on top).
	HealthzStaleIntervals int `env:"SCALER_HEALTHZ_STALE_INTERVALS" default:"5" placeholder:"N" help:"/healthz fails when no full pass ended within N times --interval plus --group-timeout (counted from the start until the first pass ends); at least 2."`
	WebhookFlags          `embed:""`
}

// validate checks the interval, and that what only a loop serves comes
// with --loop.
func (f *LoopFlags) validate() error {
	var errs []error
	if f.Loop && f.Interval <= 0 {
		errs = append(errs, fmt.Errorf("--interval must be positive, got %s", f.Interval))
	}
	if f.MetricsAddr != "" && !f.Loop {
		errs = append(errs, errors.New("--metrics-addr needs --loop: a single pass logs its numbers in its 'pass finished' line instead"))
	}
	if f.HealthAddr != "" && !f.Loop {
		errs = append(errs, errors.New("--health-addr needs --loop: a single pass is judged by its exit code"))
	}
	if f.HealthzStaleIntervals < 2 {
		errs = append(errs, fmt.Errorf("--healthz-stale-intervals must be at least 2, got %d: one late tick must not restart the scaler", f.HealthzStaleIntervals))
	}
	if f.WebhookAddr != "" && !f.Loop {
		errs = append(errs, errors.New("--webhook-addr needs --loop: a single pass has nobody to trigger"))
	}
	return errors.Join(append(errs, f.WebhookFlags.validate())...)
}
