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

// TestTheMirrorKeepsEachNamespaceByItsUID: the install's copy of what
// each namespace registered is kept per namespace and UID, so a namespace
// deleted and made again is a new record, never the old one's.
func TestTheMirrorKeepsEachNamespaceByItsUID(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	m := Mirror{Client: client, Namespace: "platform", Name: "rel-registrations"}
	ci := Entry{Group: "ci", URL: "https://gitea.example.com", Scope: "org", Owner: "acme"}

	empty, err := m.Load(ctx)
	require.NoError(t, err)
	assert.Empty(t, empty, "no mirror is an empty one")

	require.NoError(t, m.Change(ctx, func(c Copies) bool {
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

	require.NoError(t, m.Change(ctx, func(c Copies) bool {
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
