package runnerjob

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// The objects a group owns besides its runner Jobs are named for the
// group, labelled with it, and controlled by it, so Kubernetes deletes
// them with it.
func TestTheObjectsAGroupOwnsAreTiedToIt(t *testing.T) {
	rg := group()
	rg.Spec.RegistrationToken = nil
	checked := time.Date(2026, 11, 28, 5, 0, 0, 0, time.FixedZone("CET", 3600))
	tests := map[string]struct {
		obj      metav1.Object
		name     string
		contents func(t *testing.T, obj metav1.Object)
	}{
		"the minted registration token Secret": {
			obj:  RegistrationTokenSecret(rg, "t0ken", checked),
			name: "ci-registration-token",
			contents: func(t *testing.T, obj metav1.Object) {
				sec := obj.(*corev1.Secret)
				assert.Equal(t, map[string][]byte{"token": []byte("t0ken")}, sec.Data)
				assert.Equal(t, corev1.SecretTypeOpaque, sec.Type)
				assert.Equal(t, map[string]string{v1alpha1.AnnotationRegistrationTokenChecked: "2026-11-28T04:00:00Z"}, sec.Annotations, "when, in UTC")
			},
		},
		"the runner config ConfigMap": {
			obj:  RunnerConfigMap(rg, map[string]string{ConfigKeyFor(time.Hour): "runner: {}"}),
			name: "ci-runner-config",
			contents: func(t *testing.T, obj metav1.Object) {
				assert.Equal(t, map[string]string{"config-grace-3600s.yaml": "runner: {}"}, obj.(*corev1.ConfigMap).Data)
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.name, tc.obj.GetName())
			assert.Equal(t, "runners", tc.obj.GetNamespace())
			assert.Equal(t, GroupLabels("ci"), tc.obj.GetLabels())
			assert.Equal(t, []metav1.OwnerReference{rg.ControllerRef()}, tc.obj.GetOwnerReferences())
			tc.contents(t, tc.obj)
		})
	}
}
