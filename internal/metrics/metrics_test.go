package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

func TestObservePassCountsPassesRunnersAndGroups(t *testing.T) {
	m := New()
	m.ObservePass(passreport.Summary{Groups: 2, Created: 3, GroupStats: []passreport.GroupStats{
		{Namespace: "ci", Name: "a", Queued: 4, Blocked: 1, Running: 2, Active: 3, Idle: 1, Max: 5, StartTimeouts: 1},
		{Namespace: "ci", Name: "gone", Queued: 9, Max: 9, IdleReaps: 2, OrphansRemoved: 1},
	}, QueuedToJob: []time.Duration{2 * time.Second, 4 * time.Second}}, 1500*time.Millisecond, nil)
	m.ObservePass(passreport.Summary{Groups: 1, Failed: []string{"ci/a"}, GroupStats: []passreport.GroupStats{
		{Namespace: "ci", Name: "a", Queued: 1, Max: 5, Failed: true},
	}}, time.Second, nil)
	m.ObservePass(passreport.Summary{}, time.Second, errors.New("cannot list RunnerGroups"))

	assert.InDelta(t, 1, testutil.ToFloat64(m.passes.WithLabelValues("ok")), 0)
	assert.InDelta(t, 1, testutil.ToFloat64(m.passes.WithLabelValues("failed")), 0)
	assert.InDelta(t, 1, testutil.ToFloat64(m.passes.WithLabelValues("error")), 0)
	assert.InDelta(t, 1, counterOf(t, m, "runners_reaped_total", "ci", "a", "start_timeout"), 0)
	assert.Equal(t, map[string]float64{"ci/a": 1}, groupSeries(t, m, "runnergroup_queued_jobs"), "the last pass's value; the group that is gone has no series left")
	assert.Equal(t, map[string]float64{"ci/a": 5}, groupSeries(t, m, "runnergroup_max_runners"))
	assert.Equal(t, 6, testutil.CollectAndCount(m.groups), "one series per gauge for the one group")

	m.ObservePass(passreport.Summary{Partial: true, GroupStats: []passreport.GroupStats{{Namespace: "ci", Name: "b", Queued: 2, Idle: 1}}}, time.Second, nil)
	assert.Equal(t, map[string]float64{"ci/a": 1, "ci/b": 2}, groupSeries(t, m, "runnergroup_queued_jobs"), "a partial pass keeps the groups it did not serve")
	assert.Equal(t, map[string]float64{"ci/a": 0, "ci/b": 1}, groupSeries(t, m, "runnergroup_idle_runners"))
	assert.Equal(t, 12, testutil.CollectAndCount(m.groups))
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Contains(t, rec.Body.String(), "giteascaler_pass_duration_seconds_count 4")
	assert.Contains(t, rec.Body.String(), "giteascaler_queued_to_job_seconds_count 2")
	assert.Contains(t, rec.Body.String(), "giteascaler_queued_to_job_seconds_sum 6")
}

// groupSeries are the values of the per-group gauge name by
// "namespace/name", as a scrape gathers them.
func groupSeries(t *testing.T, m *Metrics, name string) map[string]float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "giteascaler_"+name {
			continue
		}
		assert.Equal(t, "GAUGE", f.GetType().String())
		for _, metric := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range metric.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[l["namespace"]+"/"+l["name"]] = metric.GetGauge().GetValue()
		}
	}
	return out
}

// The sweep of deleted namespaces: registrations removed are counted
// apart from any group (theirs are gone), and the groups of deleted namespaces
// left behind are a gauge by reason, replaced by each pass that swept and
// kept by one that did not (a webhook's).
func TestObservePassReportsTheSweepOfDeletedNamespaces(t *testing.T) {
	m := New()
	m.ObservePass(passreport.Summary{DeletedNamespaces: passreport.DeletedNamespacesReport{Removed: 2,
		Left: map[string]int{passreport.LeftNoToken: 3}}}, time.Second, nil)
	m.ObservePass(passreport.Summary{Partial: true}, time.Second, nil)
	assert.InDelta(t, 2, testutil.ToFloat64(m.deletedNSRemoved), 0)
	assert.InDelta(t, 3, testutil.ToFloat64(m.deletedNSLeft.WithLabelValues(passreport.LeftNoToken)), 0, "kept by a pass that did not sweep")

	m.ObservePass(passreport.Summary{DeletedNamespaces: passreport.DeletedNamespacesReport{Left: map[string]int{passreport.LeftRunning: 1}}}, time.Second, nil)
	assert.InDelta(t, 0, testutil.ToFloat64(m.deletedNSLeft.WithLabelValues(passreport.LeftNoToken)), 0)
	assert.InDelta(t, 1, testutil.ToFloat64(m.deletedNSLeft.WithLabelValues(passreport.LeftRunning)), 0)
}

func TestTransportsCountRequestsByCodeAndTarget(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "nope") {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	m := New()
	gc := &http.Client{Transport: m.GiteaTransport(http.DefaultTransport)}
	kc := &http.Client{Transport: m.KubeTransport(http.DefaultTransport)}
	get := func(c *http.Client, target *scope.Place, url string) error {
		ctx := context.Background()
		if target != nil {
			ctx = gitea.WithTarget(ctx, *target)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		require.NoError(t, err)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	org := new(scope.New("", gitea.ScopeOrg, "acme", ""))
	repo := new(scope.New("", gitea.ScopeRepo, "acme", "nope"))
	for _, r := range []struct {
		target *scope.Place
		path   string
	}{
		{org, "/api/v1/orgs/acme/actions/jobs?page=1"},
		{org, "/api/v1/orgs/acme/actions/jobs?page=2"},
		{repo, "/git/api/v1/repos/acme/nope/actions/jobs"},
		{new(scope.New("", gitea.ScopeGlobal, "", "")), "/api/v1/admin/actions/runners"},
		{nil, "/api/v1/version"},
	} {
		require.NoError(t, get(gc, r.target, srv.URL+r.path))
	}
	require.NoError(t, get(kc, nil, srv.URL+"/api/v1/namespaces/ci/pods"))
	require.Error(t, get(gc, new(scope.New("", gitea.ScopeUser, "alice", "")), "http://127.0.0.1:1/api/v1/user/actions/jobs"))

	assert.InDelta(t, 2, testutil.ToFloat64(m.giteaRequests.WithLabelValues("200", "orgs/acme")), 0)
	assert.InDelta(t, 1, testutil.ToFloat64(m.giteaRequests.WithLabelValues("404", "repos/acme/nope")), 0, "Gitea under a sub-path")
	assert.InDelta(t, 1, testutil.ToFloat64(m.giteaRequests.WithLabelValues("200", "admin")), 0)
	assert.InDelta(t, 1, testutil.ToFloat64(m.giteaRequests.WithLabelValues("200", "other")), 0, "not made for a target")
	assert.InDelta(t, 1, testutil.ToFloat64(m.giteaRequests.WithLabelValues("0", "users/alice")), 0, "no answer")
	assert.InDelta(t, 1, testutil.ToFloat64(m.kubeRequests.WithLabelValues("GET", "200")), 0)
	g, k := m.Requests()
	assert.Equal(t, int64(6), g)
	assert.Equal(t, int64(1), k)
}

func TestHandlerServesTheMetrics(t *testing.T) {
	m := New()
	m.ObservePass(passreport.Summary{Created: 1, GroupStats: []passreport.GroupStats{{Namespace: "ci", Name: "a", Created: 1}}}, time.Second, nil)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Equal(t, http.StatusOK, rec.Code)
	for _, name := range []string{"giteascaler_passes_total", "giteascaler_pass_duration_seconds", `giteascaler_runners_created_total{name="a",namespace="ci"} 1`,
		"giteascaler_runners_reaped_total", "giteascaler_job_startup_duration_seconds_bucket", "go_goroutines", "process_resident_memory_bytes"} {
		assert.Contains(t, rec.Body.String(), name)
	}
}

// gitea_requests_total is labelled by the target a group's spec names, not
// by what Gitea's answers lead to: a user-scope group whose user has many
// repositories (one listing each) adds one series per status code, not
// one per repository.
func TestGiteaRequestSeriesAreBoundedByTheGroupsTargets(t *testing.T) {
	srv := giteatest.New()
	t.Cleanup(srv.Close)
	srv.AddToken("tok", "alice", false)
	scene := giteatest.Scene{Users: []string{"alice"}}
	for i := range 40 {
		scene.Repos = append(scene.Repos, giteatest.Repo{Owner: "alice", Name: fmt.Sprintf("r%d", i)})
	}
	require.NoError(t, srv.Load(scene))
	m := New()
	c, err := gitea.NewClient(srv.URL, "tok", gitea.Options{HTTPClient: &http.Client{Transport: m.GiteaTransport(http.DefaultTransport)}})
	require.NoError(t, err)
	for range 3 {
		_, err := c.Snapshot(t.Context(), scope.New("", gitea.ScopeUser, "alice", ""))
		require.NoError(t, err)
	}
	g, _ := m.Requests()
	assert.Greater(t, g, int64(40*3), "every repository was listed")
	assert.Equal(t, 1, testutil.CollectAndCount(m.giteaRequests), "one series: code 200, target users/alice")
	assert.InDelta(t, float64(g), testutil.ToFloat64(m.giteaRequests.WithLabelValues("200", "users/alice")), 0)
}

// Each number a pass sees of a group has a gauge of its own, named for
// what it counts, labelled only by the group.
func TestGroupGaugesAreNamedForWhatTheyCount(t *testing.T) {
	m := New()
	m.ObservePass(passreport.Summary{Groups: 1, GroupStats: []passreport.GroupStats{
		{Namespace: "ci", Name: "a", Queued: 4, Blocked: 1, Running: 2, Active: 3, Idle: 1, Max: 5},
	}}, time.Second, nil)
	want := `
# HELP giteascaler_runnergroup_active_runners Runner Jobs of the RunnerGroup not yet complete or failed (status.activeRunners).
# TYPE giteascaler_runnergroup_active_runners gauge
giteascaler_runnergroup_active_runners{name="a",namespace="ci"} 3
# HELP giteascaler_runnergroup_blocked_jobs Gitea jobs of the RunnerGroup waiting for their needs or an approval (status.blockedJobs).
# TYPE giteascaler_runnergroup_blocked_jobs gauge
giteascaler_runnergroup_blocked_jobs{name="a",namespace="ci"} 1
# HELP giteascaler_runnergroup_idle_runners Runners of the RunnerGroup whose pod runs and that run no Gitea job (status.idleRunners).
# TYPE giteascaler_runnergroup_idle_runners gauge
giteascaler_runnergroup_idle_runners{name="a",namespace="ci"} 1
# HELP giteascaler_runnergroup_max_runners The RunnerGroup's cap on active runners (spec.maxActiveRunners).
# TYPE giteascaler_runnergroup_max_runners gauge
giteascaler_runnergroup_max_runners{name="a",namespace="ci"} 5
# HELP giteascaler_runnergroup_queued_jobs Queued Gitea jobs the RunnerGroup can serve, as the last pass saw them (status.queuedJobs).
# TYPE giteascaler_runnergroup_queued_jobs gauge
giteascaler_runnergroup_queued_jobs{name="a",namespace="ci"} 4
# HELP giteascaler_runnergroup_running_jobs Gitea jobs in progress on the RunnerGroup's runners (status.runningJobs).
# TYPE giteascaler_runnergroup_running_jobs gauge
giteascaler_runnergroup_running_jobs{name="a",namespace="ci"} 2
`
	require.NoError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"giteascaler_runnergroup_active_runners", "giteascaler_runnergroup_blocked_jobs", "giteascaler_runnergroup_idle_runners",
		"giteascaler_runnergroup_max_runners", "giteascaler_runnergroup_queued_jobs", "giteascaler_runnergroup_running_jobs"))
	n, err := testutil.GatherAndCount(m.Registry(), "giteascaler_runnergroup")
	require.NoError(t, err)
	assert.Zero(t, n, "the gauge that mixed jobs, runners and the cap under one label is gone")
}

func TestGiteaLatencyIsObservedByCodeMethodAndTarget(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	m := New()
	c := &http.Client{Transport: m.GiteaTransport(http.DefaultTransport)}
	org := gitea.WithTarget(context.Background(), scope.New("", gitea.ScopeOrg, "acme", ""))
	for _, r := range []struct {
		ctx    context.Context
		method string
	}{{org, http.MethodGet}, {org, http.MethodGet}, {org, http.MethodDelete}, {context.Background(), http.MethodGet}} {
		req, err := http.NewRequestWithContext(r.ctx, r.method, srv.URL+"/api/v1/x", nil)
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	req, err := http.NewRequestWithContext(org, http.MethodGet, "http://127.0.0.1:1/api/v1/x", nil)
	require.NoError(t, err)
	_, err = c.Do(req) //nolint:bodyclose // an error carries no body
	require.Error(t, err)

	count := func(code, method, target string) uint64 {
		h, ok := m.giteaLatency.WithLabelValues(code, method, target).(prometheus.Histogram)
		require.True(t, ok)
		var out dto.Metric
		require.NoError(t, h.Write(&out))
		return out.GetHistogram().GetSampleCount()
	}
	assert.Equal(t, uint64(2), count("200", "get", "orgs/acme"))
	assert.Equal(t, uint64(1), count("404", "delete", "orgs/acme"))
	assert.Equal(t, uint64(1), count("200", "get", "other"))
	assert.Equal(t, 3, testutil.CollectAndCount(m.giteaLatency), "no series for the request without an answer (it counts as code 0 in gitea_requests_total)")
	assert.InDelta(t, 1, testutil.ToFloat64(m.giteaRequests.WithLabelValues("0", "orgs/acme")), 0)
	g, _ := m.Requests()
	assert.Equal(t, int64(5), g, "the counts are unchanged by the timing")
}

func TestBuildInfoNamesTheVersions(t *testing.T) {
	m := New()
	m.SetBuildInfo("v1.2.3")
	m.SetBuildInfo("v1.2.4")
	assert.Equal(t, 1, testutil.CollectAndCount(m.buildInfo), "one series, the last version set")
	assert.InDelta(t, 1, testutil.ToFloat64(m.buildInfo.WithLabelValues("v1.2.4", runtime.Version())), 0)
}

func TestLastSuccessfulPassIsTheEndOfTheLastFullPassThatRan(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	m := New()
	m.now = func() time.Time { return now }
	assert.Zero(t, testutil.ToFloat64(m.lastSuccess), "no pass yet")

	for _, c := range []struct {
		name string
		sum  passreport.Summary
		err  error
		want time.Time
	}{
		{"every group served", passreport.Summary{Groups: 1}, nil, time.Unix(1_700_000_010, 0)},
		{"a group failed: the pass still ran", passreport.Summary{Groups: 2, Failed: []string{"ci/a"}}, nil, time.Unix(1_700_000_020, 0)},
		{"the pass could not run", passreport.Summary{}, errors.New("cannot list RunnerGroups"), time.Unix(1_700_000_020, 0)},
		{"a webhook's partial pass", passreport.Summary{Partial: true, Groups: 1}, nil, time.Unix(1_700_000_020, 0)},
	} {
		now = now.Add(10 * time.Second)
		m.ObservePass(c.sum, time.Second, c.err)
		assert.InDelta(t, float64(c.want.Unix()), testutil.ToFloat64(m.lastSuccess), 0, c.name)
	}
}

func TestHealthzFailsWhenNoFullPassEndedWithinTheLimit(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	now := start
	m := New()
	m.start = start
	m.now = func() time.Time { return now }
	h := m.Healthz(time.Minute)
	code := func() int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code
	}
	for _, c := range []struct {
		name    string
		advance time.Duration
		pass    *passreport.Summary
		err     error
		want    int
	}{
		{"just started", 0, nil, nil, http.StatusOK},
		{"the first pass may take the limit", time.Minute, nil, nil, http.StatusOK},
		{"no pass ended since the start", time.Second, nil, nil, http.StatusServiceUnavailable},
		{"a pass that could not run still ended: a restart would not help", 0, &passreport.Summary{}, errors.New("forbidden"), http.StatusOK},
		{"fresh", 59 * time.Second, nil, nil, http.StatusOK},
		{"a webhook's partial pass does not prove the loop polls", 0, &passreport.Summary{Partial: true}, nil, http.StatusOK},
		{"stale", 2 * time.Second, nil, nil, http.StatusServiceUnavailable},
		{"a full pass ends", 0, &passreport.Summary{Groups: 1}, nil, http.StatusOK},
	} {
		now = now.Add(c.advance)
		if c.pass != nil {
			m.ObservePass(*c.pass, time.Second, c.err)
		}
		assert.Equal(t, c.want, code(), c.name)
	}
}

// The chart's alerts and dashboard are checked against the scaler's
// metric names as scripts/tools/promrules/scaler-metrics.txt lists them
// (charts/gitea-runner-operator/hack/check-prometheus-rules.sh); this keeps
// that list equal to what the scaler serves.
func TestScalerMetricNamesListIsCurrent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	m := New()
	m.SetBuildInfo("v0.0.0")
	m.WebhookDelivery("triggered")
	m.ObservePass(passreport.Summary{Groups: 1, Created: 1, QueuedToJob: []time.Duration{time.Second},
		GroupStats: []passreport.GroupStats{{Namespace: "ci", Name: "a"}}}, time.Second, nil)
	for _, tr := range []http.RoundTripper{m.GiteaTransport(http.DefaultTransport), m.KubeTransport(http.DefaultTransport)} {
		resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
		require.NoError(t, err)
		resp.Body.Close()
	}
	families, err := m.Registry().Gather()
	require.NoError(t, err)
	var served []string
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), ns+"_") {
			served = append(served, f.GetName())
		}
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "scripts", "tools", "promrules", "scaler-metrics.txt"))
	require.NoError(t, err)
	var listed []string
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			listed = append(listed, l)
		}
	}
	assert.ElementsMatch(t, served, listed, "scaler-metrics.txt lists every metric the scaler serves, and no other")
}
