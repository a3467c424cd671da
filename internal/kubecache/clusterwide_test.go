package kubecache

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
)

// allowReviews answers every SelfSubjectAccessReview with allowed, but
// for the resources and verbs in denied.
func allowReviews(kube *fake.Clientset, denied ...string) {
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		attrs := ar.Spec.ResourceAttributes
		ar.Status.Allowed = attrs.Namespace == ""
		for _, d := range denied {
			if d == attrs.Verb+" "+attrs.Resource {
				ar.Status.Allowed = false
			}
		}
		return true, ar, nil
	})
}

// inNamespace is labelled(name) in namespace.
func inNamespace(namespace, name string) metav1.ObjectMeta {
	m := labelled(name)
	m.Namespace = namespace
	m.UID = m.UID + types.UID("-"+namespace)
	return m
}

// With the cluster-wide grant, one list and watch per kind serves every
// namespace: each view holds its own namespace's objects only (the
// registrations ledger among the states, by its RunnerGroup label), and no
// watch per namespace is started.
func TestClusterWideCachesServeEachNamespaceFromOneWatchPerKind(t *testing.T) {
	const other = "team-b"
	kube := fake.NewClientset(
		&batchv1.Job{ObjectMeta: inNamespace(ns, "ci-1")}, &batchv1.Job{ObjectMeta: inNamespace(other, "ci-2")},
		&corev1.Pod{ObjectMeta: inNamespace(ns, "ci-1-abc")}, &corev1.Pod{ObjectMeta: inNamespace(other, "ci-2-abc")},
		&corev1.ConfigMap{ObjectMeta: inNamespace(ns, "ci-state")}, &corev1.ConfigMap{ObjectMeta: inNamespace(other, "ci-state")},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: ns}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ledger.ConfigMapName, Namespace: ns,
			Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedBy, v1alpha1.LabelRunnerGroupName: ""}}, Data: map[string]string{"tag": `{"group":"ci"}`}},
	)
	allowReviews(kube)
	c := New(kube, nil)
	t.Cleanup(c.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.WatchClusterWide(ctx))

	for namespace, states := range map[string]int{ns: 2, other: 1} {
		v, ok := c.Watch(ctx, namespace)
		require.True(t, ok)
		require.Len(t, v.Jobs, 1)
		require.Len(t, v.Pods, 1)
		require.Len(t, v.States, states, "the state, and the ledger where there is one")
		for _, m := range []metav1.ObjectMeta{v.Jobs[0].ObjectMeta, v.Pods[0].ObjectMeta, v.States[0].ObjectMeta} {
			assert.Equal(t, namespace, m.Namespace)
			assert.Nil(t, m.ManagedFields, "trimmed as the namespace's own caches are")
		}
	}
	assert.Empty(t, c.Watching(), "no watch of its own per namespace")

	lists := map[string]bool{}
	for _, a := range kube.Actions() {
		if l, isList := a.(k8stesting.ListAction); isList {
			lists[l.GetResource().Resource+" in "+l.GetNamespace()+"/ by "+l.GetListRestrictions().Labels.String()] = true
		}
	}
	assert.Equal(t, map[string]bool{
		"jobs in / by " + v1alpha1.LabelRunnerGroupName:       true,
		"pods in / by " + v1alpha1.LabelRunnerGroupName:       true,
		"configmaps in / by " + v1alpha1.LabelRunnerGroupName: true,
	}, lists, "every list is cluster-wide and selected")
}

// Without the grant (or with a part of it) nothing is started and the
// namespaces get watches of their own, as before.
func TestWithoutTheClusterWideGrantEachNamespaceIsWatchedOnItsOwn(t *testing.T) {
	for _, denied := range []string{"list jobs", "watch pods", "watch configmaps"} {
		t.Run(denied, func(t *testing.T) {
			kube := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: labelled("ci-state")})
			allowReviews(kube, denied)
			c := New(kube, nil)
			t.Cleanup(c.Stop)
			err := c.WatchClusterWide(context.Background())
			require.Error(t, err)
			assert.Contains(t, err.Error(), "may not "+denied+" in all namespaces")
			assert.Len(t, waitView(t, c).States, 1)
			assert.Equal(t, []string{ns}, c.Watching())
		})
	}
}

// A cluster-wide list the API server refuses although the review allowed
// it leaves nothing behind, and the namespaces are watched on their own.
func TestARefusedClusterWideListFallsBackToTheNamespaces(t *testing.T) {
	kube := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: labelled("ci-state")})
	allowReviews(kube)
	kube.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() == "" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", nil)
		}
		return false, nil, nil
	})
	c := New(kube, nil)
	t.Cleanup(c.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.Error(t, c.WatchClusterWide(ctx))
	assert.Len(t, waitView(t, c).States, 1)
	assert.Equal(t, []string{ns}, c.Watching())
}
