package scaler

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// TestRegistrationsOfDeletedGroupsAreRemoved: a runner that registered and
// never got a job stays in Gitea once its group is gone. The next pass of a
// group of the same namespace and Gitea scope removes it, and nothing of
// another namespace, another install or a group that lives.
func TestRegistrationsOfDeletedGroupsAreRemoved(t *testing.T) {
	rg := newGroup("ci", 3)
	// A group served by another listener in the same namespace lives.
	other := newGroup("gpu", 1, func(o *v1alpha1.RunnerGroup) { o.Labels = map[string]string{"listener": "b"} })
	e := newEnv(t, rg, other)
	g := &runnersGitea{fakeGitea: e.gitea}
	set := func(d *Deps, c *Config) {
		d.Gitea = func(string, string) (gitea.Client, error) { return g, nil }
		c.RunnerIdleTimeout, c.RunnerStartTimeout = 10*time.Minute, 10*time.Minute
		c.ExcludeSelectors = []string{"listener=b"}
	}

	oldCI := newGroup("ci", 1, func(o *v1alpha1.RunnerGroup) { o.UID = "uid-ci-before" }) // deleted, made again
	gone := newGroup("gone", 1)                                                           // deleted
	elsewhere := newGroup("gone", 1, func(o *v1alpha1.RunnerGroup) { o.Namespace, o.UID = "elsewhere", "uid-gone-elsewhere" })
	otherScope := newGroup("web", 1, func(o *v1alpha1.RunnerGroup) { o.Spec.Org = "other-org" }) // deleted, another scope
	books := ledger.Store{Client: e.kube}
	for _, r := range []*v1alpha1.RunnerGroup{oldCI, gone, other, otherScope} {
		require.NoError(t, books.Record(context.Background(), ns, runnerjob.OwnerTag(r.UID), r.Name, scope.Of(&r.Spec)))
	}

	g.register(runnerjob.RunnerName(oldCI, "ci-old01"), false)           // removed
	g.register(runnerjob.RunnerName(gone, "gone-aaaa1"), false)          // removed
	g.register(runnerjob.RunnerName(gone, "gone-aaaa2"), true)           // online: kept, and the tag too
	g.register(runnerjob.RunnerName(gone, "gone-aaaa3"), false)          // runs a job: kept
	g.register(runnerjob.RunnerName(elsewhere, "gone-bbbb1"), false)     // another namespace's: kept
	g.register(runnerjob.RunnerName(other, "gpu-ccccc"), false)          // a live group's: kept
	g.register(runnerjob.RunnerName(otherScope, "web-ddddd"), false)     // recorded for another scope: kept
	g.register(runnerjob.RunnerName(newGroup("x", 1), "x-eeeee"), false) // never recorded (another install): kept
	g.inProgress = []gitea.Job{{ID: 4, RunnerName: runnerjob.RunnerName(gone, "gone-aaaa3")}}
	before := g.names()

	e.pass(set, func(_ *Deps, c *Config) { c.DryRun = true })
	assert.Equal(t, before, g.names(), "a dry run removes nothing")
	assert.Contains(t, e.out.String(), "would remove runner "+runnerjob.RunnerName(gone, "gone-aaaa1"))

	e.pass(set)

	assert.ElementsMatch(t, []string{
		runnerjob.RunnerName(gone, "gone-aaaa2"), runnerjob.RunnerName(gone, "gone-aaaa3"),
		runnerjob.RunnerName(elsewhere, "gone-bbbb1"), runnerjob.RunnerName(other, "gpu-ccccc"),
		runnerjob.RunnerName(otherScope, "web-ddddd"), runnerjob.RunnerName(newGroup("x", 1), "x-eeeee"),
	}, g.names())
	assert.EqualValues(t, 2, e.group("ci").Status.ReapedRunners)
	left, _, err := books.Load(context.Background(), ns)
	require.NoError(t, err)
	assert.NotContains(t, left, runnerjob.OwnerTag(oldCI.UID), "no registration of it is left: forgotten")
	assert.Contains(t, left, runnerjob.OwnerTag(gone.UID), "one is still online")
	assert.Contains(t, left, runnerjob.OwnerTag(other.UID), "it lives")
	assert.Contains(t, left, runnerjob.OwnerTag(otherScope.UID), "not this group's scope to judge")
}

// TestAGroupIsRecordedBeforeItsFirstRunner: the ledger names the group
// before any of its runners can register.
func TestAGroupIsRecordedBeforeItsFirstRunner(t *testing.T) {
	rg := newGroup("ci", 3)
	e, _, set := lifecycleEnv(t, rg)
	e.gitea.snap.Queued = []gitea.Job{queued(1, "ubuntu-latest")}

	require.Equal(t, 1, e.pass(set).Created)

	cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), ledger.ConfigMapName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, cm.OwnerReferences, "it outlives the group")
	left, _, err := ledger.Store{Client: e.kube}.Load(context.Background(), ns)
	require.NoError(t, err)
	assert.Equal(t, ledger.Entry{Group: "ci", At: scope.New(rg.Spec.Gitea.URL, "org", "acme", "")}, left[runnerjob.OwnerTag(rg.UID)])
}

// staleGroups is a loop's RunnerGroup watch cache that has not seen yet
// the groups in hidden (made a moment ago); ListFresh asks the API server,
// which has them.
type staleGroups struct {
	*frozenGroups
	hidden map[string]bool
	fresh  int
}

func (s *staleGroups) List(ctx context.Context, namespace, selector string) ([]v1alpha1.RunnerGroup, []runnergroups.Broken, error) {
	groups, broken, err := s.frozenGroups.List(ctx, namespace, selector)
	return slices.DeleteFunc(groups, func(rg v1alpha1.RunnerGroup) bool { return s.hidden[rg.Name] }), broken, err
}

func (s *staleGroups) ListFresh(ctx context.Context, namespace, selector string) ([]v1alpha1.RunnerGroup, []runnergroups.Broken, error) {
	s.fresh++
	return s.frozenGroups.Client.List(ctx, namespace, selector)
}

// TestTheSweepOfDeletedGroupsConfirmsWithTheAPIServer: a loop reads the
// RunnerGroups from a watch cache, which may not hold yet a group made a
// moment ago, whose first runner already registered (it was recorded in
// the ledger first, by the listener that serves it). Such a group is not
// deleted: before the sweep removes a registration or forgets a tag, it
// asks the API server, and only what is gone there too is swept.
func TestTheSweepOfDeletedGroupsConfirmsWithTheAPIServer(t *testing.T) {
	rg := newGroup("ci", 3)
	young := newGroup("young", 1, func(o *v1alpha1.RunnerGroup) { o.Labels = map[string]string{"listener": "b"} })
	e := newEnv(t, rg, young)
	g := &runnersGitea{fakeGitea: e.gitea}
	groups := &staleGroups{frozenGroups: e.frozenGroups(), hidden: map[string]bool{"young": true}}
	set := func(d *Deps, c *Config) {
		d.Gitea = func(string, string) (gitea.Client, error) { return g, nil }
		d.Groups = groups
		c.RunnerIdleTimeout, c.RunnerStartTimeout = 10*time.Minute, 10*time.Minute
		c.ExcludeSelectors = []string{"listener=b"}
	}
	gone := newGroup("gone", 1) // deleted for real
	books := ledger.Store{Client: e.kube}
	for _, r := range []*v1alpha1.RunnerGroup{young, gone} {
		require.NoError(t, books.Record(context.Background(), ns, runnerjob.OwnerTag(r.UID), r.Name, scope.Of(&r.Spec)))
	}
	// Registered, not polling yet: offline, as a deleted group's would be.
	g.register(runnerjob.RunnerName(young, "young-aaaa1"), false)
	g.register(runnerjob.RunnerName(gone, "gone-aaaa1"), false)

	e.pass(set)

	assert.Equal(t, []string{runnerjob.RunnerName(young, "young-aaaa1")}, g.names(), "the young group's runner stays; the deleted group's goes")
	assert.Positive(t, groups.fresh, "the API server was asked")
	left, _, err := books.Load(context.Background(), ns)
	require.NoError(t, err)
	assert.Contains(t, left, runnerjob.OwnerTag(young.UID), "a living group's tag is never forgotten")
	assert.NotContains(t, left, runnerjob.OwnerTag(gone.UID))
}
