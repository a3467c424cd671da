// Package metrics is the scaler's Prometheus endpoint: what each pass did
// (scaler.PassObserver), the requests it sent to Gitea and Kubernetes
// (counted by the transports it wraps), and, with the webhook, deliveries.
// It has its own registry, so nothing else in the process can add to or
// break what it serves.
package metrics

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scaler"
)

// Metrics holds the collectors. Its methods are safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	passes         *prometheus.CounterVec
	passDuration   prometheus.Histogram
	giteaRequests  *prometheus.CounterVec
	kubeRequests   *prometheus.CounterVec
	group          *prometheus.GaugeVec
	runnersCreated prometheus.Counter
	runnersReaped  *prometheus.CounterVec
	queuedToJob    prometheus.Histogram
	webhook        *prometheus.CounterVec

	// giteaTotal and kubeTotal are the request counts for the pass
	// summary line (scaler.RequestCounter).
	giteaTotal, kubeTotal atomic.Int64
}

const ns = "gitea_runner_scaler"

// New makes the collectors and registers them, with the Go and process
// collectors, on a registry of their own.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "passes_total",
			Help: "Passes made, by result: ok, failed (a RunnerGroup or namespace failed) or error (the pass could not run)."}, []string{"result"}),
		passDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "pass_duration_seconds",
			Help: "Wall time of a pass.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 12)}),
		giteaRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "gitea_requests_total",
			Help: "Requests sent to Gitea, by HTTP status code (0: no answer) and the target of the RunnerGroup they were sent for, as its spec names it (admin, orgs/acme, users/alice, repos/acme/app; other for none)."}, []string{"code", "target"}),
		kubeRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "kubernetes_requests_total",
			Help: "Requests sent to the Kubernetes API, by method and HTTP status code (0: no answer)."}, []string{"method", "code"}),
		group: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "runnergroup",
			Help: "What the last pass saw of a RunnerGroup, by value: queued, blocked, running (jobs), active, idle (runners), max (maxActiveRunners)."}, []string{"namespace", "name", "value"}),
		runnersCreated: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "runners_created_total",
			Help: "Runner Jobs created."}),
		runnersReaped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "runners_reaped_total",
			Help: "Runners that went, by reason: start_timeout (the Job's pod never started), idle (surplus runner reaped), orphan (registration without a Job removed)."}, []string{"reason"}),
		queuedToJob: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "queued_to_job_seconds",
			Help: "Time from a Gitea job's creation to its runner Job's creation.", Buckets: prometheus.ExponentialBuckets(0.25, 2, 12)}),
		webhook: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "webhook_deliveries_total",
			Help: "Gitea webhook deliveries, by outcome: triggered (a queued job), ignored (another event or action), duplicate (a delivery seen before), unauthorized (no or a wrong signature), bad_request (unreadable or past the size bound)."}, []string{"outcome"}),
	}
	m.reg.MustRegister(m.passes, m.passDuration, m.giteaRequests, m.kubeRequests, m.group, m.runnersCreated, m.runnersReaped, m.queuedToJob, m.webhook,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, r := range []string{"ok", "failed", "error"} {
		m.passes.WithLabelValues(r)
	}
	for _, r := range []string{scaler.ReapStartTimeout, scaler.ReapIdle, scaler.ReapOrphan} {
		m.runnersReaped.WithLabelValues(r)
	}
	return m
}

// WebhookDelivery counts one webhook delivery by its outcome.
func (m *Metrics) WebhookDelivery(outcome string) {
	m.webhook.WithLabelValues(outcome).Inc()
}

// Registry is where the collectors are, for a caller that adds its own
// (the webhook's deliveries).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// ObservePass records a finished pass. A full pass replaces the per-group
// gauges as a whole, so a deleted group's series go with it; a partial
// one (a webhook's) updates the groups it served.
func (m *Metrics) ObservePass(sum scaler.Summary, took time.Duration, err error) {
	switch {
	case err != nil:
		m.passes.WithLabelValues("error").Inc()
	case sum.Err() != nil:
		m.passes.WithLabelValues("failed").Inc()
	default:
		m.passes.WithLabelValues("ok").Inc()
	}
	m.passDuration.Observe(took.Seconds())
	if err != nil {
		return
	}
	if !sum.Partial {
		m.group.Reset()
	}
	for _, g := range sum.GroupStats {
		for _, v := range []struct {
			name string
			n    int
		}{{"queued", g.Queued}, {"blocked", g.Blocked}, {"running", g.Running}, {"active", g.Active}, {"idle", g.Idle}, {"max", g.Max}} {
			m.group.WithLabelValues(g.Namespace, g.Name, v.name).Set(float64(v.n))
		}
		m.runnersReaped.WithLabelValues(scaler.ReapStartTimeout).Add(float64(g.StartTimeouts))
		m.runnersReaped.WithLabelValues(scaler.ReapIdle).Add(float64(g.IdleReaps))
		m.runnersReaped.WithLabelValues(scaler.ReapOrphan).Add(float64(g.OrphansRemoved))
	}
	m.runnersCreated.Add(float64(sum.Created))
	for _, d := range sum.QueuedToJob {
		m.queuedToJob.Observe(d.Seconds())
	}
}

// Requests is the number of requests sent to Gitea and to Kubernetes so
// far (scaler.RequestCounter).
func (m *Metrics) Requests() (gitea, kube int64) {
	return m.giteaTotal.Load(), m.kubeTotal.Load()
}

// GiteaTransport counts each request to Gitea that base carries.
func (m *Metrics) GiteaTransport(base http.RoundTripper) http.RoundTripper {
	return countingTransport{base: base, count: func(r *http.Request, code int) {
		m.giteaTotal.Add(1)
		m.giteaRequests.WithLabelValues(strconv.Itoa(code), giteaTarget(r)).Inc()
	}}
}

// KubeTransport counts each request to Kubernetes that base carries; it
// fits rest.Config.WrapTransport.
func (m *Metrics) KubeTransport(base http.RoundTripper) http.RoundTripper {
	return countingTransport{base: base, count: func(r *http.Request, code int) {
		m.kubeTotal.Add(1)
		m.kubeRequests.WithLabelValues(r.Method, strconv.Itoa(code)).Inc()
	}}
}

type countingTransport struct {
	base  http.RoundTripper
	count func(r *http.Request, code int)
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	code := 0
	if err == nil {
		code = resp.StatusCode
	}
	t.count(r, code)
	return resp, err
}

// giteaTarget is the target, as a group's spec names it, that the
// request was made for (gitea.WithTarget): "admin", "orgs/acme",
// "users/alice", "repos/acme/app". Its values are bounded by the
// RunnerGroups' targets, whatever repositories a listing returns; a
// request not made for a target counts as "other".
func giteaTarget(r *http.Request) string {
	if t, ok := gitea.RequestTarget(r.Context()); ok {
		return t.Path()
	}
	return "other"
}
