package state

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
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
