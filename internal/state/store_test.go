package state

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const stateLabel = "gitea.bpg.pw/runnergroup-name"

func stateConfigMap(group, uid string, labels map[string]string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName(group), Namespace: "ci", Labels: labels, ResourceVersion: "7",
			OwnerReferences: []metav1.OwnerReference{{Kind: "RunnerGroup", Name: group, UID: types.UID(uid)}}},
		Data: data,
	}
}

// TestListedLoadReadsWhatLoadWould: one list of a namespace's labelled
// state ConfigMaps answers each group as Store.Load would, with the
// resourceVersion to write under; a ConfigMap the list lacks (missing or
// unlabelled) is not found, never an empty state mistaken for a read one.
func TestListedLoadReadsWhatLoadWould(t *testing.T) {
	claims := Claims{5: {ClaimedAt: t0, JobName: "a-abcde"}}
	labelled := map[string]string{stateLabel: "x"}
	client := fake.NewClientset(
		stateConfigMap("a", "uid-a", labelled, Encode(claims)),
		stateConfigMap("b", "uid-other", labelled, Encode(claims)),
		stateConfigMap("c", "uid-c", labelled, map[string]string{DataKey: "{garbage"}),
		stateConfigMap("d", "uid-d", nil, Encode(claims)),
	)
	listed, err := Store{Client: client}.List(context.Background(), "ci", stateLabel)
	require.NoError(t, err)

	tests := []struct {
		group, uid  string
		wantOK      bool
		wantClaims  Claims
		wantErr     error
		wantCorrupt bool
	}{
		{group: "a", uid: "uid-a", wantOK: true, wantClaims: claims},
		{group: "b", uid: "uid-b", wantOK: true, wantErr: ErrNotOurs},
		{group: "c", uid: "uid-c", wantOK: true, wantCorrupt: true, wantClaims: Claims{}},
		{group: "d", uid: "uid-d", wantOK: false},
		{group: "e", uid: "uid-e", wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.group, func(t *testing.T) {
			got, ok, err := listed.Load(Owner{Namespace: "ci", Name: tt.group, UID: tt.uid})
			assert.Equal(t, tt.wantOK, ok)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			if !ok {
				return
			}
			assert.Equal(t, tt.wantClaims, got.Claims)
			assert.Equal(t, "7", got.ResourceVersion, "the listed resourceVersion, for the conditional write")
			assert.Equal(t, tt.wantCorrupt, got.Corrupt != nil)
		})
	}
}

// TestTheStateIsOursOnlyWhenTheGroupControlsIt: the scaler writes its
// state ConfigMap with the group as controller, and reads one as its own
// only when the group is its controller (metav1.IsControlledBy, the rule
// for every object a group owns), or, as states written before the
// controller flag were, when the group is an owner and nothing else is
// the controller.
func TestTheStateIsOursOnlyWhenTheGroupControlsIt(t *testing.T) {
	const uid = "uid-a"
	ref := func(u string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{Kind: "RunnerGroup", Name: "a", UID: types.UID(u), Controller: &controller}
	}
	plain := metav1.OwnerReference{Kind: "RunnerGroup", Name: "a", UID: uid}
	tests := []struct {
		name string
		refs []metav1.OwnerReference
		ours bool
	}{
		{"the group is the controller", []metav1.OwnerReference{ref(uid, true)}, true},
		{"written before the controller flag", []metav1.OwnerReference{plain}, true},
		{"an owner, and another object the controller", []metav1.OwnerReference{plain, ref("uid-other", true)}, false},
		{"an owner that says it is not the controller, beside a controller", []metav1.OwnerReference{ref(uid, false), ref("uid-other", true)}, false},
		{"another group's", []metav1.OwnerReference{ref("uid-other", true)}, false},
		{"no owner", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm := stateConfigMap("a", uid, nil, Encode(Claims{}))
			cm.OwnerReferences = tt.refs
			_, err := loaded(cm, Owner{Namespace: "ci", Name: "a", UID: uid})
			if tt.ours {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrNotOurs)
			}
		})
	}

	client := fake.NewClientset()
	o := Owner{Namespace: "ci", Name: "a", UID: uid, APIVersion: "gitea.bpg.pw/v1alpha1", Kind: "RunnerGroup"}
	_, err := Store{Client: client}.Save(context.Background(), o, Loaded{}, Claims{})
	require.NoError(t, err)
	cm, err := client.CoreV1().ConfigMaps("ci").Get(context.Background(), ConfigMapName("a"), metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, metav1.IsControlledBy(cm, &metav1.ObjectMeta{UID: uid}), "written with the group as controller")
}

// Save and SaveAtWork each write their part and carry the other as loaded,
// so a pass that edits its claims never drops the sightings, nor the other
// way round.
func TestSavingClaimsKeepsTheSightingsAndBack(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	// The fake keeps no resourceVersions; each write here gets a new one.
	rv := 0
	client.PrependReactor("*", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if w, ok := a.(interface{ GetObject() runtime.Object }); ok {
			rv++
			w.GetObject().(*corev1.ConfigMap).ResourceVersion = strconv.Itoa(rv)
		}
		return false, nil, nil
	})
	st := Store{Client: client}
	o := Owner{Namespace: "ci", Name: "a", UID: "uid-a", APIVersion: "gitea.bpg.pw/v1alpha1", Kind: "RunnerGroup"}
	claims := Claims{5: {ClaimedAt: t0, JobName: "a-abcde"}}
	atWork := AtWork{"uid-job": t0}

	load := func() Loaded {
		t.Helper()
		l, err := st.Load(ctx, o)
		require.NoError(t, err)
		return l
	}
	_, err := st.Save(ctx, o, Loaded{}, claims)
	require.NoError(t, err)
	_, err = st.SaveAtWork(ctx, o, load(), atWork)
	require.NoError(t, err)
	got := load()
	assert.Equal(t, claims, got.Claims, "the sightings' write kept the claims")
	assert.Equal(t, atWork, got.AtWork)

	_, err = st.Save(ctx, o, got, Claims{})
	require.NoError(t, err)
	got = load()
	assert.Empty(t, got.Claims)
	assert.Equal(t, atWork, got.AtWork, "the claims' write kept the sightings")
}
