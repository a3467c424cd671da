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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// Mirror is one install's copy, in its own (release) namespace, of what
// the groups of each namespace it serves registered with Gitea: a ledger
// goes with its namespace, and a runner that registered there and never
// ran a job stays in Gitea, offline, for ever. The copy outlives the
// namespace, so a pass can remove those registrations once the namespace
// is gone (see scaler's deleted-namespace sweep).
//
// Only the scaler writes it, and no tenant can reach the release
// namespace; the scaler puts in it only the owner tags of groups it read
// from the API server, never a tag it took from a tenant's ledger alone,
// so no tenant can make the sweep delete another tenant's runners.
type Mirror struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
}

// Copy is one namespace's record: its name and UID (a namespace deleted
// and made again has another UID, and is another record) and the entries
// of its groups that registered runners.
type Copy struct {
	Namespace string    `json:"namespace"`
	UID       types.UID `json:"uid"`
	Groups    Entries   `json:"groups"`
}

// Copies maps MirrorKey(namespace, UID) to its record.
type Copies map[string]Copy

// MirrorKey is a record's key: a ConfigMap key may hold dots, and a
// namespace name holds none, so the key names both without doubt.
func MirrorKey(namespace string, uid types.UID) string { return namespace + "." + string(uid) }

// Put stores c under its key.
func (cs Copies) Put(c Copy) { cs[MirrorKey(c.Namespace, c.UID)] = c }

// Load returns the mirror; none is an empty one. A record that cannot be
// read, or whose key does not name it, is left out: it is only never
// swept.
func (m Mirror) Load(ctx context.Context) (Copies, error) {
	cm, err := m.Client.CoreV1().ConfigMaps(m.Namespace).Get(ctx, m.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Copies{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read ConfigMap %s/%s: %w", m.Namespace, m.Name, err)
	}
	return decodeCopies(cm.Data), nil
}

func decodeCopies(data map[string]string) Copies {
	out := Copies{}
	for key, raw := range data {
		var c Copy
		if json.Unmarshal([]byte(raw), &c) != nil || c.Namespace == "" || key != MirrorKey(c.Namespace, c.UID) {
			continue
		}
		for tag, e := range c.Groups {
			if e.Group == "" {
				delete(c.Groups, tag)
			}
		}
		out[key] = c
	}
	return out
}

// mirrorLabels are the mirror's: it lives in the release namespace and is
// no namespace's ledger, so a list of state ConfigMaps must not hold it.
var mirrorLabels = map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedBy}

// Change reads the mirror, applies edit and, when edit says it changed
// anything, fits the records into MirrorBudget (fitBudget) and writes
// them back under the resourceVersion it read (again from a fresh read
// when another pass wrote in between). Left says, per namespace, how many
// of its entries did not fit.
func (m Mirror) Change(ctx context.Context, edit func(Copies) bool) (left map[string]int, err error) {
	err = update(ctx, m.Client, m.Namespace, m.Name, mirrorLabels, func(data map[string]string) (map[string]string, bool, error) {
		cur := decodeCopies(data)
		if !edit(cur) {
			return nil, false, nil
		}
		left = fitBudget(cur, MirrorBudget)
		out, _, err := encode(cur)
		if err != nil {
			return nil, false, err
		}
		// A mirror over budget is trimmed the same way every pass: no
		// write when the trimmed records are what is there.
		return out, !maps.Equal(out, data), nil
	})
	return left, err
}

// MirrorBudget is how many bytes of records the mirror holds at most: a
// ConfigMap holds 1 MiB, its metadata included.
const MirrorBudget = 900 << 10

// fitBudget trims the largest records until all of them fit in budget
// bytes, and says how many entries of each namespace it left out. The
// records share the budget fairly: each keeps all of its entries up to a
// cap, and only records larger than the cap give up the entries above it
// (the last tags, in order). The mirror is one ConfigMap that every
// namespace's record shares, and a record is the tenant's to grow (one
// entry per RunnerGroup, names as long as the API allows): without a cap,
// one namespace could grow the mirror past what the API server stores and
// stop the sweep for all. With it, that namespace loses only its own
// entries while the others fit; a namespace whose entries were left out
// keeps those registrations in Gitea once it is deleted.
func fitBudget(cs Copies, budget int) map[string]int {
	sizes := make(map[string]recordSize, len(cs))
	total := 0
	for key, c := range cs {
		sizes[key] = sizeOf(key, c)
		total += sizes[key].total
	}
	if total <= budget {
		return nil
	}
	limit := fairCap(sizes, budget)
	left := map[string]int{}
	for key, c := range cs {
		sz := sizes[key]
		if sz.total <= limit {
			continue
		}
		used := sz.base
		keep := Entries{}
		for _, tag := range slices.Sorted(maps.Keys(c.Groups)) {
			if used+sz.entry[tag] > limit {
				left[c.Namespace] += len(c.Groups) - len(keep)
				break
			}
			used += sz.entry[tag]
			keep[tag] = c.Groups[tag]
		}
		c.Groups = keep
		cs[key] = c
	}
	return left
}

// recordSize is what a record costs in the mirror: its key and record
// without entries (base), and each entry with its tag.
type recordSize struct {
	base, total int
	entry       map[string]int
}

func sizeOf(key string, c Copy) recordSize {
	empty := c
	empty.Groups = Entries{}
	raw, _ := json.Marshal(empty)
	sz := recordSize{base: len(key) + len(raw), entry: make(map[string]int, len(c.Groups))}
	sz.total = sz.base
	for tag, e := range c.Groups {
		raw, _ := json.Marshal(e)
		// "tag":{...} and the comma before the next one.
		sz.entry[tag] = len(tag) + 4 + len(raw)
		sz.total += sz.entry[tag]
	}
	return sz
}

// fairCap is the largest size every record may keep so that all of them
// fit in budget: records smaller than it keep all they have, and the
// others share what is left equally.
func fairCap(sizes map[string]recordSize, budget int) int {
	all := make([]int, 0, len(sizes))
	for _, sz := range sizes {
		all = append(all, sz.total)
	}
	slices.Sort(all)
	for i, s := range all {
		share := budget / (len(all) - i)
		if s > share {
			return share
		}
		budget -= s
	}
	return budget
}

// Sweep is the state of the sweep of deleted namespaces, as the mirror
// keeps it for status: what the last pass left and removed, and since when
// the passes have reported just that (so a pass that finds what the one
// before found writes nothing).
type Sweep struct {
	Since time.Time `json:"since"`
	// Removed counts the registrations the last pass that changed the
	// state removed.
	Removed int `json:"removed"`
	// Waiting counts recorded namespaces being deleted.
	Waiting int `json:"waiting"`
	// Left counts, per reason (passreport's Left*), recorded groups of
	// deleted namespaces that may still have registrations in Gitea.
	Left map[string]int `json:"left,omitempty"`
}

// same says whether s reports what o does, whenever.
func (s Sweep) same(o Sweep) bool {
	return s.Removed == o.Removed && s.Waiting == o.Waiting && maps.Equal(s.Left, o.Left)
}

// RecordSweep keeps s on the mirror unless it reports what is kept
// already; the mirror is made if there is none.
func (m Mirror) RecordSweep(ctx context.Context, s Sweep) error {
	if len(s.Left) == 0 {
		s.Left = nil
	}
	return updateConfigMap(ctx, m.Client, m.Namespace, m.Name, mirrorLabels, func(cm *corev1.ConfigMap) (bool, error) {
		if old, ok := sweepOf(cm); ok && old.same(s) {
			return false, nil
		}
		raw, err := json.Marshal(s)
		if err != nil {
			return false, err
		}
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[v1alpha1.AnnotationDeletedNamespacesSweep] = string(raw)
		return true, nil
	})
}

// LastSweep is the sweep's state the mirror keeps; false when it keeps
// none (no pass has swept, or the mirror is missing).
func (m Mirror) LastSweep(ctx context.Context) (Sweep, bool, error) {
	cm, err := m.Client.CoreV1().ConfigMaps(m.Namespace).Get(ctx, m.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Sweep{}, false, nil
	}
	if err != nil {
		return Sweep{}, false, fmt.Errorf("cannot read ConfigMap %s/%s: %w", m.Namespace, m.Name, err)
	}
	s, ok := sweepOf(cm)
	return s, ok, nil
}

// sweepOf reads the state kept on cm; one that does not parse is none.
func sweepOf(cm *corev1.ConfigMap) (Sweep, bool) {
	raw, ok := cm.Annotations[v1alpha1.AnnotationDeletedNamespacesSweep]
	if !ok {
		return Sweep{}, false
	}
	var s Sweep
	if json.Unmarshal([]byte(raw), &s) != nil {
		return Sweep{}, false
	}
	return s, true
}
