//go:build e2e

// Kubernetes faults on the bed's real API server: passes racing for one
// state ConfigMap, Job creation refused by a ResourceQuota, a RunnerGroup
// deleted in the middle of a pass, the API server restarted between passes
// or down during one, and the answer to a Job create lost after the API
// server wrote the Job (through internal/e2e's apiproxy.go).

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	watchtools "k8s.io/client-go/tools/watch"
)

// stateClaims reads the group's state ConfigMap: its claims, Gitea job ID
// to runner Job name. A missing ConfigMap is no claims.
func stateClaims(b *e2e.Testbed, ctx context.Context, t *testing.T, ns, group string) map[string]string {
	t.Helper()
	cm, err := b.Kube.CoreV1().ConfigMaps(ns).Get(ctx, group+"-runner-state", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	var doc struct {
		Spawned map[string]struct {
			JobName string `json:"jobName"`
		} `json:"spawned"`
	}
	require.NoError(t, json.Unmarshal([]byte(cm.Data[e2e.StateDataKey]), &doc), "state ConfigMap of %s", group)
	out := map[string]string{}
	for id, c := range doc.Spawned {
		out[id] = c.JobName
	}
	return out
}

// TestFaultKubeRacingPassesShareOneStateConfigMap starts four scaler
// processes at once on one group, twice: first with no state ConfigMap yet
// (they race to create it), then with one (they race to update it). The
// API server proxy holds every ConfigMap write back until the namespace's
// ConfigMaps have been read as often as there are passes (at most 20 s)
// and then a second more, so the passes have read the state before any
// write lands, however far apart a loaded machine starts them, and all
// but one lose the race. In all, each Gitea job gets exactly one runner
// Job and the cap holds.
func TestFaultKubeRacingPassesShareOneStateConfigMap(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 4*time.Minute)
	const (
		racers = 4
		jobs   = 12
		cap1   = 8
	)
	fx := b.NewOrgScope(ctx, t, e2e.Uniq("e2e-fault-race"))
	label := e2e.Uniq("e2e-race")
	ids := b.QueueJobs(ctx, t, fx, "race.yml", map[string]int{label: jobs})[label]
	ns := b.QuietNamespace(ctx, t, "e2e-fault-race")
	b.FaultGroup(ctx, t, ns, "raced", fx, b.Gitea.Admin.URL(), cap1, label)
	var (
		mu    sync.Mutex
		reads int
		read  chan struct{} // closed once the round's passes have read
	)
	api := b.NewAPIProxy(t)
	api.Set(func(w http.ResponseWriter, r *http.Request, forward func(*http.Request) *httptest.ResponseRecorder) bool {
		if e2e.ConfigMapRead(r, ns) {
			mu.Lock()
			if reads++; reads == racers {
				close(read)
			}
			mu.Unlock()
			return false
		}
		if !e2e.ConfigMapWrite(r, ns) {
			return false
		}
		mu.Lock()
		wait := read
		mu.Unlock()
		select {
		case <-wait:
		case <-time.After(20 * time.Second):
		}
		time.Sleep(time.Second)
		e2e.CopyTo(w, forward(r))
		return true
	})

	race := func(round string) {
		t.Helper()
		mu.Lock()
		reads, read = 0, make(chan struct{})
		mu.Unlock()
		runs := make([]*e2e.PassRun, racers)
		for i := range runs {
			runs[i] = b.StartPass(ctx, t, e2e.PassOpts{Namespaces: []string{ns}, Kubeconfig: api.Kubeconfig})
		}
		conflicts := 0
		var exits []int
		for _, r := range runs {
			res := r.Wait(t)
			e2e.RequireSanePass(t, res, round)
			exits = append(exits, res.Exit)
			conflicts += len(e2e.Lines(res.Log, "state changed under this pass"))
		}
		t.Logf("%s: %d passes at once, exit codes %v, %d lost races for the state ConfigMap", round, racers, exits, conflicts)
		require.Positive(t, conflicts, "%s: the passes did not race", round)
	}

	race("round 1 (no state yet)")
	by, line := b.RunnersPerJob(ctx, t, ns, "raced")
	n := 0
	for _, id := range ids {
		require.LessOrEqual(t, len(by[id]), 1, "Gitea job #%d\n%s", id, line)
		n += len(by[id])
	}
	require.Equal(t, cap1, n, "runner Jobs after round 1, at maxActiveRunners %d\n%s", cap1, line)
	require.Equal(t, cap1, len(by), line)

	b.PatchGroup(ctx, t, ns, "raced", map[string]any{"spec": map[string]any{"maxActiveRunners": jobs}})
	race("round 2 (state to update)")
	b.RequireOneRunnerEach(ctx, t, ns, "raced", ids, "after two rounds of racing passes")
}

// TestFaultKubeJobQuotaRefusalReleasesTheClaim: a ResourceQuota admits one
// Job in the namespace, and three jobs are queued. The pass creates one
// runner Job; the API server refuses the other two, and the pass fails the
// group (RunnerJobCreateFailed, naming the quota) and releases their claims,
// so that once the quota is raised the next pass serves them at once, each
// with exactly one runner Job.
func TestFaultKubeJobQuotaRefusalReleasesTheClaim(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 4*time.Minute)
	fx := b.NewOrgScope(ctx, t, e2e.Uniq("e2e-fault-quota"))
	label := e2e.Uniq("e2e-quota")
	ids := b.QueueJobs(ctx, t, fx, "quota.yml", map[string]int{label: 3})[label]
	ns := b.QuietNamespace(ctx, t, "e2e-fault-quota")
	jobsQuota := func(n string) corev1.ResourceList {
		return corev1.ResourceList{"count/jobs.batch": resource.MustParse(n)}
	}
	b.Quota(ctx, t, ns, "jobs", jobsQuota("1"))
	b.FaultGroup(ctx, t, ns, "limited", fx, b.Gitea.Admin.URL(), 5, label)

	first := b.Pass(ctx, t, e2e.PassOpts{Namespaces: []string{ns}})
	e2e.RequireSanePass(t, first, "pass under the quota")
	require.Equal(t, 1, first.Exit, "a group whose Jobs were refused fails the pass")
	require.Equal(t, map[string]string{ns + "/limited": "RunnerJobCreateFailed"}, e2e.PassFailures(first))
	all, err := b.RunnerJobs(ctx, ns, "limited")
	require.NoError(t, err)
	require.Equal(t, 1, len(all), "the quota admits one Job: %v", e2e.JobNames(all))
	rg, ready := b.ReadyOf(ctx, t, ns, "limited")
	require.Equal(t, metav1.ConditionFalse, ready.Status, e2e.StatusLine(rg))
	require.Equal(t, "RunnerJobCreateFailed", ready.Reason, e2e.StatusLine(rg))
	require.Contains(t, ready.Message, "exceeded quota", e2e.StatusLine(rg))
	exists := map[string]bool{all[0].Name: true}
	for id, job := range stateClaims(b, ctx, t, ns, "limited") {
		require.True(t, exists[job], "the claim of Gitea job %s names runner Job %s, which the API server refused: it must be released", id, job)
	}

	b.Quota(ctx, t, ns, "jobs", jobsQuota("10"))
	second := b.Pass(ctx, t, e2e.PassOpts{Namespaces: []string{ns}})
	e2e.RequireSanePass(t, second, "pass after the quota was raised")
	require.Equal(t, 0, second.Exit, e2e.Redact(e2e.Tail(second.Log, 30)))
	b.RequireOneRunnerEach(ctx, t, ns, "limited", ids, "after the quota was raised")
	b.RequireReady(ctx, t, ns, "limited", "after the quota was raised")
	t.Logf("pass under the quota: exit %d in %s; after raising it: exit %d in %s", first.Exit, first.Took.Round(time.Millisecond), second.Exit, second.Took.Round(time.Millisecond))
}

// TestFaultKubeGroupDeletedMidPassLeavesTheOthersServed: two groups in one
// namespace, "doomed" with ten queued jobs and "kept" with two. The API
// server proxy deletes doomed right after the API server created its third
// runner Job, before the pass hears back. The pass must not fail kept,
// must not make doomed's state ConfigMap again, and what doomed leaves
// behind goes with it.
func TestFaultKubeGroupDeletedMidPassLeavesTheOthersServed(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 4*time.Minute)
	const deleteAfter = 3
	fx := b.NewOrgScope(ctx, t, e2e.Uniq("e2e-fault-deleted"))
	doomedLabel, keptLabel := e2e.Uniq("e2e-doomed"), e2e.Uniq("e2e-kept")
	queued := b.QueueJobs(ctx, t, fx, "deleted.yml", map[string]int{doomedLabel: 10, keptLabel: 2})
	ns := b.QuietNamespace(ctx, t, "e2e-fault-deleted")
	b.FaultGroup(ctx, t, ns, "doomed", fx, b.Gitea.Admin.URL(), 10, doomedLabel)
	b.FaultGroup(ctx, t, ns, "kept", fx, b.Gitea.Admin.URL(), 5, keptLabel)
	stateName := "doomed-runner-state"

	// Every ConfigMap event of the namespace, from before the pass. A
	// retry watcher from a listed resourceVersion, because the API server
	// may end a plain watch early under load, and the test would then
	// count fewer creations than there were.
	cms := b.Kube.CoreV1().ConfigMaps(ns)
	before, err := cms.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	w, err := watchtools.NewRetryWatcherWithContext(ctx, before.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return cms.Watch(ctx, o) },
	})
	require.NoError(t, err)
	var (
		mu     sync.Mutex
		events []watch.Event
	)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ev := range w.ResultChan() {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}
	}()

	api := b.NewAPIProxy(t)
	var (
		created   int
		deletedAt time.Time
		deleteErr error
	)
	api.Set(func(w http.ResponseWriter, r *http.Request, forward func(*http.Request) *httptest.ResponseRecorder) bool {
		body, ok := e2e.JobCreate(r, ns)
		if !ok || !bytes.Contains(body, []byte("doomed-")) {
			return false
		}
		rec := forward(r)
		mu.Lock()
		if rec.Code == http.StatusCreated {
			created++
			if created == deleteAfter {
				deleteErr = b.Groups(ns).Delete(r.Context(), "doomed", metav1.DeleteOptions{})
				deletedAt = time.Now()
			}
		}
		mu.Unlock()
		e2e.CopyTo(w, rec)
		return true
	})

	res := b.Pass(ctx, t, e2e.PassOpts{Namespaces: []string{ns}, Kubeconfig: api.Kubeconfig})
	e2e.RequireSanePass(t, res, "pass during which a group was deleted")
	mu.Lock()
	require.NoError(t, deleteErr, "deleting RunnerGroup doomed")
	require.False(t, deletedAt.IsZero(), "the pass created %d runner Jobs of doomed, fewer than %d: it was never deleted mid-pass", created, deleteAfter)
	createdAfter := created - deleteAfter
	mu.Unlock()
	t.Logf("pass: exit %d in %s; doomed was deleted after its runner Job %d, and the pass created %d more for it", res.Exit, res.Took.Round(time.Millisecond), deleteAfter, createdAfter)
	require.NotContains(t, e2e.PassFailures(res), ns+"/kept", "the pass failed kept")
	b.RequireOneRunnerEach(ctx, t, ns, "kept", queued[keptLabel], "kept, in the pass that lost doomed")
	b.RequireReady(ctx, t, ns, "kept", "kept, in the pass that lost doomed")

	// Doomed's runner Jobs and state go with it (the garbage collector).
	e2e.WaitUntil(ctx, t, e2e.StepWait, "doomed's runner Jobs and state ConfigMap gone", nil, func(ctx context.Context) (bool, string, error) {
		all, err := b.RunnerJobs(ctx, ns, "doomed")
		if err != nil {
			return false, err.Error(), nil
		}
		_, err = b.Kube.CoreV1().ConfigMaps(ns).Get(ctx, stateName, metav1.GetOptions{})
		gone := apierrors.IsNotFound(err)
		return len(all) == 0 && gone, fmt.Sprintf("runner Jobs %v, ConfigMap gone: %v", e2e.JobNames(all), gone), nil
	})
	w.Stop()
	<-watched
	var uids []types.UID
	for _, ev := range events {
		require.NotEqual(t, watch.Error, ev.Type, "the ConfigMap watch failed: %v", ev.Object)
		if cm, ok := ev.Object.(*corev1.ConfigMap); ok && cm.Name == stateName && ev.Type == watch.Added {
			uids = append(uids, cm.UID)
		}
	}
	require.Len(t, uids, 1, "doomed's state ConfigMap was created %d times (uids %v): a pass must not make it again for a deleted group", len(uids), uids)
}

// TestFaultKubeAPIServerRestartBetweenPasses: a pass claims two of three
// queued jobs (the cap is 2); a pass while no API server answers ends at
// once with exit code 1; then the bed's kube-apiserver is restarted, the cap
// raised to 3, and the next pass serves the third job only: the claims and
// Jobs of before the restart are read back, none served twice.
//
// It does not run in parallel: while the API server restarts, every other
// test would fail its requests.
func TestFaultKubeAPIServerRestartBetweenPasses(t *testing.T) {
	// Alone on the bed: it restarts the API server every test uses.
	e2e.Exclusive(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 4*time.Minute)
	fx := b.NewOrgScope(ctx, t, e2e.Uniq("e2e-fault-restart"))
	label := e2e.Uniq("e2e-restart")
	ids := b.QueueJobs(ctx, t, fx, "restart.yml", map[string]int{label: 3})[label]
	ns := b.QuietNamespace(ctx, t, "e2e-fault-restart")
	b.FaultGroup(ctx, t, ns, "survivor", fx, b.Gitea.Admin.URL(), 2, label)
	passes := e2e.PassOpts{Namespaces: []string{ns}}

	first := b.Pass(ctx, t, passes)
	e2e.RequireSanePass(t, first, "pass before the restart")
	require.Equal(t, 0, first.Exit, e2e.Redact(e2e.Tail(first.Log, 30)))
	before, line := b.RunnersPerJob(ctx, t, ns, "survivor")
	require.Equal(t, 2, len(before), line)

	down := b.Pass(ctx, t, e2e.PassOpts{Namespaces: []string{ns}, Kubeconfig: deadKubeconfig(t)})
	e2e.RequireSanePass(t, down, "pass with no API server")
	require.Equal(t, 1, down.Exit, "a pass that cannot reach the API server fails\n%s", e2e.Redact(e2e.Tail(down.Log, 20)))

	t0 := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(b.Root, "scripts", "testbed"), "restart", "apiserver")
	cmd.Env = append(cmd.Environ(), "TESTBED_DIR="+b.Dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "scripts/testbed restart apiserver:\n%s", out)
	e2e.Eventually(ctx, t, "the restarted API server serves the test", func(ctx context.Context) (bool, error) {
		_, err := b.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return err == nil, err
	})
	restart := time.Since(t0)

	b.PatchGroup(ctx, t, ns, "survivor", map[string]any{"spec": map[string]any{"maxActiveRunners": 3}})
	second := b.Pass(ctx, t, passes)
	e2e.RequireSanePass(t, second, "pass after the restart")
	require.Equal(t, 0, second.Exit, e2e.Redact(e2e.Tail(second.Log, 30)))
	b.RequireOneRunnerEach(ctx, t, ns, "survivor", ids, "after the API server restarted between passes")
	after, _ := b.RunnersPerJob(ctx, t, ns, "survivor")
	for id, js := range before {
		require.Equal(t, js[0].UID, after[id][0].UID, "Gitea job #%d kept its runner Job across the restart", id)
	}
	b.RequireReady(ctx, t, ns, "survivor", "after the restart")
	t.Logf("API server down: the pass ended with exit %d in %s; restart took %s", down.Exit, down.Took.Round(time.Millisecond), restart.Round(100*time.Millisecond))
}

// deadKubeconfig is a kubeconfig for an API server that is not there: a
// loopback port nothing listens on.
func deadKubeconfig(t *testing.T) string {
	t.Helper()
	addr := e2e.FreeLoopbackAddr(t)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["gone"] = &clientcmdapi.Cluster{Server: "http://" + addr}
	kc.AuthInfos["anonymous"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["gone"] = &clientcmdapi.Context{Cluster: "gone", AuthInfo: "anonymous"}
	kc.CurrentContext = "gone"
	path := filepath.Join(t.TempDir(), "kubeconfig-gone")
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	return path
}

// TestFaultKubeLostCreateResponseStartsNoSecondRunner: the API server
// creates each runner Job, but the pass never hears so: the proxy drops the
// connection, or answers 504 as the API server does when a request outlives
// its deadline. Whether the Job exists is unknown to that pass; the next
// pass (straight to the API server) must find it, not start a second one.
func TestFaultKubeLostCreateResponseStartsNoSecondRunner(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 4*time.Minute)
	rows := []struct {
		name string
		lose func(w http.ResponseWriter)
	}{
		{name: "connection-dropped", lose: e2e.HangUp},
		{name: "gateway-timeout", lose: func(w http.ResponseWriter) { e2e.WriteJSON(w, http.StatusGatewayTimeout, e2e.StatusTimeout) }},
	}
	fx := b.NewOrgScope(ctx, t, e2e.Uniq("e2e-fault-lost"))
	perLabel := map[string]int{}
	labels := map[string]string{}
	for _, r := range rows {
		labels[r.name] = e2e.Uniq("e2e-lost", r.name)
		perLabel[labels[r.name]] = 2
	}
	queued := b.QueueJobs(ctx, t, fx, "lost.yml", perLabel)

	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			e2e.ParallelSub(t)
			// A context of its own: a parallel subtest may wait minutes for
			// a free slot in the full suite, past its parent's deadline.
			ctx := e2e.TestContext(t, 4*time.Minute)
			ids := queued[labels[r.name]]
			ns := b.QuietNamespace(ctx, t, "e2e-fault-lost")
			b.FaultGroup(ctx, t, ns, "unheard", fx, b.Gitea.Admin.URL(), 5, labels[r.name])
			api := b.NewAPIProxy(t)
			var (
				mu   sync.Mutex
				lost []string
			)
			api.Set(func(w http.ResponseWriter, req *http.Request, forward func(*http.Request) *httptest.ResponseRecorder) bool {
				if _, ok := e2e.JobCreate(req, ns); !ok {
					return false
				}
				rec := forward(req)
				if rec.Code != http.StatusCreated {
					e2e.CopyTo(w, rec)
					return true
				}
				name := "?"
				if obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(rec.Body.Bytes(), nil, nil); err == nil {
					name = obj.(*batchv1.Job).Name
				}
				mu.Lock()
				lost = append(lost, name)
				mu.Unlock()
				r.lose(w)
				return true
			})

			first := b.Pass(ctx, t, e2e.PassOpts{Namespaces: []string{ns}, Kubeconfig: api.Kubeconfig})
			e2e.RequireSanePass(t, first, "pass whose create answers are lost")
			mu.Lock()
			t.Logf("%s: pass 1 exit %d in %s; the API server created %v, the pass never heard", r.name, first.Exit, first.Took.Round(time.Millisecond), lost)
			require.NotEmpty(t, lost, "no Job create reached the API server")
			mu.Unlock()

			second := b.Pass(ctx, t, e2e.PassOpts{Namespaces: []string{ns}})
			e2e.RequireSanePass(t, second, "next pass")
			b.RequireOneRunnerEach(ctx, t, ns, "unheard", ids, "after a pass whose Job creates were carried out but their answers lost"+
				"\n(a create whose outcome is unknown must keep its claim, or look the Job up by name: see internal/scaler/create.go)")
			require.Equal(t, 0, second.Exit, e2e.Redact(e2e.Tail(second.Log, 30)))
			b.RequireReady(ctx, t, ns, "unheard", "after the next pass")
		})
	}
}
