package owned_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/owned"
)

const ns = "runners"

func group() *v1alpha1.RunnerGroup {
	return &v1alpha1.RunnerGroup{ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: ns, UID: "uid-ci"}}
}

// wanted is the ConfigMap the group wants: its labels, an annotation, and
// data.
func wanted(data map[string]string) *corev1.ConfigMap {
	rg := group()
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: "ci-thing", Namespace: ns,
			Labels:          map[string]string{"group": "ci"},
			Annotations:     map[string]string{"checked": "now"},
			OwnerReferences: []metav1.OwnerReference{rg.ControllerRef()},
		},
		Data: data,
	}
}

func TestControlsGoesByTheControllersUID(t *testing.T) {
	rg := group()
	tests := map[string]struct {
		owners []metav1.OwnerReference
		want   bool
	}{
		"the group as controller": {[]metav1.OwnerReference{rg.ControllerRef()}, true},
		"no owner":                {nil, false},
		"the group, but not as controller": {[]metav1.OwnerReference{{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind, Name: "ci", UID: "uid-ci"}}, false},
		"an earlier group of that name": {[]metav1.OwnerReference{{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind, Name: "ci", UID: "uid-old", Controller: ptr.To(true)}}, false},
		"another controller": {[]metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "uid-other", Controller: ptr.To(true)}}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			obj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{OwnerReferences: tc.owners}}
			assert.Equal(t, tc.want, owned.Controls(rg, obj))
		})
	}
}

func TestEnsureCreatesRefusesAndUpdatesOnlyWhatDiffers(t *testing.T) {
	mine := wanted(map[string]string{"a": "1"})
	mine.Labels["theirs"] = "kept"
	mine.Annotations["theirs"] = "kept"
	notMine := wanted(map[string]string{"a": "1"})
	notMine.OwnerReferences = nil
	tests := map[string]struct {
		have   *corev1.ConfigMap
		want   *corev1.ConfigMap
		dryRun bool
		result owned.Result
		// writes are the requests that change the object.
		writes []string
		// stored is the object afterwards; nil: as it was.
		stored   *corev1.ConfigMap
		notOwned bool
	}{
		"absent: created as wanted": {
			want: wanted(map[string]string{"a": "1"}), result: owned.Created, writes: []string{"create"},
			stored: wanted(map[string]string{"a": "1"}),
		},
		"the group's, as wanted: untouched": {
			have: mine, want: wanted(map[string]string{"a": "1"}), result: owned.Unchanged,
		},
		"the group's, content differs: replaced, others' labels and annotations kept": {
			have: mine, want: wanted(map[string]string{"b": "2"}), result: owned.Updated, writes: []string{"update"},
			stored: func() *corev1.ConfigMap {
				cm := mine.DeepCopy()
				cm.Data = map[string]string{"b": "2"}
				return cm
			}(),
		},
		"another's: refused, untouched": {
			have: notMine, want: wanted(map[string]string{"b": "2"}), notOwned: true,
		},
		"nothing wanted: untouched": {have: mine, result: owned.Unchanged},
		"dry run, absent: nothing written": {
			want: wanted(map[string]string{"a": "1"}), dryRun: true, result: owned.WouldWrite,
		},
		"dry run, differs: nothing written": {
			have: mine, want: wanted(map[string]string{"b": "2"}), dryRun: true, result: owned.WouldWrite,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			kube := fake.NewClientset()
			if tc.have != nil {
				require.NoError(t, kube.Tracker().Add(tc.have.DeepCopy()))
			}
			kube.ClearActions()
			desired := 0
			res, err := owned.Ensure(context.Background(), kube.CoreV1().ConfigMaps(ns), group(), "ci-thing", owned.Want[corev1.ConfigMap, *corev1.ConfigMap]{
				DryRun: tc.dryRun,
				Desire: func(have *corev1.ConfigMap) (*corev1.ConfigMap, error) {
					desired++
					if tc.have == nil {
						assert.Nil(t, have)
					} else {
						assert.Equal(t, tc.have.Data, have.Data)
					}
					return tc.want, nil
				},
			})
			if tc.notOwned {
				require.ErrorIs(t, err, owned.ErrNotOwned)
				assert.EqualError(t, err, "ConfigMap runners/ci-thing exists and is not owned by this RunnerGroup")
				assert.Zero(t, desired, "nothing is made for another's object")
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.result, res)
			}
			var writes []string
			for _, a := range kube.Actions() {
				if a.GetVerb() != "get" {
					writes = append(writes, a.GetVerb())
				}
			}
			assert.Equal(t, tc.writes, writes)
			got, err := kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "ci-thing", metav1.GetOptions{})
			switch want := firstOf(tc.stored, tc.have); {
			case want == nil:
				assert.True(t, apierrors.IsNotFound(err), "nothing was made")
			default:
				require.NoError(t, err)
				assert.Equal(t, want.Data, got.Data)
				assert.Equal(t, want.Labels, got.Labels)
				assert.Equal(t, want.Annotations, got.Annotations)
				assert.Equal(t, want.OwnerReferences, got.OwnerReferences)
			}
		})
	}
}

// firstOf is the first of objs that is not nil.
func firstOf(objs ...*corev1.ConfigMap) *corev1.ConfigMap {
	for _, o := range objs {
		if o != nil {
			return o
		}
	}
	return nil
}

// What the caller read is used as it is: no second read.
func TestEnsureUsesTheObjectTheCallerRead(t *testing.T) {
	kube := fake.NewClientset()
	have := wanted(map[string]string{"a": "1"})
	res, err := owned.Ensure(context.Background(), kube.CoreV1().ConfigMaps(ns), group(), "ci-thing", owned.Want[corev1.ConfigMap, *corev1.ConfigMap]{
		Have:   have,
		Desire: func(*corev1.ConfigMap) (*corev1.ConfigMap, error) { return wanted(map[string]string{"a": "1"}), nil },
	})
	require.NoError(t, err)
	assert.Equal(t, owned.Unchanged, res)
	assert.Empty(t, kube.Actions())
}

func TestEnsureSaysWhatFailed(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	refuse := func(verb string, err error) func(*fake.Clientset) {
		return func(kube *fake.Clientset) {
			kube.PrependReactor(verb, "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, err })
		}
	}
	made := errors.New("spec.runnerConfig: cannot render")
	tests := map[string]struct {
		have    *corev1.ConfigMap
		fault   func(*fake.Clientset)
		desire  error
		raced   bool
		message string
	}{
		"the read fails": {
			fault:   refuse("get", apierrors.NewServiceUnavailable("down")),
			message: "cannot read ConfigMap runners/ci-thing: down",
		},
		"another made it first": {
			fault: refuse("create", apierrors.NewAlreadyExists(gr, "ci-thing")), raced: true,
			message: `cannot create ConfigMap runners/ci-thing: configmaps "ci-thing" already exists`,
		},
		"another wrote it first": {
			have:  wanted(map[string]string{"a": "1"}),
			fault: refuse("update", apierrors.NewConflict(gr, "ci-thing", errors.New("stale"))), raced: true,
			message: `cannot update ConfigMap runners/ci-thing: Operation cannot be fulfilled on configmaps "ci-thing": stale`,
		},
		"the content cannot be made": {desire: made, message: made.Error()},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			kube := fake.NewClientset()
			if tc.have != nil {
				require.NoError(t, kube.Tracker().Add(tc.have))
			}
			if tc.fault != nil {
				tc.fault(kube)
			}
			_, err := owned.Ensure(context.Background(), kube.CoreV1().ConfigMaps(ns), group(), "ci-thing", owned.Want[corev1.ConfigMap, *corev1.ConfigMap]{
				Desire: func(*corev1.ConfigMap) (*corev1.ConfigMap, error) {
					if tc.desire != nil {
						return nil, tc.desire
					}
					return wanted(map[string]string{"b": "2"}), nil
				},
			})
			require.EqualError(t, err, tc.message)
			assert.Equal(t, tc.raced, owned.Raced(err))
			var req *owned.RequestError
			assert.Equal(t, tc.desire == nil, errors.As(err, &req), "a refused request, not the caller's own error")
		})
	}
}
