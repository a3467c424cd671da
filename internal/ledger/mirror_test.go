package ledger

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// TestTheMirrorKeepsEachNamespaceByItsUID: the install's copy of what
// each namespace registered is kept per namespace and UID, so a namespace
// deleted and made again is a new record, never the old one's.
func TestTheMirrorKeepsEachNamespaceByItsUID(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	m := Mirror{Client: client, Namespace: "platform", Name: "rel-registrations"}
	ci := Entry{Group: "ci", At: scope.New("https://gitea.example.com", "org", "acme", "")}

	empty, err := m.Load(ctx)
	require.NoError(t, err)
	assert.Empty(t, empty, "no mirror is an empty one")

	require.NoError(t, change(m, func(c Copies) bool {
		c.Put(Copy{Namespace: "team-a", UID: "uid-1", Groups: Entries{"aaaa0001": ci}})
		c.Put(Copy{Namespace: "team-a", UID: "uid-2", Groups: Entries{"aaaa0002": ci}})
		return true
	}))
	got, err := m.Load(ctx)
	require.NoError(t, err)
	assert.Len(t, got, 2, "one record per namespace and UID")
	assert.Equal(t, Entries{"aaaa0001": ci}, got[MirrorKey("team-a", "uid-1")].Groups)

	cm, err := client.CoreV1().ConfigMaps("platform").Get(ctx, "rel-registrations", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, cm.Data, "team-a.uid-1")

	require.NoError(t, change(m, func(c Copies) bool {
		delete(c, MirrorKey("team-a", "uid-1"))
		return true
	}))
	got, err = m.Load(ctx)
	require.NoError(t, err)
	assert.NotContains(t, got, MirrorKey("team-a", "uid-1"))
}

// TestAMirrorRecordThatCannotBeReadIsLeftOut: a record that does not
// decode, or whose key does not name its namespace and UID, is never
// swept.
func TestAMirrorRecordThatCannotBeReadIsLeftOut(t *testing.T) {
	ci := `{"group":"ci","url":"https://gitea.example.com","scope":"org","owner":"acme"}`
	client := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "m"},
		Data: map[string]string{
			"team-a.uid-1": `{"namespace":"team-a","uid":"uid-1","groups":{"aaaa0001":` + ci + `}}`,
			"team-b.uid-2": `{"namespace":"team-c","uid":"uid-2","groups":{"aaaa0002":` + ci + `}}`,
			"team-d.uid-4": `not json`,
		},
	})
	got, err := Mirror{Client: client, Namespace: "platform", Name: "m"}.Load(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"team-a.uid-1"}, keys(got))
}

func keys(c Copies) []string {
	var out []string
	for k := range c {
		out = append(out, k)
	}
	return out
}

// change is Mirror.Change for a test that expects everything to fit.
func change(m Mirror, edit func(Copies) bool) error {
	left, err := m.Change(context.Background(), edit)
	if len(left) > 0 {
		return fmt.Errorf("entries left out: %v", left)
	}
	return err
}

// TestOneNamespaceCannotFillTheMirrorForAll: a tenant whose namespace
// records thousands of entries with the longest names the API allows
// (groups, Gitea URLs, owners, repositories) cannot stop the mirror from
// being written: the honest namespaces keep every entry, the large record
// gives up what does not fit, and the ConfigMap stays under the API
// server's 1 MiB.
func TestOneNamespaceCannotFillTheMirrorForAll(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	m := Mirror{Client: client, Namespace: "platform", Name: "rel-registrations"}
	honest := Entry{Group: "ci", At: scope.New("https://gitea.example.com", "org", "acme", "")}
	long := strings.Repeat("x", 253)
	big := Entries{}
	for i := range 5000 {
		big[fmt.Sprintf("%08x", i)] = Entry{Group: long, At: scope.New("https://"+long, "repo", long, long)}
	}
	left, err := m.Change(ctx, func(c Copies) bool {
		for i := range 200 {
			c.Put(Copy{Namespace: fmt.Sprintf("team-%03d", i), UID: types.UID(fmt.Sprintf("uid-%03d", i)), Groups: Entries{"aaaa0001": honest, "aaaa0002": honest}})
		}
		c.Put(Copy{Namespace: "greedy", UID: "uid-g", Groups: big})
		return true
	})
	require.NoError(t, err, "the mirror is written")
	require.Len(t, left, 1, "only the large record gives up entries")
	assert.Positive(t, left["greedy"])
	assert.Less(t, left["greedy"], 5000, "and keeps its share")

	got, err := m.Load(ctx)
	require.NoError(t, err)
	for i := range 200 {
		assert.Len(t, got[MirrorKey(fmt.Sprintf("team-%03d", i), types.UID(fmt.Sprintf("uid-%03d", i)))].Groups, 2)
	}
	assert.Len(t, got[MirrorKey("greedy", "uid-g")].Groups, 5000-left["greedy"])
	cm, err := client.CoreV1().ConfigMaps("platform").Get(ctx, "rel-registrations", metav1.GetOptions{})
	require.NoError(t, err)
	size := 0
	for k, v := range cm.Data {
		size += len(k) + len(v)
	}
	assert.LessOrEqual(t, size, MirrorBudget)

	// The next pass finds the same records over budget: nothing to write.
	client.ClearActions()
	_, err = m.Change(ctx, func(c Copies) bool {
		c.Put(Copy{Namespace: "greedy", UID: "uid-g", Groups: big})
		return true
	})
	require.NoError(t, err)
	for _, a := range client.Actions() {
		assert.Equal(t, "get", a.GetVerb(), "a mirror trimmed the same way is not written again")
	}
}

func TestFairCap(t *testing.T) {
	tests := []struct {
		name   string
		sizes  []int
		budget int
		want   int
	}{
		{"all fit", []int{10, 20}, 100, 70},
		{"the largest gives up", []int{10, 10, 100}, 60, 40},
		{"the two largest share", []int{10, 50, 100}, 70, 30},
		{"all share", []int{50, 50}, 60, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sizes := map[string]recordSize{}
			for i, s := range tt.sizes {
				sizes[fmt.Sprint(i)] = recordSize{total: s}
			}
			assert.Equal(t, tt.want, fairCap(sizes, tt.budget))
		})
	}
}

// The sweep's state is kept on the mirror for status, next to the
// records and without touching them, and written only when a pass
// reports something else than the state kept.
func TestTheMirrorKeepsTheSweepsStateSinceItChanged(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	m := Mirror{Client: client, Namespace: "platform", Name: "rel-registrations"}
	writes := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "create" || a.GetVerb() == "update" {
				n++
			}
		}
		return n
	}
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

	_, ok, err := m.LastSweep(ctx)
	require.NoError(t, err)
	assert.False(t, ok, "no mirror keeps no state")

	steps := []struct {
		name   string
		sweep  Sweep
		since  time.Time
		writes int
	}{
		{name: "the first state makes the mirror", sweep: Sweep{Since: t0, Left: map[string]int{"no_token": 2}}, since: t0, writes: 1},
		{name: "the same state later writes nothing and keeps its start", sweep: Sweep{Since: t0.Add(time.Minute), Left: map[string]int{"no_token": 2}}, since: t0, writes: 1},
		{name: "a new state is kept from its pass", sweep: Sweep{Since: t0.Add(2 * time.Minute), Removed: 3, Waiting: 1, Left: map[string]int{}}, since: t0.Add(2 * time.Minute), writes: 2},
		{name: "an empty Left is none", sweep: Sweep{Since: t0.Add(3 * time.Minute), Removed: 3, Waiting: 1}, since: t0.Add(2 * time.Minute), writes: 2},
	}
	for _, s := range steps {
		require.NoError(t, m.RecordSweep(ctx, s.sweep), s.name)
		got, ok, err := m.LastSweep(ctx)
		require.NoError(t, err)
		require.True(t, ok, s.name)
		assert.True(t, s.since.Equal(got.Since), "%s: since %s, want %s", s.name, got.Since, s.since)
		assert.True(t, got.same(s.sweep), "%s: %+v", s.name, got)
		assert.Equal(t, s.writes, writes(), s.name)
	}

	ci := Entry{Group: "ci", At: scope.New("https://gitea.example.com", "org", "acme", "")}
	require.NoError(t, change(m, func(c Copies) bool {
		c.Put(Copy{Namespace: "team-a", UID: "uid-1", Groups: Entries{"aaaa0001": ci}})
		return true
	}))
	require.NoError(t, m.RecordSweep(ctx, Sweep{Since: t0.Add(4 * time.Minute), Left: map[string]int{"running": 1}}))
	records, err := m.Load(ctx)
	require.NoError(t, err)
	assert.Len(t, records, 1, "the state leaves the records alone")
	got, _, err := m.LastSweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"running": 1}, got.Left, "the records' writes leave the state alone")
}
