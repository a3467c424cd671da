package runnergroups

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

func group(ns, name string, lbl map[string]string) *unstructured.Unstructured {
	obj, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha1.RunnerGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl},
		Spec:       v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeGlobal, MaxActiveRunners: 2},
	})
	return &unstructured.Unstructured{Object: obj}
}

func newClient(objs ...runtime.Object) Client {
	return Client{Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource: "RunnerGroupList"}, objs...)}
}

func TestListByNamespaceAndSelector(t *testing.T) {
	c := newClient(group("a", "one", map[string]string{"pool": "gpu"}), group("a", "two", nil), group("b", "three", map[string]string{"pool": "gpu"}))
	tests := []struct {
		ns, selector string
		want         []string
	}{
		{"", "", []string{"a/one", "a/two", "b/three"}},
		{"a", "", []string{"a/one", "a/two"}},
		{"", "pool=gpu", []string{"a/one", "b/three"}},
		{"b", "pool=gpu", []string{"b/three"}},
	}
	for _, tt := range tests {
		groups, broken, err := c.List(context.Background(), tt.ns, tt.selector)
		require.NoError(t, err)
		assert.Empty(t, broken)
		var got []string
		for _, g := range groups {
			got = append(got, g.Namespace+"/"+g.Name)
			assert.EqualValues(t, 2, g.Spec.MaxActiveRunners)
		}
		assert.ElementsMatch(t, tt.want, got, "ns=%q selector=%q", tt.ns, tt.selector)
	}
}

// One object the types cannot hold (written by a newer or broken CRD) must
// not hide the others.
func TestListReportsBrokenGroupsApart(t *testing.T) {
	bad := group("a", "bad", map[string]string{"pool": "arm"})
	require.NoError(t, unstructured.SetNestedField(bad.Object, "many", "spec", "maxActiveRunners"))
	c := newClient(group("a", "good", nil), bad)

	groups, broken, err := c.List(context.Background(), "a", "")

	require.NoError(t, err)
	require.Len(t, groups, 1)
	assert.Equal(t, "good", groups[0].Name)
	require.Len(t, broken, 1)
	assert.Equal(t, "bad", broken[0].Name)
	assert.Equal(t, map[string]string{"pool": "arm"}, broken[0].Labels)
	assert.Error(t, broken[0].Err)
}

func TestPatchStatus(t *testing.T) {
	c := newClient(group("a", "one", nil))
	now := metav1.NewTime(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	rg := &v1alpha1.RunnerGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "one"}, Status: v1alpha1.RunnerGroupStatus{
		ActiveRunners: 0, QueuedJobs: 3, LastCheckTime: &now,
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Reconciled", LastTransitionTime: now}},
	}}

	require.NoError(t, c.PatchStatus(context.Background(), rg))

	groups, _, err := c.List(context.Background(), "a", "")
	require.NoError(t, err)
	require.Len(t, groups, 1)
	assert.EqualValues(t, 3, groups[0].Status.QueuedJobs)
	assert.Equal(t, "Reconciled", groups[0].Status.Conditions[0].Reason)
	assert.EqualValues(t, 2, groups[0].Spec.MaxActiveRunners, "the spec is left as it was")

	assert.ErrorContains(t, c.PatchStatus(context.Background(), &v1alpha1.RunnerGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "gone"}}),
		"cannot update status of RunnerGroup a/gone")
}

// The watched client answers List as Client does, from its cache: by
// namespace and selector, sorted, broken objects apart, and sees changes.
func TestWatchedListsFromItsCache(t *testing.T) {
	bad := group("a", "bad", nil)
	require.NoError(t, unstructured.SetNestedField(bad.Object, "many", "spec", "maxActiveRunners"))
	c := newClient(group("b", "three", map[string]string{"pool": "gpu"}), group("a", "two", nil), group("a", "one", map[string]string{"pool": "gpu"}), bad)
	w, err := Watch(c, 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	fake := c.Dynamic.(*dynamicfake.FakeDynamicClient)
	fake.ClearActions()

	tests := []struct {
		ns, selector string
		want         []string
		broken       int
	}{
		{"", "", []string{"a/one", "a/two", "b/three"}, 1},
		{"a", "", []string{"a/one", "a/two"}, 1},
		{"", "pool=gpu", []string{"a/one", "b/three"}, 0},
		{"b", "pool=gpu", []string{"b/three"}, 0},
	}
	for _, tt := range tests {
		groups, broken, err := w.List(context.Background(), tt.ns, tt.selector)
		require.NoError(t, err)
		shared, sharedBroken, err := w.ListShared(context.Background(), tt.ns, tt.selector)
		require.NoError(t, err)
		var got, gotShared []string
		for _, g := range groups {
			got = append(got, g.Namespace+"/"+g.Name)
		}
		for _, g := range shared {
			gotShared = append(gotShared, g.Namespace+"/"+g.Name)
		}
		assert.Equal(t, tt.want, got, "ns=%q selector=%q", tt.ns, tt.selector)
		assert.Equal(t, tt.want, gotShared, "shared: ns=%q selector=%q", tt.ns, tt.selector)
		assert.Len(t, broken, tt.broken)
		assert.Len(t, sharedBroken, tt.broken)
	}
	assert.Empty(t, fake.Actions(), "no request: the cache answered")

	// List copies, ListShared hands out the cache's own objects.
	listed, _, err := w.List(context.Background(), "a", "")
	require.NoError(t, err)
	listed[0].Spec.Org = "changed"
	first, _, err := w.ListShared(context.Background(), "a", "")
	require.NoError(t, err)
	again, _, err := w.ListShared(context.Background(), "a", "")
	require.NoError(t, err)
	assert.NotEqual(t, "changed", first[0].Spec.Org, "a change to what List gave does not reach the cache")
	assert.Same(t, first[0], again[0], "ListShared gives the cache's object, not a copy")

	_, err = c.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace("b").Create(context.Background(), group("b", "four", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		groups, _, _ := w.List(context.Background(), "b", "")
		return len(groups) == 2
	}, 10*time.Second, 10*time.Millisecond, "a new group reaches the cache")
}
