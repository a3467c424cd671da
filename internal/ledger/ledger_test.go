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

func TestRecordAndForget(t *testing.T) {
	ctx := context.Background()
	s := Store{Client: fake.NewClientset()}
	ci := Entry{Group: "ci", URL: "https://gitea.example.com", Scope: "org", Owner: "acme"}
	web := Entry{Group: "web", URL: "https://gitea.example.com", Scope: "repo", Owner: "acme", Repo: "app"}

	empty, err := s.Load(ctx, "ns")
	require.NoError(t, err)
	assert.Empty(t, empty, "no ledger is an empty one")

	require.NoError(t, s.Record(ctx, "ns", "aaaa0001", ci))
	require.NoError(t, s.Record(ctx, "ns", "aaaa0002", web))
	require.NoError(t, s.Record(ctx, "ns", "aaaa0001", ci), "recording again changes nothing")
	got, err := s.Load(ctx, "ns")
	require.NoError(t, err)
	assert.Equal(t, Entries{"aaaa0001": ci, "aaaa0002": web}, got)

	require.NoError(t, s.Forget(ctx, "ns", []string{"aaaa0001", "unknown"}))
	got, err = s.Load(ctx, "ns")
	require.NoError(t, err)
	assert.Equal(t, Entries{"aaaa0002": web}, got)
}

func TestUnreadableEntriesAreLeftOut(t *testing.T) {
	kube := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: "ns"},
		Data: map[string]string{"aaaa0001": "not json", "aaaa0002": `{"group":"ci","url":"u","scope":"global"}`}})

	got, err := Store{Client: kube}.Load(context.Background(), "ns")

	require.NoError(t, err)
	assert.Equal(t, Entries{"aaaa0002": {Group: "ci", URL: "u", Scope: "global"}}, got)
}
