package runnergroups

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// apiServer answers RunnerGroup lists as the API server does: pages of
// at most the limit asked, chained by a continue token, with managedFields
// on every item. It records each request's query.
func apiServer(t *testing.T, items ...*unstructured.Unstructured) (*httptest.Server, *[]string) {
	t.Helper()
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.Path+"?"+r.URL.RawQuery)
		if r.URL.Path == "/apis/gitea.bpg.pw/v1alpha1/namespaces/forbidden/runnergroups" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(&apierrors.NewForbidden(v1alpha1.GroupVersionResource.GroupResource(), "", nil).ErrStatus)
			return
		}
		start := 0
		if c := r.URL.Query().Get("continue"); c != "" {
			start = 2
		}
		end := min(start+2, len(items)) // the server may send fewer than asked
		page := map[string]any{"apiVersion": "gitea.bpg.pw/v1alpha1", "kind": "RunnerGroupList", "metadata": map[string]any{}}
		if end < len(items) {
			page["metadata"] = map[string]any{"continue": "next"}
		}
		var out []any
		for _, it := range items[start:end] {
			o := it.DeepCopy()
			o.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}})
			out = append(out, o.Object)
		}
		page["items"] = out
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(page)
	}))
	t.Cleanup(srv.Close)
	return srv, &queries
}

func restClient(t *testing.T, srv *httptest.Server) rest.Interface {
	t.Helper()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	return kube.CoreV1().RESTClient()
}

// Listing through REST gives the groups the dynamic client gives (but for
// managedFields, which a pass never reads), follows continue tokens, and
// reports a group the types cannot hold apart from the others.
func TestListThroughRESTDecodesPagesAsTheDynamicClientDoes(t *testing.T) {
	bad := group("a", "bad", map[string]string{"pool": "arm"})
	require.NoError(t, unstructured.SetNestedField(bad.Object, "many", "spec", "maxActiveRunners"))
	objs := []*unstructured.Unstructured{group("a", "one", map[string]string{"pool": "gpu"}), bad, group("a", "two", nil), group("a", "three", nil)}
	three := objs[3]
	require.NoError(t, unstructured.SetNestedField(three.Object, "https://gitea.example.com", "spec", "gitea", "url"))
	require.NoError(t, unstructured.SetNestedField(three.Object, int64(7), "status", "queuedJobs"))
	srv, queries := apiServer(t, objs...)

	groups, broken, err := Client{REST: restClient(t, srv)}.List(context.Background(), "a", "pool")

	require.NoError(t, err)
	var runtimeObjs []runtime.Object
	for _, o := range objs {
		if o != bad {
			runtimeObjs = append(runtimeObjs, o)
		}
	}
	want, _, err := newClient(runtimeObjs...).List(context.Background(), "a", "")
	require.NoError(t, err)
	assert.ElementsMatch(t, want, groups)
	require.Len(t, broken, 1)
	assert.Equal(t, Broken{Namespace: "a", Name: "bad", Labels: map[string]string{"pool": "arm"}, Err: broken[0].Err}, broken[0],
		"with its labels, so a listener's selectors can tell whether it is theirs")
	assert.Error(t, broken[0].Err)
	assert.Equal(t, []string{
		"/apis/gitea.bpg.pw/v1alpha1/namespaces/a/runnergroups?labelSelector=pool&limit=500",
		"/apis/gitea.bpg.pw/v1alpha1/namespaces/a/runnergroups?continue=next&labelSelector=pool&limit=500",
	}, *queries)
}

func TestListThroughRESTAcrossNamespacesAndItsErrors(t *testing.T) {
	srv, queries := apiServer(t, group("a", "one", nil), group("b", "two", nil))
	c := Client{REST: restClient(t, srv)}

	groups, _, err := c.List(context.Background(), "", "")
	require.NoError(t, err)
	assert.Len(t, groups, 2)
	assert.Equal(t, "/apis/gitea.bpg.pw/v1alpha1/runnergroups?limit=500", (*queries)[0])

	_, _, err = c.List(context.Background(), "forbidden", "")
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.ErrorContains(t, err, "cannot list RunnerGroups in namespace forbidden")
}

// The watched client's first list goes through REST into the types too;
// a group the types cannot hold is still reported apart.
func TestWatchedListsThroughREST(t *testing.T) {
	bad := group("a", "bad", nil)
	require.NoError(t, unstructured.SetNestedField(bad.Object, "many", "spec", "maxActiveRunners"))
	srv, queries := apiServer(t, group("a", "one", nil), bad, group("b", "two", nil))
	w, err := Watch(Client{REST: restClient(t, srv), Dynamic: newClient().Dynamic}, 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(w.Stop)

	groups, broken, err := w.List(context.Background(), "", "")

	require.NoError(t, err)
	var names []string
	for _, g := range groups {
		names = append(names, g.Namespace+"/"+g.Name)
		assert.Nil(t, g.ManagedFields)
		assert.EqualValues(t, 2, g.Spec.MaxActiveRunners)
	}
	assert.Equal(t, []string{"a/one", "b/two"}, names)
	require.Len(t, broken, 1)
	assert.Equal(t, "bad", broken[0].Name)
	assert.Contains(t, (*queries)[0], "/apis/gitea.bpg.pw/v1alpha1/runnergroups?")
}
