// Package metrics is the scaler's Prometheus endpoint: what each pass did
// (passreport.Observer), the requests it sent to Gitea and Kubernetes
// (counted by the transports it wraps), and, with the webhook, deliveries.
// It has its own registry, so nothing else in the process can add to or
// break what it serves.
package metrics

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
)

// Metrics holds the collectors. Its methods are safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	passes        *prometheus.CounterVec
	passDuration  prometheus.Histogram
	giteaRequests *prometheus.CounterVec
	kubeRequests  *prometheus.CounterVec
	// groups are the per-group gauges, one per number a pass sees of a
	// group (see groupGaugeDefs).
	groups       *groupGauges
	giteaLatency *prometheus.HistogramVec
	buildInfo    *prometheus.GaugeVec
	lastSuccess  prometheus.Gauge
	// jobs are the per-group counters of runners and histograms of jobs.
	jobs *groupJobs
	// deletedNSRemoved counts the registrations of deleted namespaces
	// the sweep removed: their groups are gone, so no group labels them.
	deletedNSRemoved prometheus.Counter
	// deletedNSLeft is the last sweep's count of recorded groups of
	// deleted namespaces that may still have registrations, by reason.
	deletedNSLeft *prometheus.GaugeVec
	queuedToJob   prometheus.Histogram
	webhook       *prometheus.CounterVec

	// giteaTotal and kubeTotal are the request counts for the pass
	// summary line (passreport.RequestCounter).
	giteaTotal, kubeTotal atomic.Int64

	// start is when New ran and lastPass (unix nanoseconds) when the
	// last full pass ended, whatever its result: what Healthz judges.
	start    time.Time
	lastPass atomic.Int64
	now      func() time.Time
}

// groupGaugeDefs name the per-group gauges, in the order ObservePass
// reads GroupStats; each is labelled by the group's namespace and name.
var groupGaugeDefs = []struct{ name, help string }{
	{"runnergroup_queued_jobs", "Queued Gitea jobs the RunnerGroup can serve, as the last pass saw them (status.queuedJobs)."},
	{"runnergroup_blocked_jobs", "Gitea jobs of the RunnerGroup waiting for their needs or an approval (status.blockedJobs)."},
	{"runnergroup_running_jobs", "Gitea jobs in progress on the RunnerGroup's runners (status.runningJobs)."},
	{"runnergroup_active_runners", "Runner Jobs of the RunnerGroup not yet complete or failed (status.activeRunners)."},
	{"runnergroup_idle_runners", "Runners of the RunnerGroup whose pod runs and that run no Gitea job (status.idleRunners)."},
	{"runnergroup_max_runners", "The RunnerGroup's cap on active runners (spec.maxActiveRunners)."},
}

const ns = "giteascaler"

// New makes the collectors and registers them, with the Go and process
// collectors, on a registry of their own.
func New() *Metrics {
	m := &Metrics{
		reg:   prometheus.NewRegistry(),
		start: time.Now(),
		now:   time.Now,
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "passes_total",
			Help: "Passes made, by result: ok, failed (a RunnerGroup or namespace failed) or error (the pass could not run)."}, []string{"result"}),
		passDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "pass_duration_seconds",
			Help: "Wall time of a pass.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 12)}),
		giteaRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "gitea_requests_total",
			Help: "Requests sent to Gitea, by HTTP status code (0: no answer) and the target of the RunnerGroup they were sent for, as its spec names it (admin, orgs/acme, users/alice, repos/acme/app; other for none)."}, []string{"code", "target"}),
		kubeRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "kubernetes_requests_total",
			Help: "Requests sent to the Kubernetes API, by method and HTTP status code (0: no answer)."}, []string{"method", "code"}),
		deletedNSRemoved: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "deleted_namespace_registrations_removed_total",
			Help: "Registrations of RunnerGroups of deleted namespaces that the sweep removed from Gitea (cleanup.deletedNamespaces)."}),
		deletedNSLeft: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "deleted_namespace_groups_left",
			Help: "RunnerGroups of deleted namespaces whose registrations may still be in Gitea, as the last sweep found them (cleanup.deletedNamespaces), by reason: no_token (the sweep has no Gitea token), other_gitea (registered on another Gitea than the token's), running (a registration is online or runs a job), failed (Gitea or the API server failed), later (over the per-pass bound)."}, []string{"reason"}),
		queuedToJob: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "queued_to_job_seconds",
			Help: "Time from a Gitea job's creation to its runner Job's creation.", Buckets: prometheus.ExponentialBuckets(0.25, 2, 12)}),
		webhook: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "webhook_deliveries_total",
			Help: "Gitea webhook deliveries, by outcome: triggered (a queued job), ran (a job a runner took or finished: its times kept for the job histograms), ignored (another event or action), duplicate (a delivery seen before), unauthorized (no or a wrong signature), bad_request (unreadable or past the size bound)."}, []string{"outcome"}),
	}
	m.groups = newGroupGauges()
	m.reg.MustRegister(m.groups)
	m.jobs = newGroupJobs()
	m.reg.MustRegister(m.jobs)
	// The latency of Gitea's answers: from the request sent to its
	// headers read (promhttp.InstrumentRoundTripperDuration), labelled as
	// the request counter is, plus the method. Requests that got no
	// answer are counted with code 0 by gitea_requests_total only.
	m.giteaLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "gitea_request_duration_seconds",
		Help:    "Time from a request to Gitea to its answer's headers, by HTTP status code, method and the target of the RunnerGroup it was sent for (as gitea_requests_total).",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}, []string{"code", "method", "target"})
	m.buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "build_info",
		Help: "Always 1; its labels name the scaler's version and the Go version it was built with."}, []string{"version", "goversion"})
	m.lastSuccess = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "last_successful_pass_timestamp_seconds",
		Help: "Unix time at which the last full pass that could run ended (result ok or failed: RunnerGroups were listed and served; a group's own failure is on its Ready condition). 0 until one has."})
	m.reg.MustRegister(m.giteaLatency, m.buildInfo, m.lastSuccess, m.deletedNSLeft)
	m.reg.MustRegister(m.passes, m.passDuration, m.giteaRequests, m.kubeRequests, m.deletedNSRemoved, m.queuedToJob, m.webhook,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, r := range []string{"ok", "failed", "error"} {
		m.passes.WithLabelValues(r)
	}
	for _, r := range leftReasons {
		m.deletedNSLeft.WithLabelValues(r)
	}
	return m
}

// leftReasons are the reasons of deleted_namespace_groups_left, each
// served from the start (0 until a sweep counts one).
var leftReasons = []string{passreport.LeftNoToken, passreport.LeftOtherGitea, passreport.LeftRunning, passreport.LeftFailed, passreport.LeftLater}

// SetBuildInfo labels build_info with the scaler's version and the Go
// version it was built with.
func (m *Metrics) SetBuildInfo(version string) {
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(version, runtime.Version()).Set(1)
}

// Healthz answers 200 while a full pass has ended within stale (counted
// from New until the first one has), whatever the pass's result, and 503
// when none has: the loop is stuck, which a restart may cure. Failures a
// restart cannot cure (Gitea down, a group's bad token) do not fail it;
// the passes' results and the groups' Ready conditions report those.
func (m *Metrics) Healthz(stale time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		last := m.start
		if n := m.lastPass.Load(); n != 0 {
			last = time.Unix(0, n)
		}
		age := m.now().Sub(last)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if age > stale {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "stale: no pass ended for %s (limit %s)\n", age.Round(time.Second), stale)
			return
		}
		fmt.Fprintf(w, "ok: last pass ended %s ago\n", age.Round(time.Second))
	})
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

// ObservePass records a finished pass. After a full pass only the groups
// it served have per-group series, so a deleted group's go; a partial one
// (a webhook's) updates the groups it served.
func (m *Metrics) ObservePass(sum passreport.Summary, took time.Duration, err error) {
	switch {
	case err != nil:
		m.passes.WithLabelValues("error").Inc()
	case sum.Err() != nil:
		m.passes.WithLabelValues("failed").Inc()
	default:
		m.passes.WithLabelValues("ok").Inc()
	}
	m.passDuration.Observe(took.Seconds())
	if !sum.Partial {
		end := m.now()
		m.lastPass.Store(end.UnixNano())
		if err == nil {
			m.lastSuccess.Set(float64(end.UnixNano()) / 1e9)
		}
	}
	if err != nil {
		return
	}
	m.groups.observe(sum.GroupStats, sum.Partial)
	m.jobs.observe(sum.GroupStats, sum.Partial)
	m.deletedNSRemoved.Add(float64(sum.DeletedNamespaces.Removed))
	if sum.DeletedNamespaces.Left != nil { // the pass swept
		for _, reason := range leftReasons {
			m.deletedNSLeft.WithLabelValues(reason).Set(float64(sum.DeletedNamespaces.Left[reason]))
		}
	}
	for _, d := range sum.QueuedToJob {
		m.queuedToJob.Observe(d.Seconds())
	}
}

// Requests is the number of requests sent to Gitea and to Kubernetes so
// far (passreport.RequestCounter).
func (m *Metrics) Requests() (gitea, kube int64) {
	return m.giteaTotal.Load(), m.kubeTotal.Load()
}

// GiteaTransport counts each request to Gitea that base carries.
// Each answered request's latency goes to gitea_request_duration_seconds.
func (m *Metrics) GiteaTransport(base http.RoundTripper) http.RoundTripper {
	timed := promhttp.InstrumentRoundTripperDuration(m.giteaLatency, base,
		promhttp.WithLabelFromCtx("target", func(ctx context.Context) string { return targetOf(ctx) }))
	return countingTransport{base: timed, count: func(r *http.Request, code int) {
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
	return targetOf(r.Context())
}

func targetOf(ctx context.Context) string {
	if t, ok := gitea.RequestTarget(ctx); ok {
		return t.Path()
	}
	return "other"
}
