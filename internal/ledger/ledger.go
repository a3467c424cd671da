// Package ledger remembers, per namespace, which RunnerGroups have
// registered runners with Gitea: each group's owner tag (runnerjob.OwnerTag)
// with its name and where it registers them (a scope.Place). The runner
// names alone cannot tell a deleted group's registrations from those of a
// group of the same name in another namespace or another install on the
// same Gitea; the ledger can,
// because only this namespace's groups are written in it. It is one
// ConfigMap per namespace, owned by no group, so it outlives the groups it
// names (it goes with the namespace).
package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// ConfigMapName is the ledger's ConfigMap in each namespace.
const ConfigMapName = "gitea-runner-registrations"

// MaxFormerly bounds the former places kept per group, newest first: each
// costs the group's passes one runners listing until no registration of
// it is left there.
const MaxFormerly = 4

// maxAttempts bounds the retries of a write that lost a race.
const maxAttempts = 4

// Entry is one group that registered runners: its name and where it
// registers them now (At: whose runners listing holds its registrations),
// and the places it registered runners in before its spec moved it
// (Formerly): runners registered there stay there, and only the ledger
// still says where to look for them. Places are stored in their one form
// (scope.Place.Stored).
type Entry struct {
	Group    string        `json:"group"`
	At       scope.Place   `json:"place"`
	Formerly []scope.Place `json:"formerly,omitempty"`
}

// UnmarshalJSON reads an entry, and one written before a place was one
// string, whose url, scope, owner and repo were the entry's own fields.
func (e *Entry) UnmarshalJSON(raw []byte) error {
	var stored struct {
		Group    string          `json:"group"`
		At       json.RawMessage `json:"place"`
		Formerly []scope.Place   `json:"formerly"`
	}
	if err := json.Unmarshal(raw, &stored); err != nil {
		return err
	}
	at := stored.At
	if at == nil {
		at = raw
	}
	var p scope.Place
	if err := json.Unmarshal(at, &p); err != nil {
		return err
	}
	*e = Entry{Group: stored.Group, At: p, Formerly: stored.Formerly}
	return nil
}

// Places are where the group registers runners now, then where it did.
func (e Entry) Places() []scope.Place { return append([]scope.Place{e.At}, e.Formerly...) }

// entry is the group's entry at place p, with the places it had before.
func entry(group string, p scope.Place, formerly []scope.Place) Entry {
	if len(formerly) == 0 {
		formerly = nil
	}
	return Entry{Group: group, At: p, Formerly: formerly}
}

// Has says whether the entry names the group at place p now.
func (e Entry) Has(group string, p scope.Place) bool { return e.Group == group && e.At == p }

// Entries maps owner tags to their group.
type Entries map[string]Entry

// Store reads and writes ledgers.
type Store struct {
	Client kubernetes.Interface
}

// labels are the ledger's labels. Besides managed-by it carries the
// RunnerGroup label with an empty value (it is no group's): the one list of
// a namespace's state ConfigMaps by that label, and a loop's watch of them,
// then hold the ledger too, and a pass needs no request of its own to read
// it. No group is named "", so no group's selector picks it.
var labels = map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedBy, v1alpha1.LabelRunnerGroupName: ""}

// Load returns a namespace's ledger; none is an empty one. Entries that
// cannot be read are left out: a group missing from the ledger is only
// never swept. listable says whether the ConfigMap exists with the labels
// that a list of the namespace's state ConfigMaps selects (see
// MakeListable).
func (s Store) Load(ctx context.Context, namespace string) (_ Entries, listable bool, _ error) {
	cm, err := s.Client.CoreV1().ConfigMaps(namespace).Get(ctx, ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Entries{}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("cannot read ConfigMap %s/%s: %w", namespace, ConfigMapName, err)
	}
	return decode(cm.Data), hasLabels(cm, labels), nil
}

// FromList is the ledger in a list of a namespace's ConfigMaps by the
// RunnerGroup label (a pass's list of its state ConfigMaps, or a loop's
// watch cache of them), keyed by name; ok is false when the list does not
// hold it. A list that lacks it proves nothing: the ledger may be missing,
// or older than its labels (Store.Load tells).
func FromList(byName map[string]*corev1.ConfigMap) (_ Entries, ok bool) {
	cm, ok := byName[ConfigMapName]
	if !ok {
		return nil, false
	}
	return decode(cm.Data), true
}

// MakeListable makes the namespace's ledger one that a list of its state
// ConfigMaps holds: it creates an empty one where none is, and labels one
// written before the ledger had the RunnerGroup label. It is done once per
// namespace; from then on no pass reads the ledger with a request of its
// own.
func (s Store) MakeListable(ctx context.Context, namespace string) error {
	return update(ctx, s.Client, namespace, ConfigMapName, labels, func(data map[string]string) (map[string]string, bool, error) {
		// A missing ledger (no data) is created; an existing one is
		// written only when it lacks the labels (update).
		return nil, data == nil, nil
	})
}

// hasLabels says whether cm carries every label of want.
func hasLabels(cm *corev1.ConfigMap, want map[string]string) bool {
	for k, v := range want {
		if got, ok := cm.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func decode(data map[string]string) Entries {
	out := Entries{}
	for tag, raw := range data {
		var e Entry
		if json.Unmarshal([]byte(raw), &e) == nil && e.Group != "" {
			out[tag] = e
		}
	}
	return out
}

// Record writes that the group of tag registers its runners at place p,
// unless the ledger says so already. A place the group had before is kept
// among its Formerly.
func (s Store) Record(ctx context.Context, namespace, tag, group string, p scope.Place) error {
	return s.change(ctx, namespace, func(cur Entries) bool {
		e, ok := cur[tag]
		if ok && e.Has(group, p) {
			return false
		}
		var formerly []scope.Place
		if ok && e.Group == group {
			formerly = slices.DeleteFunc(e.Places(), func(q scope.Place) bool { return q == p })
			formerly = formerly[:min(len(formerly), MaxFormerly)]
		}
		cur[tag] = entry(group, p, formerly)
		return true
	})
}

// Forget removes place p from the entries of the tags: no registration of
// theirs is left there. An entry with no place left goes; one whose
// current place goes moves to its first former one (only a deleted
// group's current place is forgotten).
func (s Store) Forget(ctx context.Context, namespace string, p scope.Place, tags []string) error {
	return s.change(ctx, namespace, func(cur Entries) bool { return cur.Forget(p, tags) })
}

// Forget is Store.Forget on entries in memory; it says whether any changed.
func (cur Entries) Forget(p scope.Place, tags []string) bool {
	changed := false
	for _, t := range tags {
		e, ok := cur[t]
		if !ok || !slices.Contains(e.Places(), p) {
			continue
		}
		changed = true
		left := slices.DeleteFunc(e.Places(), func(q scope.Place) bool { return q == p })
		if len(left) == 0 {
			delete(cur, t)
			continue
		}
		cur[t] = entry(e.Group, left[0], left[1:])
	}
	return changed
}

// writeRetry bounds the retries of a write that lost a race: maxAttempts
// tries in all, a few milliseconds apart.
var writeRetry = wait.Backoff{Steps: maxAttempts, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.1}

// change reads the ledger, applies edit and writes it back (see update).
func (s Store) change(ctx context.Context, namespace string, edit func(Entries) bool) error {
	return update(ctx, s.Client, namespace, ConfigMapName, labels, func(data map[string]string) (map[string]string, bool, error) {
		cur := decode(data)
		if !edit(cur) {
			return nil, false, nil
		}
		return encode(cur)
	})
}

// encode is the ConfigMap data of entries: one JSON value per owner tag.
func encode[T any](m map[string]T) (map[string]string, bool, error) {
	out := make(map[string]string, len(m))
	for k, v := range m {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, false, err
		}
		out[k] = string(raw)
	}
	return out, true, nil
}

// update reads ConfigMap namespace/name, gives its data to edit and, when
// edit changed it or the ConfigMap lacks any of labels (or is missing),
// writes the new data and the labels back under the resourceVersion it
// read (creating the ConfigMap if there was none), again from a fresh read
// when another pass wrote in between.
func update(ctx context.Context, client kubernetes.Interface, namespace, name string, labels map[string]string, edit func(map[string]string) (map[string]string, bool, error)) error {
	return updateConfigMap(ctx, client, namespace, name, labels, func(cm *corev1.ConfigMap) (bool, error) {
		data, changed, err := edit(cm.Data)
		if changed {
			cm.Data = data
		}
		return changed, err
	})
}

// updateConfigMap is update for an edit of the whole ConfigMap (a copy):
// its data or its annotations.
func updateConfigMap(ctx context.Context, client kubernetes.Interface, namespace, name string, labels map[string]string, edit func(*corev1.ConfigMap) (bool, error)) error {
	cms := client.CoreV1().ConfigMaps(namespace)
	lostRace := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	return retry.OnError(writeRetry, lostRace, func() error {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		exists := err == nil
		switch {
		case apierrors.IsNotFound(err):
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
		case err != nil:
			return fmt.Errorf("cannot read ConfigMap %s/%s: %w", namespace, name, err)
		}
		hadLabels := hasLabels(cm, labels)
		cm = cm.DeepCopy()
		changed, err := edit(cm)
		if err != nil {
			return err
		}
		if !changed && (!exists || hadLabels) {
			return nil
		}
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		maps.Copy(cm.Labels, labels)
		if exists {
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager})
		} else {
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager})
		}
		if err != nil {
			return fmt.Errorf("cannot write ConfigMap %s/%s: %w", namespace, name, err)
		}
		return nil
	})
}
