// Package owned keeps the objects a RunnerGroup owns besides its runner
// Jobs (the minted registration-token Secret, the runner config
// ConfigMap): one ownership rule (Controls) and one create-or-update
// routine (Ensure), which never writes an object of the name that the
// group does not control. The objects themselves come from pure builders
// (internal/runnerjob); what goes into them is the caller's.
package owned

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// Controls says whether rg is obj's controller (metav1.IsControlledBy).
// It goes by UID: a group deleted and made again under the same name does
// not control what its predecessor made, which Kubernetes collects.
func Controls(rg *v1alpha1.RunnerGroup, obj metav1.Object) bool {
	return metav1.IsControlledBy(obj, rg)
}

// Client reads and writes one kind of object in one namespace, as
// client-go's typed clients do (Secrets(ns), ConfigMaps(ns)).
type Client[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*T, error)
	Create(ctx context.Context, obj *T, opts metav1.CreateOptions) (*T, error)
	Update(ctx context.Context, obj *T, opts metav1.UpdateOptions) (*T, error)
}

// Object is a pointer to a Kubernetes object of type T.
type Object[T any] interface {
	*T
	metav1.Object
	runtime.Object
	DeepCopy() *T
}

// ErrNotOwned is the error of an object of the name that the group does
// not control: Ensure leaves it as it is.
var ErrNotOwned = errors.New("exists and is not owned by this RunnerGroup")

// RequestError is a read or write the API server refused or never
// answered.
type RequestError struct {
	// Verb is read, create or update.
	Verb, Kind, Namespace, Name string
	Err                         error
}

func (e *RequestError) Error() string {
	return fmt.Sprintf("cannot %s %s %s/%s: %v", e.Verb, e.Kind, e.Namespace, e.Name, e.Err)
}

func (e *RequestError) Unwrap() error { return e.Err }

// Raced says whether err is a write that lost to another writer: a create
// that found the object made, an update of a resourceVersion no longer
// current. Reading again tells what the other wrote.
func Raced(err error) bool {
	return apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err)
}

// Result says what Ensure did.
type Result int

const (
	// Unchanged: the object was as wanted, or nothing was wanted.
	Unchanged Result = iota
	Created
	Updated
	// WouldWrite: a dry run found the object not as wanted.
	WouldWrite
)

// Want is what a caller wants of one owned object.
type Want[T any, P Object[T]] struct {
	// Have is the object as the caller already read it; nil: Ensure
	// reads it.
	Have P
	// Desire returns the object the group wants, given the object as it
	// is (nil when absent, else one the group controls; not to be
	// changed): a builder's object, or nil for nothing to write. Its
	// error is Ensure's, as it is.
	Desire func(have P) (P, error)
	// DryRun writes nothing.
	DryRun bool
}

// Ensure keeps the object name in the group's namespace as w wants it:
// it creates the object when there is none, refuses (ErrNotOwned) one the
// group does not control, and updates it only when what the group decides
// differs. The group decides its object's content whole (every field
// but the metadata) and its labels and annotations key by key; the rest
// of the metadata, and keys others add, stay. A lost race comes back as
// an error Raced recognises.
func Ensure[T any, P Object[T]](ctx context.Context, c Client[T], rg *v1alpha1.RunnerGroup, name string, w Want[T, P]) (Result, error) {
	kind := reflect.TypeFor[T]().Name()
	fail := func(verb string, err error) error {
		return &RequestError{Verb: verb, Kind: kind, Namespace: rg.Namespace, Name: name, Err: err}
	}
	have := w.Have
	if have == nil {
		got, err := c.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return Unchanged, fail("read", err)
		default:
			have = got
		}
	}
	if have != nil && !Controls(rg, have) {
		return Unchanged, fmt.Errorf("%s %s/%s %w", kind, rg.Namespace, name, ErrNotOwned)
	}
	want, err := w.Desire(have)
	if err != nil || want == nil {
		return Unchanged, err
	}
	if have == nil {
		if w.DryRun {
			return WouldWrite, nil
		}
		if _, err := c.Create(ctx, want, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager}); err != nil {
			return Unchanged, fail("create", err)
		}
		return Created, nil
	}
	next := adopt[T, P](have, want)
	if equality.Semantic.DeepEqual(have, next) {
		return Unchanged, nil
	}
	if w.DryRun {
		return WouldWrite, nil
	}
	if _, err := c.Update(ctx, next, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager}); err != nil {
		return Unchanged, fail("update", err)
	}
	return Updated, nil
}

// adopt is have with what the group decides of want: want's content
// whole, and its labels and annotations over have's, key by key.
func adopt[T any, P Object[T]](have, want P) P {
	next := P(want.DeepCopy())
	next.GetObjectKind().SetGroupVersionKind(have.GetObjectKind().GroupVersionKind())
	meta := metaOf(have).DeepCopy()
	meta.Labels = merged(meta.Labels, want.GetLabels())
	meta.Annotations = merged(meta.Annotations, want.GetAnnotations())
	*metaOf(next) = *meta
	return next
}

// metaOf is obj's own ObjectMeta, which every Kubernetes object embeds.
func metaOf(obj metav1.Object) *metav1.ObjectMeta {
	return obj.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta)
}

func merged(base, over map[string]string) map[string]string {
	if len(over) == 0 {
		return base
	}
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, over)
	return out
}
