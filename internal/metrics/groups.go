package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
)

// groupGauges serves the per-group gauges (groupGaugeDefs) from the last
// passes' numbers, made into metrics only when scraped. A GaugeVec keeps
// a series object with its label pairs per group and gauge: at 5,000
// groups, 30,000 of them, 16 MiB of a loop's live heap, all made again by
// every full pass. Here a group costs its two names and six
// numbers.
type groupGauges struct {
	descs []*prometheus.Desc
	mu    sync.Mutex
	last  map[groupKey][]float64
}

type groupKey struct{ namespace, name string }

func newGroupGauges() *groupGauges {
	g := &groupGauges{last: map[groupKey][]float64{}}
	for _, d := range groupGaugeDefs {
		g.descs = append(g.descs, prometheus.NewDesc(prometheus.BuildFQName(ns, "", d.name), d.help, []string{"namespace", "name"}, nil))
	}
	return g
}

// observe records a pass's numbers: a full pass's replace them all, so a
// deleted group's series go with it; a partial one's (a webhook's) update
// the groups it served.
func (g *groupGauges) observe(stats []passreport.GroupStats, partial bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !partial {
		g.last = make(map[groupKey][]float64, len(stats))
	}
	for _, s := range stats {
		g.last[groupKey{s.Namespace, s.Name}] = []float64{
			float64(s.Queued), float64(s.Blocked), float64(s.Running), float64(s.Active), float64(s.Idle), float64(s.Max)}
	}
}

// Describe implements prometheus.Collector.
func (g *groupGauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range g.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: see scrapedSeries.
func (g *groupGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, values := range g.last {
		scrape := newGroupScrape(k, time.Time{})
		for i, d := range g.descs {
			ch <- scrape.gauge(d, values[i])
		}
	}
}
