package kubecache

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
)

const ns = "team-a"

func labelled(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), ResourceVersion: "7",
		Labels:        map[string]string{v1alpha1.LabelRunnerGroupName: "ci", v1alpha1.LabelGiteaJobID: "42"},
		Annotations:   map[string]string{"gitea.bpg.pw/queued-at": "2026-11-26T10:00:00Z"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "ci-1", UID: "job-uid",
			Controller: func() *bool { b := true; return &b }()}}}
}

func waitView(t *testing.T, c *Cache) View {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, ok := c.Watch(ctx, ns)
	require.True(t, ok, "the caches sync")
	return v
}

// What a pass reads of a cached object survives the trim: everything but
// managedFields, which no pass reads.
func TestTheCachesKeepWhatAPassReadsAndDropManagedFields(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: labelled("ci-1"),
		Spec:   batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", Image: "x"}}}}},
		Status: batchv1.JobStatus{Active: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}
	pod := &corev1.Pod{ObjectMeta: labelled("ci-1-abc"),
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", Image: "x"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "runner", RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	cm := &corev1.ConfigMap{ObjectMeta: labelled("ci-state"), Data: map[string]string{"claims": `{"7":"x"}`}}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: ns}}
	kube := fake.NewClientset(job, pod, cm, other)
	c := New(kube, nil)
	t.Cleanup(c.Stop)

	v := waitView(t, c)

	strip := func(m metav1.ObjectMeta) metav1.ObjectMeta { m.ManagedFields = nil; return m }
	wantJob, wantPod, wantCM := job.DeepCopy(), pod.DeepCopy(), cm.DeepCopy()
	wantJob.ObjectMeta, wantPod.ObjectMeta, wantCM.ObjectMeta = strip(job.ObjectMeta), strip(pod.ObjectMeta), strip(cm.ObjectMeta)
	assert.Equal(t, []batchv1.Job{*wantJob}, v.Jobs)
	assert.Equal(t, []corev1.Pod{*wantPod}, v.Pods)
	assert.Equal(t, []*corev1.ConfigMap{wantCM}, v.States, "only labelled state ConfigMaps, whole but for managedFields")

	// A later change reaches the cache, trimmed as well.
	cm2 := cm.DeepCopy()
	cm2.Data["claims"] = "{}"
	_, err := kube.CoreV1().ConfigMaps(ns).Update(context.Background(), cm2, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s := waitView(t, c).States
		return len(s) == 1 && s[0].Data["claims"] == "{}" && s[0].ManagedFields == nil
	}, 10*time.Second, 10*time.Millisecond)
}

// The view is a copy: a pass may change it.
func TestAViewIsACopy(t *testing.T) {
	kube := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: labelled("ci-state"), Data: map[string]string{"claims": "{}"}})
	c := New(kube, nil)
	t.Cleanup(c.Stop)
	waitView(t, c).States[0].Data["claims"] = "changed"
	assert.Equal(t, "{}", waitView(t, c).States[0].Data["claims"])
}

// A list the API server refuses (the scaler's rights in the namespace
// went) is reported, so the pass reviews the rights again; Forget stops
// the namespace's watches and forgets the refusal.
func TestARefusedListIsReportedAndForgetStopsTheWatches(t *testing.T) {
	kube := fake.NewClientset()
	kube.PrependReactor("list", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "", nil)
	})
	c := New(kube, nil)
	t.Cleanup(c.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, ok := c.Watch(ctx, ns)
	assert.False(t, ok, "never synced: its Jobs cannot be listed")
	require.Eventually(t, func() bool { return c.Refused(ns) }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{ns}, c.Watching())

	c.Forget(ns)
	assert.False(t, c.Refused(ns))
	assert.Empty(t, c.Watching())
}

// The pods are watched only while the namespace has runner Jobs: none
// listed nor watched before the first Job, one list and watch once it is
// there (the view then holds its pod), none again after the last Job went,
// and a new list when another comes.
func TestPodsAreWatchedOnlyWhileTheNamespaceHasRunnerJobs(t *testing.T) {
	kube := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: labelled("ci-state")}, &corev1.Pod{ObjectMeta: labelled("ci-1-abc")})
	c := New(kube, nil)
	t.Cleanup(c.Stop)
	podRequests := func() map[string]int {
		out := map[string]int{}
		for _, a := range kube.Actions() {
			if a.GetResource().Resource == "pods" {
				out[a.GetVerb()]++
			}
		}
		return out
	}
	jobs := kube.BatchV1().Jobs(ns)
	viewWhen := func(jobs int) View {
		var v View
		require.Eventually(t, func() bool { v = waitView(t, c); return len(v.Jobs) == jobs }, 10*time.Second, 10*time.Millisecond)
		return v
	}

	v := viewWhen(0)
	assert.Empty(t, v.Pods)
	assert.Empty(t, podRequests(), "no runner Job: no pod is listed or watched")

	_, err := jobs.Create(context.Background(), &batchv1.Job{ObjectMeta: labelled("ci-1")}, metav1.CreateOptions{})
	require.NoError(t, err)
	v = viewWhen(1)
	require.Len(t, v.Pods, 1, "a runner Job: its pods are in the view")
	assert.Equal(t, 1, podRequests()["list"])

	require.NoError(t, jobs.Delete(context.Background(), "ci-1", metav1.DeleteOptions{}))
	assert.Empty(t, viewWhen(0).Pods)
	_, err = jobs.Create(context.Background(), &batchv1.Job{ObjectMeta: labelled("ci-2")}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Len(t, viewWhen(1).Pods, 1)
	assert.Equal(t, 2, podRequests()["list"], "the pods' watch stopped with the last Job, and a new one listed them again")
}
