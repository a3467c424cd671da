package metrics

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
)

func TestJobHistogramsAndRunnerCountersArePerGroup(t *testing.T) {
	m := New()
	m.ObservePass(passreport.Summary{GroupStats: []passreport.GroupStats{
		{Namespace: "ci", Name: "a", Created: 2, IdleReaps: 1, Startups: []time.Duration{4 * time.Second, 50 * time.Second}, Executions: []time.Duration{90 * time.Second}},
		{Namespace: "ci", Name: "b", Created: 1, StartTimeouts: 1, OrphansRemoved: 2},
	}}, time.Second, nil)
	m.ObservePass(passreport.Summary{Partial: true, GroupStats: []passreport.GroupStats{
		{Namespace: "ci", Name: "a", Created: 1, Startups: []time.Duration{7 * time.Second}},
	}}, time.Second, nil)

	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"created a", counterOf(t, m, "runners_created_total", "ci", "a", ""), 3},
		{"created b", counterOf(t, m, "runners_created_total", "ci", "b", ""), 1},
		{"idle a", counterOf(t, m, "runners_reaped_total", "ci", "a", passreport.ReapIdle), 1},
		{"start timeout b", counterOf(t, m, "runners_reaped_total", "ci", "b", passreport.ReapStartTimeout), 1},
		{"orphan b", counterOf(t, m, "runners_reaped_total", "ci", "b", passreport.ReapOrphan), 2},
	}
	for _, tt := range tests {
		assert.InDelta(t, tt.want, tt.got, 0, tt.name)
	}
	startupA := histogramOf(t, m, "job_startup_duration_seconds", "ci", "a")
	assert.Equal(t, uint64(3), startupA.GetSampleCount())
	assert.InDelta(t, 61, startupA.GetSampleSum(), 0)
	assert.Equal(t, uint64(1), startupA.GetBucket()[0].GetCumulativeCount(), "4s is under the first bound, 5s")
	assert.Equal(t, uint64(1), histogramOf(t, m, "job_execution_duration_seconds", "ci", "a").GetSampleCount())
	assert.Equal(t, uint64(0), histogramOf(t, m, "job_startup_duration_seconds", "ci", "b").GetSampleCount(), "served from 0 before its first job")
}

// jobFamilies are the names of the per-group job metrics, as served.
var jobFamilies = []string{"giteascaler_job_startup_duration_seconds", "giteascaler_job_execution_duration_seconds",
	"giteascaler_runners_created_total", "giteascaler_runners_reaped_total"}

func TestFullPassDropsTheSeriesOfGroupsItNoLongerServes(t *testing.T) {
	m := New()
	m.ObservePass(passreport.Summary{GroupStats: []passreport.GroupStats{
		{Namespace: "ci", Name: "a", Startups: []time.Duration{time.Second}},
		{Namespace: "ci", Name: "gone", Created: 1, Executions: []time.Duration{time.Minute}},
	}}, time.Second, nil)
	perGroup := 1 + 1 + 1 + len(reapReasons) // two histograms, created, reaped by reason
	require.Equal(t, 2*perGroup, testutil.CollectAndCount(m.jobs, jobFamilies...))

	m.ObservePass(passreport.Summary{Partial: true, GroupStats: []passreport.GroupStats{{Namespace: "ci", Name: "a"}}}, time.Second, nil)
	assert.Equal(t, 2, testutil.CollectAndCount(m.jobs, "giteascaler_runners_created_total"), "a partial pass keeps the groups it did not serve")

	m.ObservePass(passreport.Summary{GroupStats: []passreport.GroupStats{{Namespace: "ci", Name: "a"}}}, time.Second, nil)
	assert.Equal(t, perGroup, testutil.CollectAndCount(m.jobs, jobFamilies...), "the group that is gone has no series left")
	assert.Equal(t, uint64(1), histogramOf(t, m, "job_startup_duration_seconds", "ci", "a").GetSampleCount(), "the served group keeps its samples")

	m.ObservePass(passreport.Summary{GroupStats: []passreport.GroupStats{{Namespace: "ci", Name: "gone"}}}, time.Second, nil)
	assert.Equal(t, uint64(0), histogramOf(t, m, "job_execution_duration_seconds", "ci", "gone").GetSampleCount(), "a group made again starts from 0")
}

// A scrape serves the job metrics as the Vecs they replaced did: names,
// help, labels, buckets (a bound is inclusive, what is over the last is
// only in +Inf and the count), every series from 0 once its group is
// seen, partial passes adding, a full pass keeping only its groups.
func TestJobMetricsScrapeAsTheirVecsWould(t *testing.T) {
	tests := []struct {
		name   string
		passes []passreport.Summary
	}{
		{"none", nil},
		{"a group first seen is served from 0", []passreport.Summary{
			{GroupStats: []passreport.GroupStats{{Namespace: "ci", Name: "a"}}},
		}},
		{"bounds are inclusive; over the last is +Inf only", []passreport.Summary{
			{GroupStats: []passreport.GroupStats{{Namespace: "ci", Name: "a",
				Startups:   []time.Duration{0, 5 * time.Second, 5*time.Second + time.Millisecond, 1800 * time.Second, time.Hour},
				Executions: []time.Duration{30 * time.Second, 7200 * time.Second, 7201 * time.Second}}}},
		}},
		{"partial passes add, a full pass keeps its groups", []passreport.Summary{
			{GroupStats: []passreport.GroupStats{
				{Namespace: "ci", Name: "a", Created: 2, IdleReaps: 1, Startups: []time.Duration{12 * time.Second}},
				{Namespace: "ci", Name: "b", Created: 1, StartTimeouts: 1, OrphansRemoved: 3}}},
			{Partial: true, GroupStats: []passreport.GroupStats{
				{Namespace: "ci", Name: "a", Created: 1, Executions: []time.Duration{4 * time.Minute}},
				{Namespace: "other", Name: "a", Created: 1}}},
			{GroupStats: []passreport.GroupStats{
				{Namespace: "ci", Name: "a", IdleReaps: 2, Startups: []time.Duration{25 * time.Second}},
				{Namespace: "other", Name: "a", OrphansRemoved: 1}}},
		}},
		{"a group that went and came back starts from 0", []passreport.Summary{
			{GroupStats: []passreport.GroupStats{{Namespace: "ci", Name: "a", Created: 4, Startups: []time.Duration{time.Minute}}}},
			{GroupStats: []passreport.GroupStats{{Namespace: "ci", Name: "b"}}},
			{GroupStats: []passreport.GroupStats{{Namespace: "ci", Name: "a", Created: 1}}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			want := newVecJobs()
			for _, sum := range tt.passes {
				m.ObservePass(sum, time.Second, nil)
				want.observe(sum.GroupStats, sum.Partial)
			}
			vecs := prometheus.NewPedanticRegistry()
			vecs.MustRegister(want.startup, want.execution, want.created, want.reaped)
			ours := prometheus.NewPedanticRegistry()
			ours.MustRegister(m.jobs)
			assert.Equal(t, scrape(t, vecs), scrape(t, ours))
		})
	}
}

// What a scrape reads of one group, written out.
func TestJobMetricsOfAGroupAsScraped(t *testing.T) {
	m := New()
	m.ObservePass(passreport.Summary{GroupStats: []passreport.GroupStats{{Namespace: "ci", Name: "a", Created: 2, IdleReaps: 1,
		Startups: []time.Duration{4 * time.Second, 5 * time.Second, 50 * time.Second, 2 * time.Hour}, Executions: []time.Duration{90 * time.Second}}}}, time.Second, nil)
	want := `
# HELP giteascaler_job_execution_duration_seconds Time from a Gitea job's start on one of the RunnerGroup's runners to its end, by Gitea's started_at and completed_at in the job's completed webhook delivery; each job once.
# TYPE giteascaler_job_execution_duration_seconds histogram
giteascaler_job_execution_duration_seconds_bucket{name="a",namespace="ci",le="30"} 0
giteascaler_job_execution_duration_seconds_bucket{name="a",namespace="ci",le="60"} 0
giteascaler_job_execution_duration_seconds_bucket{name="a",namespace="ci",le="120"} 1
giteascaler_job_execution_duration_seconds_bucket{name="a",namespace="ci",le="300"} 1
giteascaler_job_execution_duration_seconds_bucket{name="a",namespace="ci",le="600"} 1
giteascaler_job_execution_duration_seconds_bucket{name="a",namespace="ci",le="1200"} 1
giteascaler_job_execution_duration_seconds_bucket{name="a",namespace="ci",le="1800"} 1
giteascaler_job_execution_duration_seconds_bucket{name="a",namespace="ci",le="3600"} 1
giteascaler_job_execution_duration_seconds_bucket{name="a",namespace="ci",le="7200"} 1
giteascaler_job_execution_duration_seconds_bucket{name="a",namespace="ci",le="+Inf"} 1
giteascaler_job_execution_duration_seconds_sum{name="a",namespace="ci"} 90
giteascaler_job_execution_duration_seconds_count{name="a",namespace="ci"} 1
# HELP giteascaler_job_startup_duration_seconds Time from a Gitea job's creation to its start on one of the RunnerGroup's runners, by Gitea's created_at and started_at; each job once.
# TYPE giteascaler_job_startup_duration_seconds histogram
giteascaler_job_startup_duration_seconds_bucket{name="a",namespace="ci",le="5"} 2
giteascaler_job_startup_duration_seconds_bucket{name="a",namespace="ci",le="10"} 2
giteascaler_job_startup_duration_seconds_bucket{name="a",namespace="ci",le="20"} 2
giteascaler_job_startup_duration_seconds_bucket{name="a",namespace="ci",le="30"} 2
giteascaler_job_startup_duration_seconds_bucket{name="a",namespace="ci",le="60"} 3
giteascaler_job_startup_duration_seconds_bucket{name="a",namespace="ci",le="120"} 3
giteascaler_job_startup_duration_seconds_bucket{name="a",namespace="ci",le="300"} 3
giteascaler_job_startup_duration_seconds_bucket{name="a",namespace="ci",le="600"} 3
giteascaler_job_startup_duration_seconds_bucket{name="a",namespace="ci",le="1800"} 3
giteascaler_job_startup_duration_seconds_bucket{name="a",namespace="ci",le="+Inf"} 4
giteascaler_job_startup_duration_seconds_sum{name="a",namespace="ci"} 7259
giteascaler_job_startup_duration_seconds_count{name="a",namespace="ci"} 4
# HELP giteascaler_runners_created_total Runner Jobs the RunnerGroup's passes created.
# TYPE giteascaler_runners_created_total counter
giteascaler_runners_created_total{name="a",namespace="ci"} 2
# HELP giteascaler_runners_reaped_total The RunnerGroup's runners that went, by reason: start_timeout (the Job's pod never started), idle (surplus runner reaped), orphan (registration without a Job removed).
# TYPE giteascaler_runners_reaped_total counter
giteascaler_runners_reaped_total{name="a",namespace="ci",reason="idle"} 1
giteascaler_runners_reaped_total{name="a",namespace="ci",reason="orphan"} 0
giteascaler_runners_reaped_total{name="a",namespace="ci",reason="start_timeout"} 0
`
	require.NoError(t, testutil.CollectAndCompare(m.jobs, strings.NewReader(want), jobFamilies...))
}

// Each series of a group is created, for a scraper that reads created
// timestamps, when the group was first seen, as a Vec's would be: a
// group that went and came back is created again.
func TestJobSeriesAreCreatedWhenTheirGroupIsFirstSeen(t *testing.T) {
	m := New()
	now := time.Unix(1_800_000_000, 0)
	m.jobs.now = func() time.Time { return now }
	a := passreport.Summary{GroupStats: []passreport.GroupStats{{Namespace: "ci", Name: "a", Created: 1}}}
	m.ObservePass(a, time.Second, nil)
	first := now
	now = now.Add(time.Minute)
	m.ObservePass(a, time.Second, nil)
	created := func() map[time.Time]int {
		out := map[time.Time]int{}
		for _, name := range []string{"job_startup_duration_seconds", "job_execution_duration_seconds", "runners_created_total", "runners_reaped_total"} {
			for _, metric := range seriesOf(t, m, name) {
				ts := metric.GetCounter().GetCreatedTimestamp()
				if h := metric.GetHistogram(); h != nil {
					ts = h.GetCreatedTimestamp()
				}
				out[ts.AsTime()]++
			}
		}
		return out
	}
	assert.Equal(t, map[time.Time]int{first.UTC(): 1 + 1 + 1 + len(reapReasons)}, created(), "a later pass does not make them again")

	m.ObservePass(passreport.Summary{}, time.Second, nil)
	m.ObservePass(a, time.Second, nil)
	assert.Equal(t, map[time.Time]int{now.UTC(): 1 + 1 + 1 + len(reapReasons)}, created())
}

// A scrape may come while a pass is observed, one that adds groups and
// drops others: each group's numbers are read whole, never half of a
// pass's.
func TestJobMetricsScrapeDuringAPass(t *testing.T) {
	m := New()
	var stats []passreport.GroupStats
	for i := range 100 {
		stats = append(stats, passreport.GroupStats{Namespace: "ci", Name: fmt.Sprintf("g%02d", i), Created: 1, Startups: []time.Duration{time.Second}})
	}
	// Passes run until 100 scrapes have been read, each a group's
	// numbers: a runner created and a job started per pass.
	stop := make(chan struct{})
	passes := 0
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Half the groups each pass, shifted by one from the last
			// pass's: one is new, one gone.
			from := passes % 50
			m.ObservePass(passreport.Summary{GroupStats: stats[from : from+50]}, time.Second, nil)
			passes++
		}
	})
	for range 100 {
		families, err := m.Registry().Gather()
		require.NoError(t, err)
		created, started := map[string]float64{}, map[string]float64{}
		for _, f := range families {
			for _, metric := range f.GetMetric() {
				key := labelOf(metric, "namespace") + "/" + labelOf(metric, "name")
				switch f.GetName() {
				case "giteascaler_runners_created_total":
					created[key] = metric.GetCounter().GetValue()
				case "giteascaler_job_startup_duration_seconds":
					started[key] = float64(metric.GetHistogram().GetSampleCount())
				}
			}
		}
		require.Equal(t, created, started, "read together")
	}
	close(stop)
	wg.Wait()
	assert.InDelta(t, passes, counterOf(t, m, "runners_created_total", "ci", "g49", ""), 0, "in every pass")
	assert.Equal(t, 50, testutil.CollectAndCount(m.jobs, "giteascaler_runners_created_total"), "the last pass's groups")
	t.Logf("%d passes during the scrapes", passes)
}

// scrape is what a scrape of reg reads, in the text format.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	return rec.Body.String()
}

// vecJobs are the job metrics as client_golang Vecs keep them, fed as
// groupJobs is: what a scrape of groupJobs must match.
type vecJobs struct {
	startup, execution *prometheus.HistogramVec
	created, reaped    *prometheus.CounterVec
	seen               map[groupKey]bool
}

func newVecJobs() *vecJobs {
	return &vecJobs{
		seen: map[groupKey]bool{},
		startup: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "job_startup_duration_seconds",
			Help:    "Time from a Gitea job's creation to its start on one of the RunnerGroup's runners, by Gitea's created_at and started_at; each job once.",
			Buckets: []float64{5, 10, 20, 30, 60, 120, 300, 600, 1800}}, []string{"namespace", "name"}),
		execution: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "job_execution_duration_seconds",
			Help:    "Time from a Gitea job's start on one of the RunnerGroup's runners to its end, by Gitea's started_at and completed_at in the job's completed webhook delivery; each job once.",
			Buckets: []float64{30, 60, 120, 300, 600, 1200, 1800, 3600, 7200}}, []string{"namespace", "name"}),
		created: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "runners_created_total",
			Help: "Runner Jobs the RunnerGroup's passes created."}, []string{"namespace", "name"}),
		reaped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "runners_reaped_total",
			Help: "The RunnerGroup's runners that went, by reason: start_timeout (the Job's pod never started), idle (surplus runner reaped), orphan (registration without a Job removed)."},
			[]string{"namespace", "name", "reason"}),
	}
}

func (v *vecJobs) observe(stats []passreport.GroupStats, partial bool) {
	served := map[groupKey]bool{}
	for _, s := range stats {
		k := groupKey{s.Namespace, s.Name}
		served[k], v.seen[k] = true, true
		v.created.WithLabelValues(s.Namespace, s.Name).Add(float64(s.Created))
		v.reaped.WithLabelValues(s.Namespace, s.Name, passreport.ReapStartTimeout).Add(float64(s.StartTimeouts))
		v.reaped.WithLabelValues(s.Namespace, s.Name, passreport.ReapIdle).Add(float64(s.IdleReaps))
		v.reaped.WithLabelValues(s.Namespace, s.Name, passreport.ReapOrphan).Add(float64(s.OrphansRemoved))
		h := v.startup.WithLabelValues(s.Namespace, s.Name)
		for _, d := range s.Startups {
			h.Observe(d.Seconds())
		}
		h = v.execution.WithLabelValues(s.Namespace, s.Name)
		for _, d := range s.Executions {
			h.Observe(d.Seconds())
		}
	}
	if partial {
		return
	}
	for k := range v.seen {
		if !served[k] {
			delete(v.seen, k)
			of := prometheus.Labels{"namespace": k.namespace, "name": k.name}
			v.startup.DeletePartialMatch(of)
			v.execution.DeletePartialMatch(of)
			v.created.DeletePartialMatch(of)
			v.reaped.DeletePartialMatch(of)
		}
	}
}

// counterOf is the value of the per-group counter name of the group, by
// reason when reason is not empty, as a scrape gathers it.
func counterOf(t *testing.T, m *Metrics, name, namespace, group, reason string) float64 {
	t.Helper()
	for _, metric := range seriesOf(t, m, name) {
		if labelOf(metric, "namespace") == namespace && labelOf(metric, "name") == group && labelOf(metric, "reason") == reason {
			return metric.GetCounter().GetValue()
		}
	}
	require.Failf(t, "no series", "%s{namespace=%q,name=%q,reason=%q}", name, namespace, group, reason)
	return 0
}

// histogramOf is the per-group histogram name of the group, as a scrape
// gathers it.
func histogramOf(t *testing.T, m *Metrics, name, namespace, group string) *dto.Histogram {
	t.Helper()
	for _, metric := range seriesOf(t, m, name) {
		if labelOf(metric, "namespace") == namespace && labelOf(metric, "name") == group {
			return metric.GetHistogram()
		}
	}
	require.Failf(t, "no series", "%s{namespace=%q,name=%q}", name, namespace, group)
	return nil
}

// seriesOf are the series of the metric name, as a scrape gathers them.
func seriesOf(t *testing.T, m *Metrics, name string) []*dto.Metric {
	t.Helper()
	families, err := m.Registry().Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == ns+"_"+name {
			return f.GetMetric()
		}
	}
	return nil
}

// labelOf is the value of the label name of metric; empty when it has none.
func labelOf(metric *dto.Metric, name string) string {
	for _, p := range metric.GetLabel() {
		if p.GetName() == name {
			return p.GetValue()
		}
	}
	return ""
}
