package ledger

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
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
