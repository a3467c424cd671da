package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
)

// groupLabels label every per-group series: a group's namespace and
// name, so their number is bounded by the groups, whatever jobs and
// repositories they serve.
var groupLabels = []string{"namespace", "name"}

// reapReasons are the reasons a pass reaps a group's runners for, each
// served from 0 once the group is seen.
var reapReasons = []string{passreport.ReapStartTimeout, passreport.ReapIdle, passreport.ReapOrphan}

// groupJobs are the per-group counters and the job histograms. The
// buckets are few on purpose: each costs a series per group, and these
// are 28 series a group, beside the six gauges.
type groupJobs struct {
	startup, execution *prometheus.HistogramVec
	created, reaped    *prometheus.CounterVec

	mu sync.Mutex
	// seen are the groups with series, so a full pass can delete those
	// of the groups it no longer serves.
	seen map[groupKey]bool
}

func newGroupJobs() *groupJobs {
	return &groupJobs{
		seen: map[groupKey]bool{},
		startup: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "job_startup_duration_seconds",
			Help:    "Time from a Gitea job's creation to its start on one of the RunnerGroup's runners, by Gitea's created_at and started_at; each job once.",
			Buckets: []float64{5, 10, 20, 30, 60, 120, 300, 600, 1800}}, groupLabels),
		execution: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "job_execution_duration_seconds",
			Help:    "Time from a Gitea job's start on one of the RunnerGroup's runners to its end, by Gitea's started_at and completed_at in the job's completed webhook delivery; each job once.",
			Buckets: []float64{30, 60, 120, 300, 600, 1200, 1800, 3600, 7200}}, groupLabels),
		created: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "runners_created_total",
			Help: "Runner Jobs the RunnerGroup's passes created."}, groupLabels),
		reaped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "runners_reaped_total",
			Help: "The RunnerGroup's runners that went, by reason: start_timeout (the Job's pod never started), idle (surplus runner reaped), orphan (registration without a Job removed)."},
			[]string{"namespace", "name", "reason"}),
	}
}

func (g *groupJobs) collectors() []prometheus.Collector {
	return []prometheus.Collector{g.startup, g.execution, g.created, g.reaped}
}

// observe adds a pass's numbers. After a full pass only the groups it
// served keep series, as the per-group gauges do; a partial one (a
// webhook's) adds to the groups it served.
func (g *groupJobs) observe(stats []passreport.GroupStats, partial bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	served := make(map[groupKey]bool, len(stats))
	for _, s := range stats {
		k := groupKey{s.Namespace, s.Name}
		served[k] = true
		if !g.seen[k] {
			g.seen[k] = true
			// Served from 0, so the first runner or job a rate sees
			// is not lost to a series that starts with it.
			g.startup.WithLabelValues(k.namespace, k.name)
			g.execution.WithLabelValues(k.namespace, k.name)
			g.created.WithLabelValues(k.namespace, k.name)
			for _, r := range reapReasons {
				g.reaped.WithLabelValues(k.namespace, k.name, r)
			}
		}
		g.created.WithLabelValues(k.namespace, k.name).Add(float64(s.Created))
		g.reaped.WithLabelValues(k.namespace, k.name, passreport.ReapStartTimeout).Add(float64(s.StartTimeouts))
		g.reaped.WithLabelValues(k.namespace, k.name, passreport.ReapIdle).Add(float64(s.IdleReaps))
		g.reaped.WithLabelValues(k.namespace, k.name, passreport.ReapOrphan).Add(float64(s.OrphansRemoved))
		for _, d := range s.Startups {
			g.startup.WithLabelValues(k.namespace, k.name).Observe(d.Seconds())
		}
		for _, d := range s.Executions {
			g.execution.WithLabelValues(k.namespace, k.name).Observe(d.Seconds())
		}
	}
	if partial {
		return
	}
	for k := range g.seen {
		if served[k] {
			continue
		}
		delete(g.seen, k)
		of := prometheus.Labels{"namespace": k.namespace, "name": k.name}
		for _, c := range []interface{ DeletePartialMatch(prometheus.Labels) int }{g.startup, g.execution, g.created, g.reaped} {
			c.DeletePartialMatch(of)
		}
	}
}
