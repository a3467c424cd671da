package scaler

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

const (
	releaseNS     = "platform"
	mirrorName    = "rel-registrations"
	platformToken = "pl4tf0rm-t0ken-value"
	platformURL   = "https://gitea.example.com"
)

// nsEnv is a pass's world for the deleted-namespace sweep: the group
// "ci" lives in namespace ns (UID ns-uid), the platform's token lists and
// deletes runners, and the mirror is in the release namespace.
type nsEnv struct {
	*env
	g *runnersGitea
	// sent records every token given to the Gitea factory, by URL.
	mu   sync.Mutex
	sent map[string][]string
	// sweepErr, when set, fails the runners listings asked with the
	// platform's token, and only those.
	sweepErr error
}

// failingList is a Gitea whose runners listings fail.
type failingList struct {
	*runnersGitea
	err error
}

func (f failingList) ListRunners(context.Context, scope.Place) ([]gitea.Runner, error) {
	return nil, f.err
}

func newNSEnv(t *testing.T, groups ...*v1alpha1.RunnerGroup) *nsEnv {
	e := newEnv(t, groups...)
	n, err := e.kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	require.NoError(t, err)
	n.UID = "ns-uid"
	_, err = e.kube.CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{})
	require.NoError(t, err)
	return &nsEnv{env: e, g: &runnersGitea{fakeGitea: e.gitea}, sent: map[string][]string{}}
}

// sweep turns the sweep on with token (empty: none given).
func (e *nsEnv) sweep(token string) setup {
	return func(d *Deps, c *Config) {
		d.Gitea = func(url, tok string) (gitea.Client, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.sent[url] = append(e.sent[url], tok)
			if e.sweepErr != nil && tok == platformToken {
				return failingList{e.g, e.sweepErr}, nil
			}
			return e.g, nil
		}
		c.RunnerIdleTimeout, c.RunnerStartTimeout = 10*time.Minute, 10*time.Minute
		c.DeletedNamespaces = &DeletedNamespaces{Namespace: releaseNS, ConfigMap: mirrorName, GiteaURL: platformURL, Token: token}
	}
}

func (e *nsEnv) mirror() ledger.Mirror {
	return ledger.Mirror{Client: e.kube, Namespace: releaseNS, Name: mirrorName}
}

// seed writes records into the mirror, as earlier passes would have.
func (e *nsEnv) seed(copies ...ledger.Copy) {
	e.t.Helper()
	left, err := e.mirror().Change(context.Background(), func(c ledger.Copies) bool {
		for _, x := range copies {
			c.Put(x)
		}
		return true
	})
	require.NoError(e.t, err)
	require.Empty(e.t, left)
}

func (e *nsEnv) copies() ledger.Copies {
	e.t.Helper()
	c, err := e.mirror().Load(context.Background())
	require.NoError(e.t, err)
	return c
}

func (e *nsEnv) namespace(name string, uid types.UID, terminating bool) {
	e.t.Helper()
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}}
	if terminating {
		n.DeletionTimestamp = &metav1.Time{Time: t0}
		n.Finalizers = []string{"kubernetes"}
	}
	require.NoError(e.t, e.kube.Tracker().Add(n))
}

// record is a mirror record of namespace/uid whose group (in the
// namespace named by g) registered at the place of g's spec.
func record(namespace string, uid types.UID, groups ...*v1alpha1.RunnerGroup) ledger.Copy {
	c := ledger.Copy{Namespace: namespace, UID: uid, Groups: ledger.Entries{}}
	for _, g := range groups {
		c.Groups[runnerjob.OwnerTag(g.UID)] = ledger.Entry{Group: g.Name, At: scope.Of(&g.Spec)}
	}
	return c
}

func inNS(namespace, uid string) func(*v1alpha1.RunnerGroup) {
	return func(o *v1alpha1.RunnerGroup) { o.Namespace, o.UID = namespace, types.UID(uid) }
}

// TestRegistrationsOfDeletedNamespacesAreRemoved is the decision table of
// the sweep: a namespace that answers 404, or exists with another UID
// (deleted and made again), has its recorded groups' registrations
// removed when they are ephemeral, offline and run no job; a namespace
// being deleted waits; one that exists but is no longer served is left
// alone; nothing of another namespace or install is touched.
func TestRegistrationsOfDeletedNamespacesAreRemoved(t *testing.T) {
	e := newNSEnv(t, newGroup("live", 1))
	gone := newGroup("ci", 1, inNS("team-gone", "uid-ci-gone"))
	remade := newGroup("web", 1, inNS("team-remade", "uid-web-remade"))
	ending := newGroup("api", 1, inNS("team-ending", "uid-api-ending"))
	unserved := newGroup("db", 1, inNS("team-unserved", "uid-db-unserved"))
	elsewhere := newGroup("ci", 1, inNS("team-other", "uid-ci-other")) // another namespace's "ci", not recorded
	otherInstall := newGroup("x", 1, inNS("team-x", "uid-x"))          // another install's
	otherGitea := newGroup("ci", 1, inNS("team-gone", "uid-ci-gone2"), func(o *v1alpha1.RunnerGroup) { o.Name, o.Spec.Gitea.URL = "ext", "https://other-gitea.example.com" })
	e.namespace("team-remade", "uid-new", false)
	e.namespace("team-ending", "uid-ending", true)
	e.namespace("team-unserved", "uid-unserved", false)
	e.seed(
		record("team-gone", "uid-gone", gone, otherGitea),
		record("team-remade", "uid-old", remade),
		record("team-ending", "uid-ending", ending),
		record("team-unserved", "uid-unserved", unserved),
	)

	e.g.register(runnerjob.RunnerName(gone, "ci-aaaa1"), false)        // removed
	e.g.register(runnerjob.RunnerName(gone, "ci-aaaa2"), true)         // online: kept
	e.g.register(runnerjob.RunnerName(gone, "ci-aaaa3"), false)        // runs a job: kept
	e.g.register(runnerjob.RunnerName(remade, "web-bbbb1"), false)     // removed
	e.g.register(runnerjob.RunnerName(ending, "api-cccc1"), false)     // its namespace is being deleted: kept
	e.g.register(runnerjob.RunnerName(unserved, "db-dddd1"), false)    // its namespace lives: kept
	e.g.register(runnerjob.RunnerName(elsewhere, "ci-eeee1"), false)   // another namespace's: kept
	e.g.register(runnerjob.RunnerName(otherInstall, "x-ffff1"), false) // another install's: kept
	e.g.register("web-gggg1-"+runnerjob.OwnerTag(gone.UID), false)     // the tag under another group's name: kept
	e.g.mu.Lock()
	e.g.runners = append(e.g.runners, gitea.Runner{ID: 99, Name: runnerjob.RunnerName(gone, "ci-hhhh1")}) // not ephemeral: kept
	e.g.mu.Unlock()
	e.g.inProgress = []gitea.Job{{ID: 7, RunnerName: runnerjob.RunnerName(gone, "ci-aaaa3")}}
	before := e.g.names()

	sum := e.pass(e.sweep(platformToken), func(_ *Deps, c *Config) { c.DryRun = true })
	assert.Equal(t, before, e.g.names(), "a dry run removes nothing")
	assert.Contains(t, e.out.String(), "would remove runner "+runnerjob.RunnerName(gone, "ci-aaaa1"))
	assert.Equal(t, 0, sum.DeletedNamespaces.Removed)

	sum = e.pass(e.sweep(platformToken))
	require.NoError(t, sum.Err(), "the sweep never fails the pass")

	assert.ElementsMatch(t, []string{
		runnerjob.RunnerName(gone, "ci-aaaa2"), runnerjob.RunnerName(gone, "ci-aaaa3"),
		runnerjob.RunnerName(ending, "api-cccc1"), runnerjob.RunnerName(unserved, "db-dddd1"),
		runnerjob.RunnerName(elsewhere, "ci-eeee1"), runnerjob.RunnerName(otherInstall, "x-ffff1"),
		"web-gggg1-" + runnerjob.OwnerTag(gone.UID), runnerjob.RunnerName(gone, "ci-hhhh1"),
	}, e.g.names())
	assert.Equal(t, 2, sum.DeletedNamespaces.Removed)
	assert.Equal(t, 1, sum.DeletedNamespaces.Waiting, "team-ending is being deleted")
	assert.Equal(t, map[string]int{passreport.LeftRunning: 1, passreport.LeftOtherGitea: 1}, sum.DeletedNamespaces.Left)

	left := e.copies()
	assert.NotContains(t, left, ledger.MirrorKey("team-remade", "uid-old"), "nothing of it is left: forgotten")
	assert.Contains(t, left, ledger.MirrorKey("team-gone", "uid-gone"), "one runner is online, one busy")
	assert.Contains(t, left, ledger.MirrorKey("team-ending", "uid-ending"))
	assert.Contains(t, left, ledger.MirrorKey("team-unserved", "uid-unserved"))

	e.mu.Lock()
	defer e.mu.Unlock()
	for url, toks := range e.sent {
		if url != platformURL {
			assert.NotContains(t, toks, platformToken, "the platform's token goes to its own Gitea only")
		}
	}
	assert.Contains(t, e.sent[platformURL], platformToken)
	assert.NotContains(t, e.logs.String(), platformToken)
}

// TestWithoutThePlatformTokenNothingIsDeletedAndItIsSaid: the sweep is on
// but no token was given: nothing is listed or deleted, the mirror keeps
// the records, and the pass says how many groups of deleted namespaces
// may have left registrations, and why.
func TestWithoutThePlatformTokenNothingIsDeletedAndItIsSaid(t *testing.T) {
	e := newNSEnv(t, newGroup("live", 1))
	gone := newGroup("ci", 1, inNS("team-gone", "uid-ci-gone"))
	e.seed(record("team-gone", "uid-gone", gone))
	e.g.register(runnerjob.RunnerName(gone, "ci-aaaa1"), false)

	sum := e.pass(e.sweep(""))

	require.NoError(t, sum.Err())
	assert.Equal(t, []string{runnerjob.RunnerName(gone, "ci-aaaa1")}, e.g.names())
	assert.Equal(t, map[string]int{passreport.LeftNoToken: 1}, sum.DeletedNamespaces.Left)
	assert.Contains(t, e.copies(), ledger.MirrorKey("team-gone", "uid-gone"))
	assert.Contains(t, e.logs.String(), "no Gitea token for the sweep of deleted namespaces")
	kept, ok, err := e.mirror().LastSweep(context.Background())
	require.NoError(t, err)
	require.True(t, ok, "the sweep's state is kept on the mirror for status")
	assert.Equal(t, map[string]int{passreport.LeftNoToken: 1}, kept.Left)
}

// TestAPassMirrorsWhatItsNamespacesRegistered: each pass copies, for the
// namespaces it serves, the owner tags of the groups that registered
// runners, under the namespace's UID. A tag only a tenant's ledger names
// (no group of it was ever listed) is not copied: a tenant cannot make the
// sweep delete another tenant's runners by writing its own ledger. A
// deleted group's tag stays while the ledger keeps it, and goes with it.
func TestAPassMirrorsWhatItsNamespacesRegistered(t *testing.T) {
	ci, web := newGroup("ci", 1), newGroup("web", 1)
	e := newNSEnv(t, ci, web)
	books := ledger.Store{Client: e.kube}
	ctx := context.Background()
	victim := newGroup("victim", 1, inNS("team-b", "uid-victim"))
	require.NoError(t, books.Record(ctx, ns, runnerjob.OwnerTag(ci.UID), "ci", scope.Of(&ci.Spec)))
	require.NoError(t, books.Record(ctx, ns, runnerjob.OwnerTag(web.UID), "web", scope.Of(&web.Spec)))
	require.NoError(t, books.Record(ctx, ns, runnerjob.OwnerTag(victim.UID), "victim", scope.Of(&victim.Spec))) // forged

	e.pass(e.sweep(platformToken))

	key := ledger.MirrorKey(ns, "ns-uid")
	got := e.copies()[key]
	assert.Equal(t, ledger.Copy{Namespace: ns, UID: "ns-uid", Groups: ledger.Entries{
		runnerjob.OwnerTag(ci.UID):  {Group: "ci", At: scope.New(platformURL, "org", "acme", "")},
		runnerjob.OwnerTag(web.UID): {Group: "web", At: scope.New(platformURL, "org", "acme", "")},
	}}, got, "the forged tag is not copied")

	// web is deleted: its tag stays while the ledger keeps it.
	e.deleteGroup("web")
	e.pass(e.sweep(platformToken))
	assert.Contains(t, e.copies()[key].Groups, runnerjob.OwnerTag(web.UID))

	// No registration of it is left (the ledger forgot it): it goes.
	require.NoError(t, books.Forget(ctx, ns, scope.Of(&web.Spec), []string{runnerjob.OwnerTag(web.UID)}))
	e.pass(e.sweep(platformToken))
	assert.NotContains(t, e.copies()[key].Groups, runnerjob.OwnerTag(web.UID))
	assert.Contains(t, e.copies()[key].Groups, runnerjob.OwnerTag(ci.UID))

	// The tenant empties its ledger: only its own clean-up is lost, and
	// the record, with nothing left, goes.
	require.NoError(t, books.Forget(ctx, ns, scope.Of(&ci.Spec), []string{runnerjob.OwnerTag(ci.UID)}))
	e.pass(e.sweep(platformToken))
	assert.NotContains(t, e.copies(), key)

	// Without the opt-in, no mirror is written.
	e2 := newNSEnv(t, ci)
	require.NoError(t, ledger.Store{Client: e2.kube}.Record(ctx, ns, runnerjob.OwnerTag(ci.UID), "ci", scope.Of(&ci.Spec)))
	e2.pass()
	assert.Empty(t, e2.copies())
}

// TestTheSweepIsBoundedAndNeverFailsThePass: a pass sweeps at most
// MaxPerPass deleted namespaces (the others wait for later passes), and
// a Gitea that fails the sweep leaves the live groups' pass unharmed.
func TestTheSweepIsBoundedAndNeverFailsThePass(t *testing.T) {
	e := newNSEnv(t, newGroup("live", 1))
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		g := newGroup("ci", 1, inNS("team-"+n, "uid-ci-"+n))
		e.seed(record("team-"+n, types.UID("uid-"+n), g))
		e.g.register(runnerjob.RunnerName(g, "ci-"+n+"aaa1"), false)
	}
	bound := func(_ *Deps, c *Config) { c.DeletedNamespaces.MaxPerPass = 2 }

	sum := e.pass(e.sweep(platformToken), bound)
	assert.Len(t, e.g.names(), 3, "two namespaces swept")
	assert.Equal(t, map[string]int{passreport.LeftLater: 3}, sum.DeletedNamespaces.Left)

	e.sweepErr = errors.New("gitea is down")
	e.gitea.snap.Queued = []gitea.Job{queued(1, "ubuntu-latest")}
	sum = e.pass(e.sweep(platformToken), bound)
	require.NoError(t, sum.Err(), "the sweep's failure is not the live groups'")
	assert.Equal(t, 1, sum.Created)
	assert.Equal(t, 2, sum.DeletedNamespaces.Left[passreport.LeftFailed])
	assert.Len(t, e.g.names(), 3)

	e.sweepErr = nil
	for range 2 {
		e.pass(e.sweep(platformToken), bound)
	}
	assert.Empty(t, e.g.names(), "later passes sweep the rest")
	assert.Equal(t, []string{ledger.MirrorKey(ns, "ns-uid")}, slices.Collect(maps.Keys(e.copies())),
		"every deleted namespace is forgotten; the live group's, which created a runner Job, is kept")
}

// deleteGroup deletes RunnerGroup name of namespace ns.
func (e *env) deleteGroup(name string) {
	e.t.Helper()
	require.NoError(e.t, e.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{}))
}
