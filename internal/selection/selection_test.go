package selection

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
)

func group(ns, name string, l map[string]string) v1alpha1.RunnerGroup {
	return v1alpha1.RunnerGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l}}
}

var cluster = []v1alpha1.RunnerGroup{
	group("b", "gpu", map[string]string{"pool": "gpu"}),
	group("a", "ci", map[string]string{"pool": "ci"}),
	group("b", "ci", map[string]string{"pool": "ci"}),
	group("c", "ci", nil),
}

// lister lists cluster, refusing the cluster-wide list and the namespaces
// in refused.
type lister struct {
	refused map[string]bool
}

func (l lister) List(_ context.Context, namespace, selector string) ([]v1alpha1.RunnerGroup, []runnergroups.Broken, error) {
	if l.refused[namespace] {
		return nil, nil, errors.New("forbidden")
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, nil, err
	}
	var out []v1alpha1.RunnerGroup
	for _, rg := range cluster {
		if (namespace == metav1.NamespaceAll || rg.Namespace == namespace) && sel.Matches(labels.Set(rg.Labels)) {
			out = append(out, rg)
		}
	}
	return out, []runnergroups.Broken{{Namespace: "b", Name: "bad", Labels: map[string]string{"pool": "ci"}}}, nil
}

func keys(groups []*v1alpha1.RunnerGroup) []string {
	var out []string
	for _, rg := range groups {
		out = append(out, rg.Key())
	}
	return out
}

func TestListKeepsWhatTheListenerServes(t *testing.T) {
	tests := []struct {
		name       string
		namespaces []string
		include    string
		excludes   []string
		refused    []string
		served     []string
		broken     int
		failed     []string
		all        bool
	}{
		{name: "every group, sorted", served: []string{"a/ci", "b/ci", "b/gpu", "c/ci"}, broken: 1},
		{name: "a namespace", namespaces: []string{"b"}, served: []string{"b/ci", "b/gpu"}, broken: 1, all: true},
		{name: "a selector", include: "pool=ci", served: []string{"a/ci", "b/ci"}, broken: 1, all: true},
		{name: "a JSON selector and an exclusion", include: `{"matchLabels":{"pool":"ci"}}`, excludes: []string{"pool=ci"}, all: true},
		{name: "the cluster-wide list refused: each namespace on its own", namespaces: []string{"a", "b"}, excludes: []string{"pool=gpu"},
			refused: []string{metav1.NamespaceAll}, served: []string{"a/ci", "b/ci"}, broken: 2},
		{name: "a namespace refused does not stop the others", namespaces: []string{"a", "b"},
			refused: []string{metav1.NamespaceAll, "b"}, served: []string{"a/ci"}, broken: 1, failed: []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(tt.namespaces, tt.include, tt.excludes)
			require.NoError(t, err)
			refused := map[string]bool{}
			for _, ns := range tt.refused {
				refused[ns] = true
			}
			got, err := List(context.Background(), lister{refused: refused}, r, slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			assert.Equal(t, tt.served, keys(got.Served))
			assert.Len(t, got.Broken, tt.broken)
			assert.Equal(t, tt.failed, got.FailedNamespaces)
			assert.Equal(t, tt.all, got.All != nil, "the cluster-wide listing is kept for the assignment rule")
		})
	}
}

func TestListFailsWhenEveryNamespaceIsServedAndTheListRefused(t *testing.T) {
	r, err := New(nil, "", nil)
	require.NoError(t, err)
	_, err = List(context.Background(), lister{refused: map[string]bool{metav1.NamespaceAll: true}}, r, slog.New(slog.DiscardHandler))
	assert.EqualError(t, err, "forbidden")
}

func TestNewRefusesBadSelectors(t *testing.T) {
	_, err := New(nil, "a in (", nil)
	assert.ErrorContains(t, err, "invalid selector")
	_, err = New(nil, "", []string{""})
	assert.ErrorContains(t, err, "invalid exclude selector")
}
