// Package ledger remembers, per namespace, which RunnerGroups have
// registered runners with Gitea: each group's owner tag (runnerjob.OwnerTag)
// with its name, Gitea URL and target. The runner names alone cannot tell
// a deleted group's registrations from those of a group of the same name in
// another namespace or another install on the same Gitea; the ledger can,
// because only this namespace's groups are written in it. It is one
// ConfigMap per namespace, owned by no group, so it outlives the groups it
// names (it goes with the namespace).
package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// ConfigMapName is the ledger's ConfigMap in each namespace.
const ConfigMapName = "gitea-runner-registrations"

// MaxFormerly bounds the former places kept per group, newest first: each
// costs the group's passes one runners listing until no registration of
// it is left there.
const MaxFormerly = 4

// maxAttempts bounds the retries of a write that lost a race.
const maxAttempts = 4

// Entry is one group that registered runners: its name, Gitea URL and
// target (scope, owner, repo), which say whose runners listing holds its
// registrations, and the places it registered runners in before its
// spec moved it (Formerly): runners registered there stay there, and only
// the ledger still says where to look for them.
type Entry struct {
	Group    string  `json:"group"`
	URL      string  `json:"url"`
	Scope    string  `json:"scope"`
	Owner    string  `json:"owner,omitempty"`
	Repo     string  `json:"repo,omitempty"`
	Formerly []Place `json:"formerly,omitempty"`
}

// Place is a Gitea URL and target: one runners listing.
type Place struct {
	URL   string `json:"url"`
	Scope string `json:"scope"`
	Owner string `json:"owner,omitempty"`
	Repo  string `json:"repo,omitempty"`
}

// Place is where the group registers its runners now.
func (e Entry) Place() Place { return Place{URL: e.URL, Scope: e.Scope, Owner: e.Owner, Repo: e.Repo} }

// Places are where the group registers runners now, then where it did.
func (e Entry) Places() []Place { return append([]Place{e.Place()}, e.Formerly...) }

// entry is the group's entry at place p, with the places it had before.
func entry(group string, p Place, formerly []Place) Entry {
	if len(formerly) == 0 {
		formerly = nil
	}
	return Entry{Group: group, URL: p.URL, Scope: p.Scope, Owner: p.Owner, Repo: p.Repo, Formerly: formerly}
}

// Has says whether the entry names the group at place p now.
func (e Entry) Has(group string, p Place) bool { return e.Group == group && e.Place() == p }

// Entries maps owner tags to their group.
type Entries map[string]Entry

// Store reads and writes ledgers.
type Store struct {
	Client kubernetes.Interface
}

// Load returns a namespace's ledger; none is an empty one. Entries that
// cannot be read are left out: a group missing from the ledger is only
// never swept.
func (s Store) Load(ctx context.Context, namespace string) (Entries, error) {
	cm, err := s.Client.CoreV1().ConfigMaps(namespace).Get(ctx, ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Entries{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read ConfigMap %s/%s: %w", namespace, ConfigMapName, err)
	}
	return decode(cm.Data), nil
}

// Of is the ledger a ConfigMap holds, as Load reads it; nil (none) is an
// empty one. A loop reads it from its cluster-wide cache.
func Of(cm *corev1.ConfigMap) Entries {
	if cm == nil {
		return Entries{}
	}
	return decode(cm.Data)
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
func (s Store) Record(ctx context.Context, namespace, tag, group string, p Place) error {
	return s.change(ctx, namespace, func(cur Entries) bool {
		e, ok := cur[tag]
		if ok && e.Has(group, p) {
			return false
		}
		var formerly []Place
		if ok && e.Group == group {
			formerly = slices.DeleteFunc(e.Places(), func(q Place) bool { return q == p })
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
func (s Store) Forget(ctx context.Context, namespace string, p Place, tags []string) error {
	return s.change(ctx, namespace, func(cur Entries) bool { return cur.Forget(p, tags) })
}

// Forget is Store.Forget on entries in memory; it says whether any changed.
func (cur Entries) Forget(p Place, tags []string) bool {
	changed := false
	for _, t := range tags {
		e, ok := cur[t]
		if !ok || !slices.Contains(e.Places(), p) {
			continue
		}
		changed = true
		left := slices.DeleteFunc(e.Places(), func(q Place) bool { return q == p })
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
	return update(ctx, s.Client, namespace, ConfigMapName, func(data map[string]string) (map[string]string, bool, error) {
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
// edit changed it, writes the new data back under the resourceVersion it
// read (creating the ConfigMap if there was none), again from a fresh read
// when another pass wrote in between.
func update(ctx context.Context, client kubernetes.Interface, namespace, name string, edit func(map[string]string) (map[string]string, bool, error)) error {
	cms := client.CoreV1().ConfigMaps(namespace)
	lostRace := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	return retry.OnError(writeRetry, lostRace, func() error {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		exists := err == nil
		switch {
		case apierrors.IsNotFound(err):
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
				Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedBy}}}
		case err != nil:
			return fmt.Errorf("cannot read ConfigMap %s/%s: %w", namespace, name, err)
		}
		data, changed, err := edit(cm.Data)
		if err != nil || !changed {
			return err
		}
		cm = cm.DeepCopy()
		cm.Data = data
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
