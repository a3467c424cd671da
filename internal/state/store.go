package state

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// ErrConflict means another pass changed the state since it was loaded: the
// caller must load it again and plan again.
var ErrConflict = errors.New("the runner state changed under this pass")

// ErrNotOurs means a ConfigMap with the state's name exists but does not
// belong to the RunnerGroup; the scaler will not overwrite someone else's data.
var ErrNotOurs = errors.New("the state ConfigMap is not owned by the RunnerGroup")

// Owner identifies the RunnerGroup whose state is stored.
type Owner struct {
	Namespace  string
	Name       string
	UID        string
	APIVersion string
	Kind       string
	// Labels go on the ConfigMap so it can be found with the group's Jobs.
	Labels map[string]string
}

// ConfigMapName is the name of the group's state ConfigMap.
func ConfigMapName(group string) string { return group + "-runner-state" }

// Loaded is the state as read, with what is needed to write it back safely.
type Loaded struct {
	Claims Claims
	// ResourceVersion is empty when the ConfigMap does not exist yet.
	ResourceVersion string
	// Corrupt holds the decode error when the ConfigMap held garbage; Claims
	// is then empty and the caller is expected to rebuild them (FromJobs).
	Corrupt error
	// data is the encoded form of Claims as stored, to skip no-op writes.
	data map[string]string
}

// Store reads and writes the state ConfigMaps.
type Store struct {
	Client kubernetes.Interface
}

// Load reads the group's state. A missing ConfigMap is an empty state.
func (s Store) Load(ctx context.Context, o Owner) (Loaded, error) {
	cm, err := s.Client.CoreV1().ConfigMaps(o.Namespace).Get(ctx, ConfigMapName(o.Name), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Loaded{Claims: Claims{}}, nil
	}
	if err != nil {
		return Loaded{}, fmt.Errorf("cannot read ConfigMap %s/%s: %w", o.Namespace, ConfigMapName(o.Name), err)
	}
	if !ownedBy(cm, o.UID) {
		return Loaded{}, fmt.Errorf("ConfigMap %s/%s: %w", o.Namespace, cm.Name, ErrNotOurs)
	}
	claims, derr := Decode(cm.Data)
	if derr != nil {
		return Loaded{Claims: Claims{}, ResourceVersion: cm.ResourceVersion, Corrupt: derr}, nil
	}
	return Loaded{Claims: claims, ResourceVersion: cm.ResourceVersion, data: cm.Data}, nil
}

// Save writes next over what Load returned, only if nobody wrote in
// between (resourceVersion), and reports ErrConflict otherwise. It returns
// the new Loaded so several writes can follow one another in one pass.
func (s Store) Save(ctx context.Context, o Owner, prev Loaded, next Claims) (Loaded, error) {
	data := Encode(next)
	if prev.ResourceVersion != "" && prev.Corrupt == nil && maps.Equal(prev.data, data) {
		return prev, nil
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ConfigMapName(o.Name),
			Namespace:       o.Namespace,
			Labels:          o.Labels,
			ResourceVersion: prev.ResourceVersion,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: o.APIVersion,
				Kind:       o.Kind,
				Name:       o.Name,
				UID:        types.UID(o.UID),
			}},
		},
		Data: data,
	}
	var (
		out *corev1.ConfigMap
		err error
	)
	if prev.ResourceVersion == "" {
		out, err = s.Client.CoreV1().ConfigMaps(o.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	} else {
		out, err = s.Client.CoreV1().ConfigMaps(o.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
	}
	switch {
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return Loaded{}, ErrConflict
	case err != nil:
		return Loaded{}, fmt.Errorf("cannot write ConfigMap %s/%s: %w", o.Namespace, cm.Name, err)
	}
	return Loaded{Claims: next.Clone(), ResourceVersion: out.ResourceVersion, data: data}, nil
}

func ownedBy(cm *corev1.ConfigMap, uid string) bool {
	for _, ref := range cm.OwnerReferences {
		if string(ref.UID) == uid {
			return true
		}
	}
	return false
}
