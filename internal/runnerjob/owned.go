package runnerjob

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// RegistrationTokenSecret is the Secret with the registration token the
// scaler minted for the group (rg.RegistrationTokenRef), asked of Gitea
// at checked. Only the Secret holds the token: runner Jobs reference it.
func RegistrationTokenSecret(rg *v1alpha1.RunnerGroup, token string, checked time.Time) *corev1.Secret {
	ref := rg.RegistrationTokenRef()
	meta := ownedMeta(rg, ref.Name)
	meta.Annotations = map[string]string{v1alpha1.AnnotationRegistrationTokenChecked: checked.UTC().Format(time.RFC3339)}
	return &corev1.Secret{
		ObjectMeta: meta,
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{ref.Key: []byte(token)},
	}
}

// RunnerConfigMap is the group's runner config ConfigMap (ConfigMapName)
// with configs, the rendered config under the key of each grace
// (ConfigKeyFor).
func RunnerConfigMap(rg *v1alpha1.RunnerGroup, configs map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: ownedMeta(rg, ConfigMapName(rg.Name)), Data: configs}
}

// ownedMeta names an object the group owns and ties it to the group: its
// labels, and the group as its controller, so Kubernetes deletes it with
// the group.
func ownedMeta(rg *v1alpha1.RunnerGroup, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       rg.Namespace,
		Labels:          GroupLabels(rg.Name),
		OwnerReferences: []metav1.OwnerReference{rg.ControllerRef()},
	}
}
