package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scaler"
)

func TestObservePassCountsPassesRunnersAndGroups(t *testing.T) {
	m := New()
	m.ObservePass(scaler.Summary{Groups: 2, Created: 3, GroupStats: []scaler.GroupStats{
		{Namespace: "ci", Name: "a", Queued: 4, Blocked: 1, Running: 2, Active: 3, Idle: 1, Max: 5, StartTimeouts: 1},
		{Namespace: "ci", Name: "gone", Queued: 9, Max: 9, IdleReaps: 2, OrphansRemoved: 1},
	}, QueuedToJob: []time.Duration{2 * time.Second, 4 * time.Second}}, 1500*time.Millisecond, nil)
	m.ObservePass(scaler.Summary{Groups: 1, Failed: []string{"ci/a"}, GroupStats: []scaler.GroupStats{
		{Namespace: "ci", Name: "a", Queued: 1, Max: 5, Failed: true},
	}}, time.Second, nil)
	m.ObservePass(scaler.Summary{}, time.Second, errors.New("cannot list RunnerGroups"))

	assert.InDelta(t, 1, testutil.ToFloat64(m.passes.WithLabelValues("ok")), 0)
	assert.InDelta(t, 1, testutil.ToFloat64(m.passes.WithLabelValues("failed")), 0)
	assert.InDelta(t, 1, testutil.ToFloat64(m.passes.WithLabelValues("error")), 0)
	assert.InDelta(t, 3, testutil.ToFloat64(m.runnersCreated), 0)
	assert.InDelta(t, 1, testutil.ToFloat64(m.runnersReaped.WithLabelValues("start_timeout")), 0)
	assert.InDelta(t, 2, testutil.ToFloat64(m.runnersReaped.WithLabelValues("idle")), 0)
	assert.InDelta(t, 1, testutil.ToFloat64(m.runnersReaped.WithLabelValues("orphan")), 0)
	assert.InDelta(t, 1, testutil.ToFloat64(m.group.WithLabelValues("ci", "a", "queued")), 0, "the last pass's value")
	assert.Equal(t, 6, testutil.CollectAndCount(m.group), "the group that is gone has no series left")

	m.ObservePass(scaler.Summary{Partial: true, GroupStats: []scaler.GroupStats{{Namespace: "ci", Name: "b", Queued: 2}}}, time.Second, nil)
	assert.Equal(t, 12, testutil.CollectAndCount(m.group), "a partial pass keeps the groups it did not serve")
	assert.InDelta(t, 1, testutil.ToFloat64(m.group.WithLabelValues("ci", "a", "queued")), 0)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Contains(t, rec.Body.String(), "gitea_runner_scaler_pass_duration_seconds_count 4")
	assert.Contains(t, rec.Body.String(), "gitea_runner_scaler_queued_to_job_seconds_count 2")
	assert.Contains(t, rec.Body.String(), "gitea_runner_scaler_queued_to_job_seconds_sum 6")
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
	get := func(c *http.Client, target *gitea.Target, url string) error {
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
	org := &gitea.Target{Scope: gitea.ScopeOrg, Owner: "acme"}
	repo := &gitea.Target{Scope: gitea.ScopeRepo, Owner: "acme", Repo: "nope"}
	for _, r := range []struct {
		target *gitea.Target
		path   string
	}{
		{org, "/api/v1/orgs/acme/actions/jobs?page=1"},
		{org, "/api/v1/orgs/acme/actions/jobs?page=2"},
		{repo, "/git/api/v1/repos/acme/nope/actions/jobs"},
		{&gitea.Target{Scope: gitea.ScopeGlobal}, "/api/v1/admin/actions/runners"},
		{nil, "/api/v1/version"},
	} {
		require.NoError(t, get(gc, r.target, srv.URL+r.path))
	}
	require.NoError(t, get(kc, nil, srv.URL+"/api/v1/namespaces/ci/pods"))
	require.Error(t, get(gc, &gitea.Target{Scope: gitea.ScopeUser, Owner: "alice"}, "http://127.0.0.1:1/api/v1/user/actions/jobs"))

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
	m.ObservePass(scaler.Summary{Created: 1}, time.Second, nil)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Equal(t, http.StatusOK, rec.Code)
	for _, name := range []string{"gitea_runner_scaler_passes_total", "gitea_runner_scaler_pass_duration_seconds", "gitea_runner_scaler_runners_created_total 1",
		"gitea_runner_scaler_runners_reaped_total", "go_goroutines", "process_resident_memory_bytes"} {
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
		_, err := c.Snapshot(t.Context(), gitea.Target{Scope: gitea.ScopeUser, Owner: "alice"})
		require.NoError(t, err)
	}
	g, _ := m.Requests()
	assert.Greater(t, g, int64(40*3), "every repository was listed")
	assert.Equal(t, 1, testutil.CollectAndCount(m.giteaRequests), "one series: code 200, target users/alice")
	assert.InDelta(t, float64(g), testutil.ToFloat64(m.giteaRequests.WithLabelValues("200", "users/alice")), 0)
}
