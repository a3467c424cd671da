//go:build e2e

// The scale benchmark: whole `gitea-runner-scaler run` processes against
// the bed's real API server, through a proxy that counts their requests,
// and a counting Gitea stand-in (internal/gitea/giteatest, whose answers
// are checked against Gitea 1.26's recordings in internal/gitea) serving
// thousands of jobs. Each case prints a first and a steady pass. (The
// figures measured against the naive design, before its code path was
// removed, stay in the reliability docs.)
//
// `make bench` runs the full matrix (BENCH=full); the e2e suite runs a
// small one so the harness cannot rot. Nothing here asserts a time: the
// machines are shared. It fails when a pass's request counts or a steady
// pass's writes exceed their goals.

package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
)

// benchCase is one point of the matrix: groups over targets (orgs), with
// queued jobs spread evenly over the targets.
type benchCase struct {
	groups, targets, jobs int
}

func (c benchCase) String() string {
	return fmt.Sprintf("G=%d T=%d J=%d", c.groups, c.targets, c.jobs)
}

// benchMatrix is the full matrix of make bench, or the smoke matrix of the
// e2e suite.
func benchMatrix(full bool) []benchCase {
	if !full {
		return []benchCase{{1, 1, 0}, {10, 1, 100}, {10, 10, 100}}
	}
	var out []benchCase
	for _, g := range []int{1, 10, 100, 500} {
		for _, t := range []int{1, 10} {
			if t > g {
				continue
			}
			for _, j := range []int{0, 100, 5000} {
				out = append(out, benchCase{g, t, j})
			}
		}
	}
	return out
}

// kubeCount counts the requests that pass through the API proxy.
type kubeCount struct {
	reads, writes, events, configMaps, statuses, jobs atomic.Int64
}

func (k *kubeCount) reset() {
	for _, c := range []*atomic.Int64{&k.reads, &k.writes, &k.events, &k.configMaps, &k.statuses, &k.jobs} {
		c.Store(0)
	}
}

func (k *kubeCount) hook(w http.ResponseWriter, r *http.Request, _ func(*http.Request) *httptest.ResponseRecorder) bool {
	// A SelfSubjectRulesReview (is the namespace enabled?) is a POST that
	// stores nothing: a read.
	if r.Method == http.MethodGet || strings.Contains(r.URL.Path, "/selfsubject") {
		k.reads.Add(1)
		return false
	}
	k.writes.Add(1)
	switch p := r.URL.Path; {
	case strings.HasSuffix(p, "/status"):
		k.statuses.Add(1)
	case strings.Contains(p, "/events"):
		k.events.Add(1)
	case strings.Contains(p, "/configmaps"):
		k.configMaps.Add(1)
	case strings.Contains(p, "/jobs"):
		k.jobs.Add(1)
	}
	return false
}

// benchPass is what one pass cost.
type benchPass struct {
	wall                                                  time.Duration
	exit                                                  int
	gitea                                                 int
	reads, writes, events, configMaps, statuses, jobsMade int64
	rss                                                   int64
	// changed counts the groups whose status (lastCheckTime aside) this
	// pass changed: the status patches a pass may send.
	changed int64
	// giteaAsked and log say, when a goal fails, which Gitea requests the
	// pass sent and what it logged.
	giteaAsked []string
	log        string
}

func (p benchPass) String() string {
	return fmt.Sprintf("wall=%7.2fs gitea=%6d kube-reads=%5d kube-writes=%5d (status=%d of %d changed, configmaps=%d events=%d jobs=%d) rss=%5.1fMiB exit=%d",
		p.wall.Seconds(), p.gitea, p.reads, p.writes, p.statuses, p.changed, p.configMaps, p.events, p.jobsMade, float64(p.rss)/(1<<20), p.exit)
}

// TestBenchmarkScale runs the matrix and prints, per case, the first pass
// (which writes each group's empty state ConfigMap) and a steady pass
// (nothing to create).
func TestBenchmarkScale(t *testing.T) {
	// Alone on the bed: its figures must not measure other tests.
	e2e.Exclusive(t)
	full := os.Getenv("BENCH") == "full"
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, map[bool]time.Duration{true: 90 * time.Minute, false: 5 * time.Minute}[full])

	gt := giteatest.New()
	t.Cleanup(gt.Close)
	token := "bench-" + e2e.Uniq("token")
	gt.AddToken(token, "root", true)
	api := b.NewAPIProxy(t)
	kc := &kubeCount{}
	api.Set(kc.hook)

	var report []string
	for _, c := range benchMatrix(full) {
		loadBenchScene(t, gt, c)
		ns := b.Namespace(ctx, t, "e2e-bench", nil)
		benchGroups(b, ctx, t, ns, gt.URL, token, c)
		args := []string{"--gitea-timeout", "10s"}
		var passes []benchPass
		before := groupStatuses(b, ctx, t, ns)
		for range 2 {
			gt.ResetRequests()
			kc.reset()
			res := b.Pass(ctx, t, e2e.PassOpts{Namespaces: []string{ns}, Kubeconfig: api.Kubeconfig, Args: args, Deadline: 20 * time.Minute})
			asked := gt.Requests()
			p := benchPass{wall: res.Took, exit: res.Exit, gitea: len(asked), giteaAsked: asked, log: res.Log,
				reads: kc.reads.Load(), writes: kc.writes.Load(), events: kc.events.Load(), configMaps: kc.configMaps.Load(),
				statuses: kc.statuses.Load(), jobsMade: kc.jobs.Load(), rss: res.PeakRSS}
			after := groupStatuses(b, ctx, t, ns)
			for name, st := range after {
				if st != before[name] {
					p.changed++
				}
			}
			before = after
			passes = append(passes, p)
			if res.Exit != 0 {
				t.Errorf("%s: the pass failed (exit %d)\n%s", c, res.Exit, e2e.Redact(e2e.Tail(res.Log, 20)))
			}
		}
		dropNamespace(b, ctx, t, ns)
		for i, kind := range []string{"first ", "steady"} {
			report = append(report, fmt.Sprintf("%-18s %s %s", c, kind, passes[i]))
		}
		checkBenchGoals(t, c, passes)
	}
	t.Log("scale benchmark (" + map[bool]string{true: "full", false: "smoke"}[full] + "):\n" + strings.Join(report, "\n"))
}

// checkBenchGoals fails the benchmark when a pass costs more requests
// than its goal: Gitea requests per pass = distinct targets ×
// pages (one listing of all statuses per page, plus the runners listing of
// the lifecycle per target, plus the registration token's check per
// distinct target and tokens, which a pass in a process of its own makes
// every time); a steady pass writes no Event, no ConfigMap, no Job and at
// most one status patch per group whose status changed.
func checkBenchGoals(t *testing.T, c benchCase, passes []benchPass) {
	t.Helper()
	perTarget := c.jobs / c.targets
	pages := max(1, (perTarget+gitea.DefaultPageSize-1)/gitea.DefaultPageSize)
	goal := c.targets * (pages + 2)
	for i, p := range passes {
		if p.gitea > goal {
			t.Errorf("%s pass %d: %d Gitea requests, over the goal of %d (%d targets × (%d pages + 1 runners listing + 1 registration token check)); asked:\n%s\nthe pass's log:\n%s",
				c, i+1, p.gitea, goal, c.targets, pages, strings.Join(p.giteaAsked[:min(len(p.giteaAsked), 40)], "\n"), e2e.Redact(e2e.Tail(p.log, 40)))
		}
	}
	steady := passes[1]
	assert.Zero(t, steady.events, "%s: a steady pass records no Event", c)
	assert.Zero(t, steady.configMaps, "%s: a steady pass writes no ConfigMap", c)
	assert.Zero(t, steady.jobsMade, "%s: a steady pass creates no Job", c)
	assert.LessOrEqual(t, steady.statuses, steady.changed, "%s: a steady pass patches only the statuses that changed, each once", c)
}

// groupStatuses are the statuses of ns's groups by name, without
// lastCheckTime (which moves with any change, and on its own only every
// scaler.StatusHeartbeat), as JSON to compare.
func groupStatuses(b *e2e.Testbed, ctx context.Context, t *testing.T, ns string) map[string]string {
	t.Helper()
	list, err := b.Groups(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]string{}
	for _, u := range list.Items {
		st, _, _ := unstructured.NestedMap(u.Object, "status")
		delete(st, "lastCheckTime")
		raw, err := json.Marshal(st)
		require.NoError(t, err)
		out[u.GetName()] = string(raw)
	}
	return out
}

// loadBenchScene gives the stand-in c's targets (orgs bench-0..) with one
// repository each and c's queued jobs spread over them, on a label no
// benchmark group offers: every pass lists them all and creates nothing.
func loadBenchScene(t *testing.T, gt *giteatest.Server, c benchCase) {
	t.Helper()
	sc := giteatest.Scene{Users: []string{"root"}}
	for i := range c.targets {
		org := fmt.Sprintf("bench-%d", i)
		sc.Orgs = append(sc.Orgs, giteatest.Org{Name: org, Members: []string{"root"}, Owners: []string{"root"}})
		sc.Repos = append(sc.Repos, giteatest.Repo{Owner: org, Name: "app"})
	}
	for j := range c.jobs {
		sc.Jobs = append(sc.Jobs, giteatest.Job{ID: int64(j + 1), Owner: fmt.Sprintf("bench-%d", j%c.targets), Repo: "app",
			RunID: int64(j/10 + 1), Name: fmt.Sprintf("job-%d", j), Labels: []string{"ubuntu-latest"}, Status: giteatest.StatusQueued})
	}
	require.NoError(t, gt.Load(sc))
	// The groups' registration token is each org's, as the scaler checks.
	for _, o := range sc.Orgs {
		gt.SetRegistrationToken(o.Name, "bench-registration")
	}
}

// benchGroups creates c's groups in ns, group i serving target i mod T,
// all with one token Secret and a label no job needs.
func benchGroups(b *e2e.Testbed, ctx context.Context, t *testing.T, ns, giteaURL, token string, c benchCase) {
	t.Helper()
	b.TokenSecret(ctx, t, ns, "bench-tokens", "bench-registration", token)
	off := false
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				spec := v1alpha1.RunnerGroupSpec{
					Scope: v1alpha1.ScopeOrg, Org: fmt.Sprintf("bench-%d", i%c.targets),
					Gitea:             v1alpha1.GiteaSpec{URL: giteaURL},
					Labels:            []string{"bench-nobody"},
					DefaultLabels:     &off,
					MaxActiveRunners:  5,
					RegistrationToken: &v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "bench-tokens", Key: "registration"}},
					AuthToken:         v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "bench-tokens", Key: "api"}},
				}
				rg := &v1alpha1.RunnerGroup{
					TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("g%03d", i), Namespace: ns},
					Spec:       spec,
				}
				obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rg)
				if err == nil {
					_, err = b.Groups(ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range c.groups {
		work <- i
	}
	close(work)
	wg.Wait()
	require.NoError(t, errors.Join(errs...), "create the benchmark's RunnerGroups")
}

// dropNamespace deletes a case's namespace as soon as the case is done,
// so the API server does not carry every case's groups into the next.
func dropNamespace(b *e2e.Testbed, ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	if err := b.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete namespace %s: %v", ns, err)
	}
}
