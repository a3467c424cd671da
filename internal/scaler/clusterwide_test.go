package scaler

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/kubecache"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
)

// twoNamespaces is an env with group ci in ns and in otherNS, each with
// its token Secrets, and one queued job both could serve.
func twoNamespaces(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, newGroup("ci", 5), newGroup("ci", 5, inNamespace(otherNS)))
	for _, s := range []*corev1.Secret{secret("api", secretToken), secret("reg", "reg-"+secretToken)} {
		s.Namespace = otherNS
		require.NoError(t, e.kube.Tracker().Add(s))
	}
	return e
}

// clusterWideLoop is watchingScaler with the cluster-wide caches.
func clusterWideLoop(t *testing.T, e *env, more ...setup) (*Scaler, *kubecache.Cache) {
	t.Helper()
	sc, c := watchingScaler(t, e, more...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.WatchClusterWide(ctx))
	return sc, c
}

// sentReads are the reads (get, list) of Jobs, pods and ConfigMaps sent,
// as "verb resource namespace[/name]".
func sentReads(e *env) []string { return readsUntil(e, "") }

// readsUntil is sentReads up to the first create of resource ("": all).
func readsUntil(e *env, resource string) []string {
	var out []string
	for _, a := range e.kube.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == resource {
			break
		}
		switch a.GetResource().Resource {
		case "jobs", "pods", "configmaps":
		default:
			continue
		}
		switch a := a.(type) {
		case k8stesting.GetAction:
			out = append(out, "get "+a.GetResource().Resource+" "+a.GetNamespace()+"/"+a.GetName())
		case k8stesting.ListAction:
			out = append(out, "list "+a.GetResource().Resource+" "+a.GetNamespace())
		}
	}
	return out
}

// A steady loop pass with the cluster-wide caches reads nothing from the
// API server, not even the namespaces' ledgers, and starts no watch per
// namespace.
func TestASteadyLoopPassWithClusterWideReadsSendsNoRead(t *testing.T) {
	e := twoNamespaces(t)
	sc, c := clusterWideLoop(t, e)
	_, err := sc.Pass(context.Background())
	require.NoError(t, err)
	// The caches catch up with the first pass's state writes: a state
	// they lack yet is read afresh, rightly.
	require.Eventually(t, func() bool {
		for _, namespace := range []string{ns, otherNS} {
			v, _ := c.Watch(context.Background(), namespace)
			if !slices.ContainsFunc(v.States, func(cm *corev1.ConfigMap) bool { return cm.Name == state.ConfigMapName("ci") }) {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	e.kube.ClearActions()

	for range 3 {
		sum, err := sc.Pass(context.Background())
		require.NoError(t, err)
		require.NoError(t, sum.Err())
	}
	assert.Empty(t, sentReads(e), "no get and no list: the ledgers come from the cache too")
	assert.Empty(t, c.Watching(), "no watch of its own per namespace")
	assert.Equal(t, v1alpha1.ReasonReconciled, ready(e.group("ci")).Reason)
}

// A loop with the cluster-wide caches creates from a fresh read only, as
// with the caches per namespace: the cached plan that would create reads
// the state and the runner Jobs afresh, so one queued job gets one runner
// in each pass's reading however the caches lag.
func TestALoopWithClusterWideReadsCreatesFromAFreshRead(t *testing.T) {
	e := twoNamespaces(t)
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}
	sc, _ := clusterWideLoop(t, e, func(_ *Deps, cfg *Config) { cfg.Namespaces = []string{ns} })
	for range 3 {
		_, err := sc.Pass(context.Background())
		require.NoError(t, err)
	}
	assert.Len(t, e.jobs(), 1, "one runner for the one job")
	var fresh []string
	for _, r := range sentReads(e) {
		if r == "list jobs "+ns || r == "get configmaps "+ns+"/"+state.ConfigMapName("ci") {
			fresh = append(fresh, r)
		}
	}
	assert.NotEmpty(t, fresh, "the create was planned from a fresh read: %v", sentReads(e))
}

// A namespace whose rights review does not show the tenant rights is not
// served, though the cluster-wide reads hold its objects: in a loop and
// in a single pass.
func TestClusterWideReadsServeNoNamespaceWithoutItsBinding(t *testing.T) {
	for _, mode := range []string{"loop", "single pass"} {
		t.Run(mode, func(t *testing.T) {
			e := twoNamespaces(t)
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest"), queued(8, "ubuntu-latest")}}
			e.disable(otherNS)
			var sc *Scaler
			if mode == "loop" {
				sc, _ = clusterWideLoop(t, e)
			} else {
				sc = e.scaler(func(_ *Deps, cfg *Config) { cfg.ClusterWideReads = true })
			}
			_, err := sc.Pass(context.Background())
			require.NoError(t, err)
			rg := e.group("ci")
			assert.Equal(t, v1alpha1.ReasonReconciled, ready(rg).Reason)
			other := e.groupIn(otherNS, "ci")
			assert.Equal(t, v1alpha1.ReasonNamespaceNotEnabled, ready(other).Reason)
			all, err := e.kube.BatchV1().Jobs("").List(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			require.NotEmpty(t, all.Items)
			for _, j := range all.Items {
				assert.Equal(t, ns, j.Namespace, "no runner Job where the scaler is not bound")
			}
			for _, r := range sentReads(e) {
				assert.NotContains(t, r, " "+otherNS, "nothing read in the namespace without the binding")
			}
		})
	}
}

// A single pass with ClusterWideReads lists the states, then the runner
// Jobs, then the runner pods once for every namespace, in that order, and
// the ledgers once, instead of per namespace; without it, per namespace
// (the pods only where runner Jobs are).
func TestASinglePassWithClusterWideReadsListsEachKindOnce(t *testing.T) {
	for _, wide := range []bool{true, false} {
		t.Run(map[bool]string{true: "cluster-wide", false: "per namespace"}[wide], func(t *testing.T) {
			e := twoNamespaces(t)
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest"), queued(8, "ubuntu-latest")}}
			// The ledgers name the groups already: a pass that creates
			// reads them (recordOwner) and writes nothing there.
			for _, namespace := range []string{ns, otherNS} {
				rg := e.groupIn(namespace, "ci")
				require.NoError(t, ledger.Store{Client: e.kube}.Record(context.Background(), namespace, runnerjob.OwnerTag(rg.UID), "ci", scope.Of(&rg.Spec)))
			}
			e.kube.ClearActions()
			sum := e.pass(func(_ *Deps, cfg *Config) { cfg.ClusterWideReads = wide })
			require.NoError(t, sum.Err())
			require.NotEmpty(t, e.jobs(), "the pass created")
			var lists, ledgerGets []string
			// Up to the first runner Job: what the pass read to plan.
			for _, r := range readsUntil(e, "jobs") {
				switch {
				case strings.HasPrefix(r, "list "):
					lists = append(lists, r)
				case strings.HasSuffix(r, "/"+ledger.ConfigMapName):
					ledgerGets = append(ledgerGets, r)
				}
			}
			// The ledgers come with the states either way: they carry
			// the RunnerGroup label (Record wrote them so).
			assert.Empty(t, ledgerGets)
			if wide {
				assert.Equal(t, []string{"list configmaps ", "list jobs ", "list pods "}, lists,
					"states (with the ledgers), Jobs, pods")
				return
			}
			// No runner Job yet: no pod to list.
			assert.ElementsMatch(t, []string{"list configmaps " + ns, "list jobs " + ns,
				"list configmaps " + otherNS, "list jobs " + otherNS}, lists)
		})
	}
}

// A cluster-wide list the API server refuses does not fail the pass: it
// says why and reads each namespace on its own.
func TestARefusedClusterWideListFallsBackToEachNamespace(t *testing.T) {
	e := twoNamespaces(t)
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}
	e.kube.PrependReactor("list", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() == "" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "", nil)
		}
		return false, nil, nil
	})
	sum := e.pass(func(_ *Deps, cfg *Config) { cfg.ClusterWideReads = true; cfg.Namespaces = []string{ns} })
	require.NoError(t, sum.Err())
	assert.Len(t, e.jobs(), 1)
	assert.Contains(t, e.logs.String(), "cannot list the runner Jobs cluster-wide; reading each namespace on its own")
	assert.Contains(t, sentReads(e), "list jobs "+ns)
}
