//go:build e2e

// Manifests: reading YAML files and applying them as they are, for the
// CRD's, the policies' and the chart's tests.

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

var vapGVR = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}

// ReadObjects reads every object of a (multi-document) YAML file. Numbers
// come out as int64, as the dynamic client returns them.
func ReadObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	docs := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var out []*unstructured.Unstructured
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, "reading %s", path)
		raw, err := utilyaml.ToJSON(doc)
		require.NoError(t, err, "decoding %s", path)
		if s := strings.TrimSpace(string(raw)); s == "" || s == "null" {
			continue // only comments
		}
		obj := &unstructured.Unstructured{}
		require.NoError(t, obj.UnmarshalJSON(raw), "decoding %s", path)
		out = append(out, obj)
	}
}

// ReadObject reads a file that holds exactly one object.
func ReadObject(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	objs := ReadObjects(t, path)
	require.Len(t, objs, 1, "%s holds one object", path)
	return objs[0]
}

// Resource maps an object's kind to a resource client, refreshing
// discovery once when the kind is new (a CRD that just became Established).
func (b *Testbed) Resource(t *testing.T, obj *unstructured.Unstructured) dynamic.ResourceInterface {
	t.Helper()
	gvk := obj.GroupVersionKind()
	m, err := b.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	// A CRD that was just applied (by the bed, a chart install) is
	// Established before discovery serves its kind: the first test of a
	// fresh bed once failed here. Discovery catches up within seconds.
	for deadline := time.Now().Add(apiWait); meta.IsNoMatchError(err) && time.Now().Before(deadline); {
		b.mapper.Reset()
		if m, err = b.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); meta.IsNoMatchError(err) {
			time.Sleep(apiPoll)
		}
	}
	require.NoError(t, err, "mapping %s", gvk)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return b.Dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	return b.Dyn.Resource(m.Resource)
}

// Apply server-side applies obj, taking over fields from other managers:
// the test bed is ours, and the manifests under test are the truth.
func (b *Testbed) Apply(ctx context.Context, t *testing.T, obj *unstructured.Unstructured, dryRun bool) *unstructured.Unstructured {
	t.Helper()
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	out, err := b.Resource(t, obj).Apply(ctx, obj.GetName(), obj, opts)
	require.NoError(t, err, "applying %s %s", obj.GetKind(), obj.GetName())
	return out
}

// ApplyKept applies obj and leaves it in place after the test, first
// waiting out an earlier deletion that is still running (a namespace takes
// a while), since applying into a terminating object fails.
func (b *Testbed) ApplyKept(ctx context.Context, t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	b.WaitNotTerminating(ctx, t, obj)
	b.Apply(ctx, t, obj, false)
}

// WaitNotTerminating waits until obj either does not exist or is not being
// deleted.
func (b *Testbed) WaitNotTerminating(ctx context.Context, t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	res := b.Resource(t, obj)
	Eventually(ctx, t, obj.GetKind()+" "+obj.GetName()+" not terminating", func(ctx context.Context) (bool, error) {
		cur, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return cur.GetDeletionTimestamp() == nil, fmt.Errorf("being deleted since %s", cur.GetDeletionTimestamp())
	})
}

// PolicyReady waits until the API server has type-checked a
// ValidatingAdmissionPolicy and then requires that no expression drew a
// warning: a warning means an expression names a field the matched kinds do
// not have, which at run time is an error and a refused request.
func (b *Testbed) PolicyReady(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	var status map[string]any
	Eventually(ctx, t, "type checking of policy "+name, func(ctx context.Context) (bool, error) {
		got, err := b.Dyn.Resource(vapGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		observed, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration")
		if observed != got.GetGeneration() {
			return false, fmt.Errorf("status.observedGeneration %d, generation %d (kube-controller-manager's "+
				"validatingadmissionpolicy-status-controller writes it: is it running?)", observed, got.GetGeneration())
		}
		status, _, _ = unstructured.NestedMap(got.Object, "status")
		return true, nil
	})
	warnings, _, _ := unstructured.NestedSlice(status, "typeChecking", "expressionWarnings")
	assert.Empty(t, warnings, "policy %s: type-checking warnings", name)
}

func RequireResources(t *testing.T, want, got corev1.ResourceRequirements) {
	t.Helper()
	for _, side := range []struct {
		name      string
		want, got corev1.ResourceList
	}{{"requests", want.Requests, got.Requests}, {"limits", want.Limits, got.Limits}} {
		require.Len(t, side.got, len(side.want), "%s: %v", side.name, side.got)
		for k, w := range side.want {
			g, ok := side.got[k]
			require.True(t, ok, "%s lacks %s: %v", side.name, k, side.got)
			require.Zero(t, w.Cmp(g), "%s.%s = %s, want %s", side.name, k, g.String(), w.String())
		}
	}
}
