package scaler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/state"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// listingLog records every Snapshot a pass makes, by Gitea URL, token and
// target, in front of the tests' fake Gitea.
type listingLog struct {
	mu    sync.Mutex
	calls []string
}

type loggedGitea struct {
	gitea.Client
	log        *listingLog
	url, token string
}

func (l loggedGitea) Snapshot(ctx context.Context, t scope.Place) (gitea.Snapshot, error) {
	l.log.mu.Lock()
	l.log.calls = append(l.log.calls, l.url+" "+l.token+" "+t.String())
	l.log.mu.Unlock()
	return l.Client.Snapshot(ctx, t)
}

func (l *listingLog) sorted() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]string(nil), l.calls...)
	sort.Strings(out)
	return out
}

// withListingLog routes the scaler's Gitea clients through log.
func (e *env) withListingLog(log *listingLog) setup {
	return func(d *Deps, _ *Config) {
		d.Gitea = func(url, token string) (gitea.Client, error) {
			return loggedGitea{Client: e.gitea, log: log, url: url, token: token}, nil
		}
	}
}

func addSecret(t *testing.T, e *env, namespace, name, value string) {
	t.Helper()
	_, err := e.kube.CoreV1().Secrets(namespace).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{tenancy.SecretLabel: "true"}, Annotations: tokenKeys(name)},
		Data:       map[string][]byte{"token": []byte(value)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func withAPISecret(name string) func(*v1alpha1.RunnerGroup) {
	return func(rg *v1alpha1.RunnerGroup) { rg.Spec.AuthToken.SecretRef.Name = name }
}

func inNamespace(namespace string) func(*v1alpha1.RunnerGroup) {
	return func(rg *v1alpha1.RunnerGroup) {
		rg.Namespace = namespace
		rg.UID = types.UID("uid-" + namespace + "-" + rg.Name)
	}
}

// TestGroupsOfOneGiteaTokenAndTargetShareOneListing: groups share a
// listing when Gitea URL, API token (by content, whatever Secret holds it,
// in whichever namespace) and target are the same, and only then.
func TestGroupsOfOneGiteaTokenAndTargetShareOneListing(t *testing.T) {
	groups := []*v1alpha1.RunnerGroup{
		newGroup("a", 5),
		newGroup("b", 5),
		newGroup("same-token-other-secret", 5, withAPISecret("api-copy")),
		newGroup("same-token-other-namespace", 5, inNamespace("team2")),
		newGroup("other-token", 5, withAPISecret("api-other")),
		newGroup("other-org", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "beta" }),
		newGroup("other-gitea", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.Gitea.URL = "https://other.example.com" }),
		newGroup("repo-in-acme", 5, func(rg *v1alpha1.RunnerGroup) {
			rg.Spec.Scope, rg.Spec.Repo = v1alpha1.ScopeRepo, "app"
		}),
	}
	u := "https://gitea.example.com"
	want := []string{
		"https://other.example.com " + secretToken + " org acme",
		u + " other-token-value org acme",
		u + " " + secretToken + " org acme",
		u + " " + secretToken + " org beta",
		u + " " + secretToken + " repo acme/app",
	}
	e := newEnv(t, groups...)
	addSecret(t, e, ns, "api-copy", secretToken)
	addSecret(t, e, ns, "api-other", "other-token-value")
	addSecret(t, e, "team2", "api", secretToken)
	addSecret(t, e, "team2", "reg", "reg")
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
	log := &listingLog{}

	sum := e.pass(e.withListingLog(log))

	assert.Empty(t, sum.Failed)
	assert.ElementsMatch(t, want, log.sorted())
	assert.NotContains(t, e.logs.String(), secretToken, "the token is compared, never logged")
}

// kubeCalls counts the Kubernetes requests of a pass by verb and resource.
func kubeCalls(e *env) map[string]int {
	out := map[string]int{}
	for _, a := range e.kube.Actions() {
		out[a.GetVerb()+" "+a.GetResource().Resource]++
	}
	return out
}

// requirePassCalls makes one pass, which must fail no group, and checks
// how many of each Kubernetes call it sent (verb and resource).
func requirePassCalls(t *testing.T, e *env, want map[string]int) {
	t.Helper()
	sum := e.pass()
	require.Empty(t, sum.Failed)
	got := kubeCalls(e)
	for k, n := range want {
		assert.Equal(t, n, got[k], k)
	}
}

// TestPassReadsEachNamespaceOnce: state ConfigMaps and runner Jobs are
// listed once per namespace, runner pods once per namespace that has a
// runner Job (they only tell about those), and a Secret that several
// groups name is read once.
func TestPassReadsEachNamespaceOnce(t *testing.T) {
	tests := []struct {
		name string
		// jobIn are the namespaces with a runner Job.
		jobIn []string
		want  map[string]int
	}{
		{name: "no runner Job", want: map[string]int{"list jobs": 2, "list pods": 0, "get secrets": 4, "list configmaps": 2, "get configmaps": 0}},
		{name: "a runner Job in one namespace", jobIn: []string{"team2"},
			want: map[string]int{"list jobs": 2, "list pods": 1, "get secrets": 4, "list configmaps": 2}},
		{name: "runner Jobs in both", jobIn: []string{ns, "team2"},
			want: map[string]int{"list jobs": 2, "list pods": 2, "get secrets": 4, "list configmaps": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var groups []*v1alpha1.RunnerGroup
			for i := range 3 {
				groups = append(groups, newGroup(fmt.Sprintf("g%d", i), 5))
				groups = append(groups, newGroup(fmt.Sprintf("h%d", i), 5, inNamespace("team2")))
			}
			e := newEnv(t, groups...)
			addSecret(t, e, "team2", "api", secretToken)
			addSecret(t, e, "team2", "reg", "reg")
			for i, where := range tt.jobIn {
				e.addJob(groups[slices.IndexFunc(groups, func(rg *v1alpha1.RunnerGroup) bool { return rg.Namespace == where })],
					fmt.Sprintf("runner-%d", i), int64(100+i), t0)
			}
			e.kube.ClearActions()

			requirePassCalls(t, e, tt.want)
		})
	}
}

// TestPassListsNamespacesWhenItServesMany: a pass reads each served
// Namespace object (its Pod Security labels and grant) with a GET, up to
// namespaceListFrom namespaces; from there on with one list of them all.
// Either way every group is served.
func TestPassListsNamespacesWhenItServesMany(t *testing.T) {
	tests := []struct {
		namespaces int
		want       map[string]int
	}{
		{namespaces: 1, want: map[string]int{"get namespaces": 1, "list namespaces": 0}},
		{namespaces: namespaceListFrom - 1, want: map[string]int{"get namespaces": namespaceListFrom - 1, "list namespaces": 0}},
		{namespaces: namespaceListFrom, want: map[string]int{"get namespaces": 0, "list namespaces": 1}},
		{namespaces: 3 * namespaceListFrom, want: map[string]int{"get namespaces": 0, "list namespaces": 1}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.namespaces), func(t *testing.T) {
			var groups []*v1alpha1.RunnerGroup
			for i := range tt.namespaces {
				for j := range 2 {
					where := ns
					if i > 0 {
						where = fmt.Sprintf("team%d", i)
					}
					groups = append(groups, newGroup(fmt.Sprintf("g%d", j), 5, inNamespace(where)))
				}
			}
			e := newEnv(t, groups...)
			for i := 1; i < tt.namespaces; i++ {
				addSecret(t, e, fmt.Sprintf("team%d", i), "api", secretToken)
				addSecret(t, e, fmt.Sprintf("team%d", i), "reg", "reg")
			}
			e.kube.ClearActions()

			requirePassCalls(t, e, tt.want)
		})
	}
}

// TestSteadyPassWritesNoEventNoConfigMapNoJob: once every queued job has
// its runner, a pass creates no Job, writes no state ConfigMap and records
// no Event; a failure that repeats records its Event once.
func TestSteadyPassWritesNoEventNoConfigMapNoJob(t *testing.T) {
	e := newEnv(t, newGroup("a", 5), newGroup("b", 5, withLabels("gpu")))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest"), queued(2, "gpu")}}
	require.Equal(t, 2, e.pass().Created)
	// The next pass sees the runner Jobs and drops their claims
	// from the state: a write, once.
	require.Zero(t, e.pass().Created)

	writes := func() map[string]int {
		out := map[string]int{}
		for _, a := range e.kube.Actions() {
			if a.GetResource().Resource == "selfsubjectrulesreviews" {
				continue // a question to the API server, which stores nothing
			}
			switch a.GetVerb() {
			case "create", "update", "patch", "delete":
				out[a.GetVerb()+" "+a.GetResource().Resource]++
			}
		}
		return out
	}
	e.kube.ClearActions()
	assert.Zero(t, e.pass().Created)
	assert.Empty(t, writes(), "a steady pass")

	e.gitea.err = &gitea.APIError{Kind: gitea.ErrServer, Status: 502, URL: "/api/v1/orgs/acme/actions/jobs"}
	e.kube.ClearActions()
	e.pass()
	assert.Equal(t, map[string]int{"create events": 2}, writes(), "the failure is news: one Event per group")
	e.kube.ClearActions()
	e.pass()
	assert.Empty(t, writes(), "the same failure again: no Event")
}

// TestGroupsOfOneListingShareTheRunnersListing: the lifecycle lists the
// runners of a scope once for the groups that share its listing.
func TestGroupsOfOneListingShareTheRunnersListing(t *testing.T) {
	e := newEnv(t, newGroup("a", 5), newGroup("b", 5), newGroup("c", 5, withLabels("gpu")))
	rg := &runnersGitea{fakeGitea: e.gitea}
	sum := e.pass(func(d *Deps, c *Config) {
		d.Gitea = func(string, string) (gitea.Client, error) { return rg, nil }
		c.RunnerIdleTimeout = time.Minute
	})
	require.Empty(t, sum.Failed)
	assert.Len(t, rg.calls, 1)
}

// TestASteadyPassReadsTheLedgerFromTheStateList: the registrations ledger
// comes with the one list of a namespace's state ConfigMaps, so a steady
// pass reads it with no request of its own. A namespace without a ledger
// gets an empty one, and a ledger from before its RunnerGroup label gets
// the label, once, in the first pass (not in a dry run).
func TestASteadyPassReadsTheLedgerFromTheStateList(t *testing.T) {
	old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ledger.ConfigMapName, Namespace: ns,
		Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedBy}}}
	tests := []struct {
		name         string
		objects      []runtime.Object
		setup        setup
		first        map[string]int // ledger requests of the first pass
		steadyGets   int
		labelledOnce bool
	}{
		{"no ledger yet", nil, func(*Deps, *Config) {}, map[string]int{"get": 2, "create": 1}, 0, true},
		{"a ledger from before its label", []runtime.Object{old}, func(*Deps, *Config) {}, map[string]int{"get": 2, "update": 1}, 0, true},
		{"a dry run writes nothing", nil, func(_ *Deps, c *Config) { c.DryRun = true }, map[string]int{"get": 1}, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, newGroup("a", 5), newGroup("b", 5))
			for _, o := range tt.objects {
				_, err := e.kube.CoreV1().ConfigMaps(ns).Create(context.Background(), o.(*corev1.ConfigMap).DeepCopy(), metav1.CreateOptions{})
				require.NoError(t, err)
			}
			rg := &runnersGitea{fakeGitea: e.gitea}
			withRunners := func(d *Deps, c *Config) {
				d.Gitea = func(string, string) (gitea.Client, error) { return rg, nil }
				c.RunnerIdleTimeout = time.Minute
				tt.setup(d, c)
			}
			ledgerCalls := func() map[string]int {
				out := map[string]int{}
				for _, a := range e.kube.Actions() {
					if a.GetResource().Resource != "configmaps" {
						continue
					}
					name := ""
					switch a := a.(type) {
					case k8stesting.GetAction:
						name = a.GetName()
					case k8stesting.CreateAction: // and updates, which carry their object too
						name = a.GetObject().(*corev1.ConfigMap).Name
					}
					if name == ledger.ConfigMapName {
						out[a.GetVerb()]++
					}
				}
				return out
			}

			e.kube.ClearActions()
			require.Empty(t, e.pass(withRunners).Failed)
			assert.Equal(t, tt.first, ledgerCalls(), "the first pass")
			for range 2 {
				e.kube.ClearActions()
				require.Empty(t, e.pass(withRunners).Failed)
				want := map[string]int{}
				if tt.steadyGets > 0 {
					want["get"] = tt.steadyGets
				}
				assert.Equal(t, want, ledgerCalls(), "a steady pass")
			}
			_, listable, err := ledger.Store{Client: e.kube}.Load(context.Background(), ns)
			require.NoError(t, err)
			assert.Equal(t, tt.labelledOnce, listable)
		})
	}
}

// TestSharedListingsStayWithinTheirBound: no more Gitea listings run at
// once than Config.GiteaConcurrency allows.
func TestSharedListingsStayWithinTheirBound(t *testing.T) {
	var groups []*v1alpha1.RunnerGroup
	for i := range 12 {
		groups = append(groups, newGroup(fmt.Sprintf("g%d", i), 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = fmt.Sprintf("org%d", i) }))
	}
	e := newEnv(t, groups...)
	var mu sync.Mutex
	inFlight, peak := 0, 0
	e.gitea.barrier = func() {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
	}
	sum := e.pass(func(_ *Deps, c *Config) { c.GiteaConcurrency = 3; c.Workers = 8 })
	require.Empty(t, sum.Failed)
	assert.Equal(t, 12, e.gitea.calls)
	assert.LessOrEqual(t, peak, 3)
	assert.Greater(t, peak, 1, "listings do run side by side")
}

// TestAListingThatFailsFailsOnlyItsGroups: one target's failure fails the
// groups of that listing; a group of another target is served.
func TestAListingThatFailsFailsOnlyItsGroups(t *testing.T) {
	e := newEnv(t, newGroup("a", 5), newGroup("b", 5), newGroup("c", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "beta" }))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
	sum := e.pass(func(d *Deps, _ *Config) {
		d.Gitea = func(string, string) (gitea.Client, error) { return failingOrg{e.gitea, "acme"}, nil }
	})
	assert.Equal(t, []string{ns + "/a", ns + "/b"}, sum.Failed)
	assert.Equal(t, 1, sum.Created, "group c")
	for _, name := range []string{"a", "b"} {
		ready := meta.FindStatusCondition(e.group(name).Status.Conditions, v1alpha1.ConditionReady)
		require.NotNil(t, ready)
		assert.Equal(t, v1alpha1.ReasonGiteaUnavailable, ready.Reason)
		assert.Contains(t, ready.Message, "org acme")
	}
}

type failingOrg struct {
	*fakeGitea
	org string
}

func (f failingOrg) Snapshot(ctx context.Context, t scope.Place) (gitea.Snapshot, error) {
	if t.Owner() == f.org {
		return gitea.Snapshot{}, &gitea.APIError{Kind: gitea.ErrServer, Status: 503, URL: "/api/v1/orgs/" + f.org + "/actions/jobs"}
	}
	return f.fakeGitea.Snapshot(ctx, t)
}

// TestStatesListedPerNamespaceFallBackToTheirOwnRead: a group served before
// whose state ConfigMap the list lacks reads its own (the ConfigMap lost
// its label, or was deleted), and when the list is refused every group
// reads its own; either way no job gets a second runner and a merely
// unlabelled state is neither rebuilt nor reported.
func TestStatesListedPerNamespaceFallBackToTheirOwnRead(t *testing.T) {
	tests := []struct {
		name        string
		change      func(t *testing.T, e *env)
		wantGets    int
		wantRebuilt bool
	}{
		{name: "listed", change: func(*testing.T, *env) {}, wantGets: 0},
		{name: "unlabelled ConfigMap", wantGets: 1, change: func(t *testing.T, e *env) {
			cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), state.ConfigMapName("a"), metav1.GetOptions{})
			require.NoError(t, err)
			cm.Labels = nil
			e.cms.write(t, e.kube, cm)
		}},
		{name: "deleted ConfigMap", wantGets: 1, wantRebuilt: true, change: func(t *testing.T, e *env) {
			require.NoError(t, e.kube.CoreV1().ConfigMaps(ns).Delete(context.Background(), state.ConfigMapName("a"), metav1.DeleteOptions{}))
		}},
		// Each group's state, and the runner config of group a, whose
		// runner Job lives: without the list, the pass cannot tell that
		// its key is there (keepRunnerConfig).
		{name: "list refused", wantGets: 3, change: func(_ *testing.T, e *env) {
			e.kube.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(corev1.Resource("configmaps"), "", errors.New("no list"))
			})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, newGroup("a", 5), newGroup("b", 5))
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
			e.pass()
			e.pass()
			tt.change(t, e)
			e.kube.ClearActions()

			sum := e.pass()

			require.Empty(t, sum.Failed)
			assert.Equal(t, tt.wantGets, kubeCalls(e)["get configmaps"])
			assert.Equal(t, map[int64]int{1: 1}, e.giteaJobsServed(), "no second runner")
			rebuilt := false
			for _, ev := range e.events() {
				rebuilt = rebuilt || ev.Reason == v1alpha1.ReasonStateRebuilt
			}
			assert.Equal(t, tt.wantRebuilt, rebuilt)
		})
	}
}
