package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// scrapedSeries is one per-group series as a scrape writes it. A scrape
// holds every series it gathered until it has written them all, so what
// one costs, every group pays at once: at 5,000 groups of 34 series,
// each 100 bytes a series are 16 MiB. Const metrics (prometheus.MustNewConstMetric) make
// each series its own label pairs, created timestamp and, for a
// histogram, a map and a bucket object with two numbers apiece; here a
// group's series share one set of label pairs and one timestamp made per
// scrape (groupScrape), and a histogram's buckets are made in one piece.
// A scrape never changes what it gathered, so sharing is safe.
type scrapedSeries struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	// One of these is set: the series' value, as read at Collect.
	gauge, counter *float64
	histogram      *dto.Histogram
	created        *timestamppb.Timestamp
}

// Desc implements prometheus.Metric.
func (s *scrapedSeries) Desc() *prometheus.Desc { return s.desc }

// Write implements prometheus.Metric.
func (s *scrapedSeries) Write(m *dto.Metric) error {
	m.Label = s.labels
	switch {
	case s.gauge != nil:
		m.Gauge = &dto.Gauge{Value: s.gauge}
	case s.counter != nil:
		m.Counter = &dto.Counter{Value: s.counter, CreatedTimestamp: s.created}
	default:
		m.Histogram = s.histogram
	}
	return nil
}

// Label names, and the reasons' label pairs, the same in every scrape.
var (
	nameLabel, namespaceLabel, reasonLabel = "name", "namespace", "reason"
	reasonPairs                            = func() (out [len(reapReasons)]*dto.LabelPair) {
		for i := range reapReasons {
			out[i] = &dto.LabelPair{Name: &reasonLabel, Value: &reapReasons[i]}
		}
		return out
	}()
)

// groupScrape makes a group's series for one scrape.
type groupScrape struct {
	labels  []*dto.LabelPair
	created *timestamppb.Timestamp
}

// newGroupScrape makes the label pairs of k (sorted by name, as a scrape
// wants them) and, when since is not zero, the created timestamp its
// series share.
func newGroupScrape(k groupKey, since time.Time) groupScrape {
	pairs := [2]dto.LabelPair{}
	pairs[0].Name, pairs[0].Value = &nameLabel, &k.name
	pairs[1].Name, pairs[1].Value = &namespaceLabel, &k.namespace
	g := groupScrape{labels: []*dto.LabelPair{&pairs[0], &pairs[1]}}
	if !since.IsZero() {
		g.created = timestamppb.New(since)
	}
	return g
}

func (g groupScrape) gauge(d *prometheus.Desc, v float64) *scrapedSeries {
	return &scrapedSeries{desc: d, labels: g.labels, gauge: &v}
}

func (g groupScrape) counter(d *prometheus.Desc, v float64) *scrapedSeries {
	return &scrapedSeries{desc: d, labels: g.labels, counter: &v, created: g.created}
}

// reaped is the counter of reason reapReasons[i].
func (g groupScrape) reaped(d *prometheus.Desc, i int, v float64) *scrapedSeries {
	return &scrapedSeries{desc: d, labels: []*dto.LabelPair{g.labels[0], g.labels[1], reasonPairs[i]}, counter: &v, created: g.created}
}

// histogram is h as a scrape serves it: the counts up to each bound.
func (g groupScrape) histogram(d *prometheus.Desc, h *jobHistogram, bounds *[jobBuckets]float64) *scrapedSeries {
	type made struct {
		h          dto.Histogram
		buckets    [jobBuckets]dto.Bucket
		pointers   [jobBuckets]*dto.Bucket
		cumulative [jobBuckets]uint64
		count      uint64
		sum        float64
	}
	m := &made{count: h.count, sum: h.sum}
	var n uint64
	for i := range bounds {
		n += h.buckets[i]
		m.cumulative[i] = n
		m.buckets[i].CumulativeCount, m.buckets[i].UpperBound = &m.cumulative[i], &bounds[i]
		m.pointers[i] = &m.buckets[i]
	}
	m.h.SampleCount, m.h.SampleSum, m.h.Bucket, m.h.CreatedTimestamp = &m.count, &m.sum, m.pointers[:], g.created
	return &scrapedSeries{desc: d, labels: g.labels, histogram: &m.h}
}
