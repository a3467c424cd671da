package ledger

import (
	"context"
	"encoding/json"
	"fmt"

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

// Change reads the mirror, applies edit and, when edit says it changed
// anything, writes it back under the resourceVersion it read (again from
// a fresh read when another pass wrote in between).
// mirrorLabels are the mirror's: it lives in the release namespace and is
// no namespace's ledger, so a list of state ConfigMaps must not hold it.
var mirrorLabels = map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedBy}

func (m Mirror) Change(ctx context.Context, edit func(Copies) bool) error {
	return update(ctx, m.Client, m.Namespace, m.Name, mirrorLabels, func(data map[string]string) (map[string]string, bool, error) {
		cur := decodeCopies(data)
		if !edit(cur) {
			return nil, false, nil
		}
		return encode(cur)
	})
}
