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
	"k8s.io/utils/ptr"
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
	// AtWork are the runners' last sightings at work.
	AtWork AtWork
	// ResourceVersion is empty when the ConfigMap does not exist yet.
	ResourceVersion string
	// Corrupt holds the decode error when the ConfigMap held garbage; Claims
	// is then empty and the caller is expected to rebuild them (FromJobs).
	Corrupt error
	// data is the encoded form of Claims and AtWork as stored, to skip
	// no-op writes.
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
	return loaded(cm, o)
}

// loaded is the state a ConfigMap holds for o, however it was read.
func loaded(cm *corev1.ConfigMap, o Owner) (Loaded, error) {
	if !ownedBy(cm, o.UID) {
		return Loaded{}, fmt.Errorf("ConfigMap %s/%s: %w", o.Namespace, cm.Name, ErrNotOurs)
	}
	claims, atWork, derr := decode(cm.Data)
	if derr != nil {
		return Loaded{Claims: Claims{}, AtWork: AtWork{}, ResourceVersion: cm.ResourceVersion, Corrupt: derr}, nil
	}
	return Loaded{Claims: claims, AtWork: atWork, ResourceVersion: cm.ResourceVersion, data: cm.Data}, nil
}

// Listed is a namespace's state ConfigMaps as one list read them, by name.
type Listed map[string]*corev1.ConfigMap

// List reads, with one request, the ConfigMaps of a namespace that match
// selector (the label every state ConfigMap carries): a pass over many
// groups of a namespace reads their states at once instead of one request
// each. Each keeps the resourceVersion it was listed with, so Save stays
// conditional on exactly what was read, as after Load.
func (s Store) List(ctx context.Context, namespace, selector string) (Listed, error) {
	list, err := s.Client.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("cannot list ConfigMaps of namespace %s: %w", namespace, err)
	}
	out := make(Listed, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// Load is o's state from the list, as Store.Load would have read it when
// the list was read. ok is false when the list holds no ConfigMap of o's
// name: it did not exist then, or it lacks the label the list selected by
// (Store.Load tells which).
func (l Listed) Load(o Owner) (_ Loaded, ok bool, _ error) {
	cm, ok := l[ConfigMapName(o.Name)]
	if !ok {
		return Loaded{}, false, nil
	}
	ld, err := loaded(cm, o)
	return ld, true, err
}

// Save writes the claims next over what Load returned, with its sightings,
// only if nobody wrote in between (resourceVersion), and reports
// ErrConflict otherwise. It returns the new Loaded so several writes can
// follow one another in one pass.
func (s Store) Save(ctx context.Context, o Owner, prev Loaded, next Claims) (Loaded, error) {
	return s.write(ctx, o, prev, next, prev.AtWork)
}

// SaveAtWork writes the sightings next over what Load returned, with its
// claims, as Save does.
func (s Store) SaveAtWork(ctx context.Context, o Owner, prev Loaded, next AtWork) (Loaded, error) {
	return s.write(ctx, o, prev, prev.Claims, next)
}

// write stores claims and atWork over prev (see Save).
func (s Store) write(ctx context.Context, o Owner, prev Loaded, claims Claims, atWork AtWork) (Loaded, error) {
	data := encode(claims, atWork)
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
				Controller: ptr.To(true),
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
	return Loaded{Claims: claims.Clone(), AtWork: maps.Clone(atWork), ResourceVersion: out.ResourceVersion, data: data}, nil
}

// ownedBy says whether the group with uid controls cm, as
// metav1.IsControlledBy does for every object a group owns. A state
// written before the scaler set the controller flag names the group as a
// plain owner: it is the group's while no other object is the controller.
func ownedBy(cm *corev1.ConfigMap, uid string) bool {
	if c := metav1.GetControllerOfNoCopy(cm); c != nil {
		return string(c.UID) == uid
	}
	for _, ref := range cm.OwnerReferences {
		if string(ref.UID) == uid && ref.Controller == nil {
			return true
		}
	}
	return false
}
