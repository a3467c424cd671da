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

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

var (
	orgAcme = scope.New("https://gitea.example.com", "org", "acme", "")
	repoApp = scope.New("https://gitea.example.com", "repo", "acme", "app")
	global  = scope.New("https://gitea.example.com", "global", "", "")
)

func TestRecordAndForget(t *testing.T) {
	ctx := context.Background()
	s := Store{Client: fake.NewClientset()}
	ci := Entry{Group: "ci", At: scope.New("https://gitea.example.com", "org", "acme", "")}
	web := Entry{Group: "web", At: scope.New("https://gitea.example.com", "repo", "acme", "app")}

	empty, _, err := s.Load(ctx, "ns")
	require.NoError(t, err)
	assert.Empty(t, empty, "no ledger is an empty one")

	require.NoError(t, s.Record(ctx, "ns", "aaaa0001", "ci", orgAcme))
	require.NoError(t, s.Record(ctx, "ns", "aaaa0002", "web", repoApp))
	require.NoError(t, s.Record(ctx, "ns", "aaaa0001", "ci", orgAcme), "recording again changes nothing")
	got, _, err := s.Load(ctx, "ns")
	require.NoError(t, err)
	assert.Equal(t, Entries{"aaaa0001": ci, "aaaa0002": web}, got)

	require.NoError(t, s.Forget(ctx, "ns", repoApp, []string{"aaaa0001", "unknown"}), "ci is not recorded there")
	require.NoError(t, s.Forget(ctx, "ns", orgAcme, []string{"aaaa0001", "unknown"}))
	got, _, err = s.Load(ctx, "ns")
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
		got, _, err := s.Load(ctx, "ns")
		require.NoError(t, err)
		return got["aaaa0001"]
	}

	require.NoError(t, s.Record(ctx, "ns", "aaaa0001", "ci", orgAcme))
	require.NoError(t, s.Record(ctx, "ns", "aaaa0001", "ci", repoApp))
	assert.Equal(t, Entry{Group: "ci", At: repoApp, Formerly: []scope.Place{orgAcme}}, load())

	require.NoError(t, s.Record(ctx, "ns", "aaaa0001", "ci", global))
	assert.Equal(t, []scope.Place{global, repoApp, orgAcme}, load().Places(), "newest first")

	require.NoError(t, s.Record(ctx, "ns", "aaaa0001", "ci", orgAcme))
	assert.Equal(t, []scope.Place{orgAcme, global, repoApp}, load().Places(), "moved back: no place twice")

	require.NoError(t, s.Forget(ctx, "ns", global, []string{"aaaa0001"}))
	assert.Equal(t, []scope.Place{orgAcme, repoApp}, load().Places(), "a former place is forgotten alone")

	require.NoError(t, s.Forget(ctx, "ns", orgAcme, []string{"aaaa0001"}))
	assert.Equal(t, []scope.Place{repoApp}, load().Places(), "a deleted group's current place goes; its former one stays")

	for i := range MaxFormerly + 3 {
		require.NoError(t, s.Record(ctx, "ns", "aaaa0001", "ci", scope.New("u", "repo", "acme", string(rune('a'+i)))))
	}
	assert.Len(t, load().Formerly, MaxFormerly, "bounded")
}

func TestUnreadableEntriesAreLeftOut(t *testing.T) {
	kube := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: "ns"},
		Data: map[string]string{"aaaa0001": "not json", "aaaa0002": `{"group":"ci","url":"u","scope":"global"}`}})

	got, _, err := Store{Client: kube}.Load(context.Background(), "ns")

	require.NoError(t, err)
	assert.Equal(t, Entries{"aaaa0002": {Group: "ci", At: scope.New("u", "global", "", "")}}, got)
}

// Ledgers written before a place was one string hold each place as an
// object of its parts (the current one as the entry's own fields) in
// users' clusters: they read as the places they named, and a write keeps
// them in the one stored form, which reads back the same.
func TestALedgerWrittenBeforePlacesWereOneStringRoundTrips(t *testing.T) {
	ctx := context.Background()
	old := `{"group":"ci","url":"https://gitea.example.com","scope":"repo","owner":"acme","repo":"app",` +
		`"formerly":[{"url":"https://gitea.example.com","scope":"org","owner":"acme"},{"url":"https://gitea.example.com","scope":"global"}]}`
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: "ns"},
		Data: map[string]string{"aaaa0001": old}})
	s := Store{Client: client}
	want := Entries{"aaaa0001": {Group: "ci", At: repoApp, Formerly: []scope.Place{orgAcme, global}}}

	got, _, err := s.Load(ctx, "ns")
	require.NoError(t, err)
	assert.Equal(t, want, got, "the old form reads as the places it named")

	require.NoError(t, s.Record(ctx, "ns", "aaaa0002", "web", orgAcme), "a write rewrites the whole ledger")
	cm, err := client.CoreV1().ConfigMaps("ns").Get(ctx, ConfigMapName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.JSONEq(t, `{"group":"ci","place":"https://gitea.example.com repo acme/app",`+
		`"formerly":["https://gitea.example.com org acme","https://gitea.example.com global"]}`, cm.Data["aaaa0001"])
	got, _, err = s.Load(ctx, "ns")
	require.NoError(t, err)
	assert.Equal(t, want["aaaa0001"], got["aaaa0001"], "and the new form reads back the same")
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
			got, _, err := s.Load(ctx, "ns")
			require.NoError(t, err)
			assert.Len(t, got, 2)
			assert.Equal(t, tc.lose, lost)
		})
	}
}

// TestTheStateListHoldsTheLedger: a pass reads the ledger from its one
// list of the namespace's state ConfigMaps (by the RunnerGroup label), so
// every ledger the scaler writes carries that label, one written before the
// label gets it once (MakeListable, or its next write), and a namespace
// without one gets an empty one once. The release namespace's mirror is no
// ledger and stays out of such lists.
func TestTheStateListHoldsTheLedger(t *testing.T) {
	old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: "ns",
		Labels: map[string]string{"gitea.bpg.pw/managed-by": "gitea-runner-operator"}},
		Data: map[string]string{"aaaa0001": `{"group":"ci","url":"https://gitea.example.com","scope":"org","owner":"acme"}`}}
	ci := Entries{"aaaa0001": {Group: "ci", At: orgAcme}}
	tests := []struct {
		name     string
		objects  []runtime.Object
		write    func(ctx context.Context, s Store) error
		want     Entries
		listable bool // before the write
	}{
		{"no ledger: MakeListable creates an empty one", nil, func(ctx context.Context, s Store) error { return s.MakeListable(ctx, "ns") }, Entries{}, false},
		{"an unlabelled ledger: MakeListable labels it and keeps its entries", []runtime.Object{old.DeepCopy()}, func(ctx context.Context, s Store) error { return s.MakeListable(ctx, "ns") }, ci, false},
		{"an unlabelled ledger: a write that changes nothing labels it", []runtime.Object{old.DeepCopy()}, func(ctx context.Context, s Store) error {
			return s.Record(ctx, "ns", "aaaa0001", "ci", orgAcme)
		}, ci, false},
		{"no ledger: the first record creates it labelled", nil, func(ctx context.Context, s Store) error {
			return s.Record(ctx, "ns", "aaaa0001", "ci", orgAcme)
		}, ci, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			kube := fake.NewClientset(tt.objects...)
			s := Store{Client: kube}
			_, listable, err := s.Load(ctx, "ns")
			require.NoError(t, err)
			assert.Equal(t, tt.listable, listable)

			require.NoError(t, tt.write(ctx, s))
			got, listable, err := s.Load(ctx, "ns")
			require.NoError(t, err)
			assert.True(t, listable, "labelled after the write")
			assert.Equal(t, tt.want, got)

			list, err := kube.CoreV1().ConfigMaps("ns").List(ctx, metav1.ListOptions{LabelSelector: "gitea.bpg.pw/runnergroup-name"})
			require.NoError(t, err)
			byName := map[string]*corev1.ConfigMap{}
			for i := range list.Items {
				byName[list.Items[i].Name] = &list.Items[i]
			}
			fromList, ok := FromList(byName)
			require.True(t, ok, "the state list holds the ledger")
			assert.Equal(t, tt.want, fromList)
			assert.Equal(t, "gitea-runner-operator", list.Items[0].Labels["gitea.bpg.pw/managed-by"])
			assert.Empty(t, list.Items[0].Labels["gitea.bpg.pw/runnergroup-name"], "the ledger is no group's")
		})
	}

	t.Run("a list without it proves nothing", func(t *testing.T) {
		_, ok := FromList(map[string]*corev1.ConfigMap{"ci-runner-state": {}})
		assert.False(t, ok)
	})
	t.Run("the mirror stays out of state lists", func(t *testing.T) {
		ctx := context.Background()
		kube := fake.NewClientset()
		m := Mirror{Client: kube, Namespace: "platform", Name: "rel-registrations"}
		require.NoError(t, change(m, func(cs Copies) bool {
			cs.Put(Copy{Namespace: "team", UID: "u1", Groups: ci})
			return true
		}))
		list, err := kube.CoreV1().ConfigMaps("platform").List(ctx, metav1.ListOptions{LabelSelector: "gitea.bpg.pw/runnergroup-name"})
		require.NoError(t, err)
		assert.Empty(t, list.Items)
	})
}
