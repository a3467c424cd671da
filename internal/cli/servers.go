package cli

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/metrics"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scaler"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/webhook"
)

// serveEndpoints serves /metrics and /healthz where their flags ask, until
// stop is called; ok is false, with the reason logged, when one cannot be
// served.
func (r *RunCmd) serveEndpoints(m *metrics.Metrics, log *slog.Logger) (stop func(), ok bool) {
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	if r.MetricsAddr != "" {
		s, err := serveMetrics(r.MetricsAddr, m, log)
		if err != nil {
			log.Error("cannot serve metrics", "addr", r.MetricsAddr, "error", err)
			stop()
			return nil, false
		}
		stops = append(stops, s)
	}
	if r.HealthAddr != "" {
		s, err := serveHealth(r.HealthAddr, m, r.healthzStale(), log)
		if err != nil {
			log.Error("cannot serve /healthz", "addr", r.HealthAddr, "error", err)
			stop()
			return nil, false
		}
		stops = append(stops, s)
	}
	return stop, true
}

// healthzStale is how long /healthz waits for a pass to end: N
// intervals, plus one group's timeout, so that one slow group never fails
// the probe however short the interval (the demo's is 5 s).
func (r *RunCmd) healthzStale() time.Duration {
	return time.Duration(r.HealthzStaleIntervals)*r.Interval + r.GroupTimeout
}

// serveMetrics serves m at /metrics on addr until stop is called.
func serveMetrics(addr string, m *metrics.Metrics, log *slog.Logger) (stop func(), err error) {
	return serveOne(addr, "/metrics", m.Handler(), "metrics", log)
}

// serveHealth serves the liveness check at /healthz on addr until stop is
// called: a port of its own, since it names no tenant and so needs none
// of the metrics port's NetworkPolicy.
func serveHealth(addr string, m *metrics.Metrics, stale time.Duration, log *slog.Logger) (stop func(), err error) {
	return serveOne(addr, "/healthz", m.Healthz(stale), "health", log)
}

// serveOne serves h at GET path on addr until stop is called.
func serveOne(addr, path string, h http.Handler, what string, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+path, h)
	log.Info("serving "+what, "addr", ln.Addr().String(), "path", path)
	return serve(&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, ln, what, log), nil
}

// serveWebhook accepts Gitea's deliveries at POST /webhook on
// --webhook-addr and hands each queued job, and each job a runner took
// or finished, to the scaler, until stop.
func (r *RunCmd) serveWebhook(sc *scaler.Scaler, deps scaler.Deps) (stop func(), err error) {
	secret, err := r.webhookSecret()
	if err != nil {
		return nil, err
	}
	h := &webhook.Handler{Secret: secret, Trigger: func(j webhook.Job) {
		sc.Trigger(scaler.QueuedJob{Repo: j.Repo, Labels: j.Labels})
	}, Ran: func(j webhook.RanJob) {
		sc.JobRan(scaler.RanJob{ID: j.ID, RunnerName: j.RunnerName, Created: j.Created, Started: j.Started, Completed: j.Completed})
	}}
	if o, ok := deps.Observer.(interface{ WebhookDelivery(outcome string) }); ok {
		h.Outcome = o.WebhookDelivery
	}
	ln, err := net.Listen("tcp", r.WebhookAddr)
	if err != nil {
		return nil, err
	}
	ln = webhook.LimitListener(ln, webhook.MaxConns)
	mux := http.NewServeMux()
	mux.Handle("/webhook", h)
	deps.Log.Info("accepting Gitea webhooks", "addr", ln.Addr().String(), "path", "/webhook")
	return serve(webhook.NewServer(mux), ln, "webhook", deps.Log), nil
}

// serve runs srv on ln until the returned stop, which waits up to 5 s for
// the requests in flight.
func serve(srv *http.Server, ln net.Listener, what string, log *slog.Logger) (stop func()) {
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(what+" endpoint stopped", "error", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
}
