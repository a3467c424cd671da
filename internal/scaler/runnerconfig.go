package scaler

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// ensureRunnerConfig keeps the ConfigMap <group>-runner-config with the
// runner config the group's runner pods read (runnerjob.Config), before a
// pass creates any of them: a pod started before it exists waits for the
// volume. It is written only by passes that create runner Jobs, so an idle
// pass costs no request; a runner reads its config when it starts, so a
// change reaches every runner started after it. A ConfigMap of that name
// that the group does not own is never touched.
func (s *Scaler) ensureRunnerConfig(ctx context.Context, g *groupRun) error {
	rg := g.rg
	rendered, err := runnerjob.Config(rg, s.cfg.Runner)
	if err != nil {
		return newGroupError(ReasonInvalidRunnerConfig, "spec.runnerConfig: %w", err)
	}
	name := runnerjob.ConfigMapName(rg.Name)
	cms := s.kube.CoreV1().ConfigMaps(rg.Namespace)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm = nil
	case err != nil:
		return newGroupError(ReasonKubernetesError, "runner config: cannot read ConfigMap %s/%s: %w", rg.Namespace, name, err)
	}
	if cm != nil && !ownedByGroup(cm.OwnerReferences, rg) {
		return newGroupError(ReasonRunnerConfigNotOwned,
			"runner config: ConfigMap %s/%s exists and is not owned by this RunnerGroup, so the scaler does not write it and starts no runner; delete or rename it",
			rg.Namespace, name)
	}
	if cm != nil && cm.Data[runnerjob.ConfigKey] == string(rendered) {
		return nil
	}
	if s.cfg.DryRun {
		g.log.Info("dry run: would write the runner config", "configmap", name)
		return nil
	}
	if cm == nil {
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name:            name,
				Namespace:       rg.Namespace,
				Labels:          runnerjob.GroupLabels(rg.Name),
				OwnerReferences: []metav1.OwnerReference{rg.ControllerRef()},
			},
			Data: map[string]string{runnerjob.ConfigKey: string(rendered)},
		}
		_, err := cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return newGroupError(ReasonKubernetesError, "runner config: cannot create ConfigMap %s/%s: %w", rg.Namespace, name, err)
		}
		// AlreadyExists: another pass wrote it at the same moment, from
		// the same group and chart.
		return nil
	}
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[runnerjob.ConfigKey] = string(rendered)
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager}); err != nil && !apierrors.IsConflict(err) {
		return newGroupError(ReasonKubernetesError, "runner config: cannot update ConfigMap %s/%s: %w", rg.Namespace, name, err)
	}
	g.log.Info("wrote the runner config", "configmap", name)
	return nil
}
