package ledger

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
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var (
	orgAcme = Place{URL: "https://gitea.example.com", Scope: "org", Owner: "acme"}
	repoApp = Place{URL: "https://gitea.example.com", Scope: "repo", Owner: "acme", Repo: "app"}
	global  = Place{URL: "https://gitea.example.com", Scope: "global"}
)

func TestRecordAndForget(t *testing.T) {
	ctx := context.Background()
	s := Store{Client: fake.NewClientset()}
	ci := Entry{Group: "ci", URL: "https://gitea.example.com", Scope: "org", Owner: "acme"}
	web := Entry{Group: "web", URL: "https://gitea.example.com", Scope: "repo", Owner: "acme", Repo: "app"}

	empty, err := s.Load(ctx, "ns")
	require.NoError(t, err)
	assert.Empty(t, empty, "no ledger is an empty one")

	require.NoError(t, s.Record(ctx, "ns", "aaaa0001", "ci", orgAcme))
	require.NoError(t, s.Record(ctx, "ns", "aaaa0002", "web", repoApp))
	require.NoError(t, s.Record(ctx, "ns", "aaaa0001", "ci", orgAcme), "recording again changes nothing")
	got, err := s.Load(ctx, "ns")
	require.NoError(t, err)
	assert.Equal(t, Entries{"aaaa0001": ci, "aaaa0002": web}, got)

	require.NoError(t, s.Forget(ctx, "ns", repoApp, []string{"aaaa0001", "unknown"}), "ci is not recorded there")
	require.NoError(t, s.Forget(ctx, "ns", orgAcme, []string{"aaaa0001", "unknown"}))
	got, err = s.Load(ctx, "ns")
	require.NoError(t, err)
	assert.Equal(t, Entries{"aaaa0002": web}, got)
}

// TestAGroupThatMovesKeepsItsFormerPlaces: a group whose spec moves it to
// another Gitea scope leaves its registrations in the old one; the ledger
// keeps the old place until no registration is left there.
func TestAGroupThatMovesKeepsItsFormerPlaces(t *testing.T) {
	ctx := context.Background()
	s := Store{Client: fake.NewClientset()}
	load := func() Entry {
		got, err := s.Load(ctx, "ns")
		require.NoError(t, err)
		return got["aaaa0001"]
	}

	require.NoError(t, s.Record(ctx, "ns", "aaaa0001", "ci", orgAcme))
	require.NoError(t, s.Record(ctx, "ns", "aaaa0001", "ci", repoApp))
	assert.Equal(t, Entry{Group: "ci", URL: repoApp.URL, Scope: "repo", Owner: "acme", Repo: "app", Formerly: []Place{orgAcme}}, load())

	require.NoError(t, s.Record(ctx, "ns", "aaaa0001", "ci", global))
	assert.Equal(t, []Place{global, repoApp, orgAcme}, load().Places(), "newest first")

	require.NoError(t, s.Record(ctx, "ns", "aaaa0001", "ci", orgAcme))
	assert.Equal(t, []Place{orgAcme, global, repoApp}, load().Places(), "moved back: no place twice")

	require.NoError(t, s.Forget(ctx, "ns", global, []string{"aaaa0001"}))
	assert.Equal(t, []Place{orgAcme, repoApp}, load().Places(), "a former place is forgotten alone")

	require.NoError(t, s.Forget(ctx, "ns", orgAcme, []string{"aaaa0001"}))
	assert.Equal(t, []Place{repoApp}, load().Places(), "a deleted group's current place goes; its former one stays")

	for i := range MaxFormerly + 3 {
		require.NoError(t, s.Record(ctx, "ns", "aaaa0001", "ci", Place{URL: "u", Scope: "repo", Owner: "acme", Repo: string(rune('a' + i))}))
	}
	assert.Len(t, load().Formerly, MaxFormerly, "bounded")
}

func TestUnreadableEntriesAreLeftOut(t *testing.T) {
	kube := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: "ns"},
		Data: map[string]string{"aaaa0001": "not json", "aaaa0002": `{"group":"ci","url":"u","scope":"global"}`}})

	got, err := Store{Client: kube}.Load(context.Background(), "ns")

	require.NoError(t, err)
	assert.Equal(t, Entries{"aaaa0002": {Group: "ci", URL: "u", Scope: "global"}}, got)
}

// A write that loses the race for the ConfigMap (another pass wrote it, or
// created it first) is tried again from a fresh read, a bounded number of
// times; what the other pass wrote is kept.
func TestAWriteThatLostTheRaceIsRetriedFromAFreshRead(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lose    int // writes that lose before one may win
		wantErr string
	}{
		{name: "won at once"},
		{name: "lost once", lose: 1},
		{name: "lost three times", lose: 3},
		{name: "lost every time", lose: 100, wantErr: "cannot write ConfigMap ns/" + ConfigMapName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			client := fake.NewClientset()
			s := Store{Client: client}
			require.NoError(t, s.Record(ctx, "ns", "aaaa0001", "ci", orgAcme))
			lost := 0
			client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				if lost >= tc.lose {
					return false, nil, nil
				}
				lost++
				return true, nil, apierrors.NewConflict(corev1.Resource("configmaps"), ConfigMapName, errors.New("the object has been modified"))
			})

			err := s.Record(ctx, "ns", "aaaa0002", "web", repoApp)

			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				assert.Equal(t, maxAttempts, lost, "bounded")
				return
			}
			require.NoError(t, err)
			got, err := s.Load(ctx, "ns")
			require.NoError(t, err)
			assert.Len(t, got, 2)
			assert.Equal(t, tc.lose, lost)
		})
	}
}

// Of reads a ConfigMap as Load reads the one it gets, and the ConfigMap
// Record writes carries the label a cluster-wide watch of the ledgers
// picks them by.
func TestOfReadsTheLedgerAsLoadDoes(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	s := Store{Client: kube}
	require.NoError(t, s.Record(ctx, "ns", "aaaa0001", "ci", orgAcme))
	cm, err := kube.CoreV1().ConfigMaps("ns").Get(ctx, ConfigMapName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "gitea-runner-operator", cm.Labels["gitea.bpg.pw/managed-by"])
	loaded, err := s.Load(ctx, "ns")
	require.NoError(t, err)
	assert.Equal(t, loaded, Of(cm))
	assert.Equal(t, Entries{}, Of(nil), "none is an empty one")
}
