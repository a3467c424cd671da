package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
)

// groupLabels label every per-group series: a group's namespace and
// name, so their number is bounded by the groups, whatever jobs and
// repositories they serve.
var groupLabels = []string{"namespace", "name"}

// reapReasons are the reasons a pass reaps a group's runners for, each
// served from 0 once the group is seen, in groupCounts.reaped's order.
var reapReasons = [...]string{passreport.ReapStartTimeout, passreport.ReapIdle, passreport.ReapOrphan}

// jobBuckets is how many bounds each job histogram has. They are few on
// purpose: each costs a series per group, and the job metrics are 28
// series a group, beside the six gauges.
const jobBuckets = 9

var (
	startupBounds   = [jobBuckets]float64{5, 10, 20, 30, 60, 120, 300, 600, 1800}
	executionBounds = [jobBuckets]float64{30, 60, 120, 300, 600, 1200, 1800, 3600, 7200}
)

// groupJobs serves the per-group counters of runners and histograms of
// jobs, made into metrics only when scraped, as groupGauges does the
// gauges. A HistogramVec or CounterVec keeps a series object per group
// with its label pairs, its own buckets and bookkeeping: the 28 series of
// a group cost 4.6 KiB, 22 MiB of a loop's live heap at 5,000 groups
// (BenchmarkGroupSeriesMemory). Here a group costs its two names and the
// numbers in groupCounts.
type groupJobs struct {
	startup, execution, created, reaped *prometheus.Desc

	mu sync.Mutex
	// counts are the groups with series: a full pass deletes those of
	// the groups it no longer serves.
	counts map[groupKey]*groupCounts
	now    func() time.Time
}

// groupCounts are one group's numbers since it was first seen.
type groupCounts struct {
	// since is when the group was first seen: its series' created
	// timestamp, as a Vec's series would have it.
	since              time.Time
	created            float64
	reaped             [len(reapReasons)]float64
	startup, execution jobHistogram
}

// jobHistogram is what a classic histogram keeps: the observations
// per bound (not cumulative; one over every bound is only in count),
// their count and their sum.
type jobHistogram struct {
	buckets [jobBuckets]uint64
	count   uint64
	sum     float64
}

// observe adds v to the first bucket whose bound is at least v, as
// prometheus.Histogram does: a bound is inclusive.
func (h *jobHistogram) observe(bounds *[jobBuckets]float64, v float64) {
	i := 0
	for i < jobBuckets && v > bounds[i] {
		i++
	}
	if i < jobBuckets {
		h.buckets[i]++
	}
	h.count++
	h.sum += v
}

func newGroupJobs() *groupJobs {
	return &groupJobs{
		counts: map[groupKey]*groupCounts{},
		now:    time.Now,
		startup: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "job_startup_duration_seconds"),
			"Time from a Gitea job's creation to its start on one of the RunnerGroup's runners, by Gitea's created_at and started_at; each job once.",
			groupLabels, nil),
		execution: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "job_execution_duration_seconds"),
			"Time from a Gitea job's start on one of the RunnerGroup's runners to its end, by Gitea's started_at and completed_at in the job's completed webhook delivery; each job once.",
			groupLabels, nil),
		created: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "runners_created_total"),
			"Runner Jobs the RunnerGroup's passes created.", groupLabels, nil),
		reaped: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "runners_reaped_total"),
			"The RunnerGroup's runners that went, by reason: start_timeout (the Job's pod never started), idle (surplus runner reaped), orphan (registration without a Job removed).",
			[]string{"namespace", "name", "reason"}, nil),
	}
}

// observe adds a pass's numbers. After a full pass only the groups it
// served keep series, as the per-group gauges do; a partial one (a
// webhook's) adds to the groups it served.
func (g *groupJobs) observe(stats []passreport.GroupStats, partial bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var served map[groupKey]bool
	if !partial {
		served = make(map[groupKey]bool, len(stats))
	}
	for _, s := range stats {
		k := groupKey{s.Namespace, s.Name}
		if served != nil {
			served[k] = true
		}
		c := g.counts[k]
		if c == nil {
			// Served from 0, so the first runner or job a rate sees
			// is not lost to a series that starts with it.
			c = &groupCounts{since: g.now()}
			g.counts[k] = c
		}
		c.created += float64(s.Created)
		c.reaped[0] += float64(s.StartTimeouts)
		c.reaped[1] += float64(s.IdleReaps)
		c.reaped[2] += float64(s.OrphansRemoved)
		for _, d := range s.Startups {
			c.startup.observe(&startupBounds, d.Seconds())
		}
		for _, d := range s.Executions {
			c.execution.observe(&executionBounds, d.Seconds())
		}
	}
	if partial {
		return
	}
	for k := range g.counts {
		if !served[k] {
			delete(g.counts, k)
		}
	}
}

// Describe implements prometheus.Collector.
func (g *groupJobs) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{g.startup, g.execution, g.created, g.reaped} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: see scrapedSeries.
func (g *groupJobs) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, c := range g.counts {
		scrape := newGroupScrape(k, c.since)
		ch <- scrape.histogram(g.startup, &c.startup, &startupBounds)
		ch <- scrape.histogram(g.execution, &c.execution, &executionBounds)
		ch <- scrape.counter(g.created, c.created)
		for i := range reapReasons {
			ch <- scrape.reaped(g.reaped, i, c.reaped[i])
		}
	}
}
