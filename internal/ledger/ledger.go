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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// ConfigMapName is the ledger's ConfigMap in each namespace.
const ConfigMapName = "gitea-runner-registrations"

// maxAttempts bounds the retries of a write that lost a race.
const maxAttempts = 4

// Entry is one group that registered runners: its name, Gitea URL and
// target (scope, owner, repo), which say whose runners listing holds its
// registrations.
type Entry struct {
	Group string `json:"group"`
	URL   string `json:"url"`
	Scope string `json:"scope"`
	Owner string `json:"owner,omitempty"`
	Repo  string `json:"repo,omitempty"`
}

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
	return decode(cm), nil
}

func decode(cm *corev1.ConfigMap) Entries {
	out := Entries{}
	for tag, raw := range cm.Data {
		var e Entry
		if json.Unmarshal([]byte(raw), &e) == nil && e.Group != "" {
			out[tag] = e
		}
	}
	return out
}

// Record writes the entry under tag, unless it is there already.
func (s Store) Record(ctx context.Context, namespace, tag string, e Entry) error {
	return s.change(ctx, namespace, func(cur Entries) bool {
		if cur[tag] == e {
			return false
		}
		cur[tag] = e
		return true
	})
}

// Forget removes the tags from the ledger.
func (s Store) Forget(ctx context.Context, namespace string, tags []string) error {
	return s.change(ctx, namespace, func(cur Entries) bool {
		changed := false
		for _, t := range tags {
			if _, ok := cur[t]; ok {
				delete(cur, t)
				changed = true
			}
		}
		return changed
	})
}

// change reads the ledger, applies edit and writes it back under the
// resourceVersion it read, again from a fresh read when another pass wrote
// in between.
func (s Store) change(ctx context.Context, namespace string, edit func(Entries) bool) error {
	cms := s.Client.CoreV1().ConfigMaps(namespace)
	for attempt := 1; ; attempt++ {
		cm, err := cms.Get(ctx, ConfigMapName, metav1.GetOptions{})
		exists := err == nil
		switch {
		case apierrors.IsNotFound(err):
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: namespace,
				Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedBy}}}
		case err != nil:
			return fmt.Errorf("cannot read ConfigMap %s/%s: %w", namespace, ConfigMapName, err)
		}
		cur := decode(cm)
		if !edit(cur) {
			return nil
		}
		cm = cm.DeepCopy()
		cm.Data = map[string]string{}
		for tag, e := range cur {
			raw, err := json.Marshal(e)
			if err != nil {
				return err
			}
			cm.Data[tag] = string(raw)
		}
		if exists {
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager})
		} else {
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager})
		}
		lost := apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
		if !lost || attempt == maxAttempts {
			if err != nil {
				return fmt.Errorf("cannot write ConfigMap %s/%s: %w", namespace, ConfigMapName, err)
			}
			return nil
		}
	}
}
