package metrics

import (
	"testing"
	"time"

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
		{"created a", testutil.ToFloat64(m.jobs.created.WithLabelValues("ci", "a")), 3},
		{"created b", testutil.ToFloat64(m.jobs.created.WithLabelValues("ci", "b")), 1},
		{"idle a", testutil.ToFloat64(m.jobs.reaped.WithLabelValues("ci", "a", passreport.ReapIdle)), 1},
		{"start timeout b", testutil.ToFloat64(m.jobs.reaped.WithLabelValues("ci", "b", passreport.ReapStartTimeout)), 1},
		{"orphan b", testutil.ToFloat64(m.jobs.reaped.WithLabelValues("ci", "b", passreport.ReapOrphan)), 2},
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

func TestFullPassDropsTheSeriesOfGroupsItNoLongerServes(t *testing.T) {
	m := New()
	m.ObservePass(passreport.Summary{GroupStats: []passreport.GroupStats{
		{Namespace: "ci", Name: "a", Startups: []time.Duration{time.Second}},
		{Namespace: "ci", Name: "gone", Created: 1, Executions: []time.Duration{time.Minute}},
	}}, time.Second, nil)
	perGroup := 1 + 1 + 1 + len(reapReasons) // two histograms, created, reaped by reason
	require.Equal(t, 2*perGroup, testutil.CollectAndCount(m.jobs.startup)+testutil.CollectAndCount(m.jobs.execution)+
		testutil.CollectAndCount(m.jobs.created)+testutil.CollectAndCount(m.jobs.reaped))

	m.ObservePass(passreport.Summary{Partial: true, GroupStats: []passreport.GroupStats{{Namespace: "ci", Name: "a"}}}, time.Second, nil)
	assert.Equal(t, 2, testutil.CollectAndCount(m.jobs.created), "a partial pass keeps the groups it did not serve")

	m.ObservePass(passreport.Summary{GroupStats: []passreport.GroupStats{{Namespace: "ci", Name: "a"}}}, time.Second, nil)
	assert.Equal(t, perGroup, testutil.CollectAndCount(m.jobs.startup)+testutil.CollectAndCount(m.jobs.execution)+
		testutil.CollectAndCount(m.jobs.created)+testutil.CollectAndCount(m.jobs.reaped), "the group that is gone has no series left")
	assert.Equal(t, uint64(1), histogramOf(t, m, "job_startup_duration_seconds", "ci", "a").GetSampleCount(), "the served group keeps its samples")

	m.ObservePass(passreport.Summary{GroupStats: []passreport.GroupStats{{Namespace: "ci", Name: "gone"}}}, time.Second, nil)
	assert.Equal(t, uint64(0), histogramOf(t, m, "job_execution_duration_seconds", "ci", "gone").GetSampleCount(), "a group made again starts from 0")
}

// histogramOf is the per-group histogram name of the group, as a scrape
// gathers it.
func histogramOf(t *testing.T, m *Metrics, name, namespace, group string) *dto.Histogram {
	t.Helper()
	families, err := m.Registry().Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != ns+"_"+name {
			continue
		}
		for _, metric := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range metric.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["namespace"] == namespace && l["name"] == group {
				return metric.GetHistogram()
			}
		}
	}
	require.Failf(t, "no series", "%s{namespace=%q,name=%q}", name, namespace, group)
	return nil
}
