package scaler

import (
	"context"
	"maps"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reason"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// ensureRunnerConfig keeps the ConfigMap <group>-runner-config with the
// runner config the group's runner pods read, one key per grace period
// (runnerjob.ConfigKeyFor): the key of the group's grace now, which the
// Jobs a pass creates mount, and the key each of the group's runner Jobs
// (jobs, what the pass observed) mounts. A pod reads its config when it
// starts and again whenever its runner restarts, for the life of its Job,
// so the key a live Job mounts holds the shutdown_timeout made from that
// Job's own grace, whatever grace the group has since, and is never
// removed while a Job mounts it: a pod that cannot mount its config never
// starts. The rest of the config is the group's now, the same under every
// key, so a change of spec.runnerConfig reaches every runner that starts
// after it.
//
// The ConfigMap is read afresh. A pass that is about to create runner Jobs
// calls it directly, and its failure is the group's (no runner without its
// config); a pass that creates none calls it through keepRunnerConfig.
// A ConfigMap of that name that the group does not own is never touched.
//
// Two passes may write at once, each with its own view of the group and
// its Jobs: the update is conditional on the resourceVersion read, and
// the loser reads again and merges, so neither's key is lost. A key no
// Job in jobs mounts goes only once a fresh list of the group's Jobs
// (not a watch cache, which may not hold yet a Job made a moment ago)
// confirms that none mounts it.
func (s *Scaler) ensureRunnerConfig(ctx context.Context, g *groupRun, jobs []batchv1.Job) error {
	rg := g.rg
	want, err := s.runnerConfigs(rg, jobs)
	if err != nil {
		return reason.Errorf(v1alpha1.ReasonInvalidRunnerConfig, "spec.runnerConfig: %w", err)
	}
	name := runnerjob.ConfigMapName(rg.Name)
	cms := s.kube.CoreV1().ConfigMaps(rg.Namespace)
	// confirmed are the keys a fresh list found mounted, with their
	// grace, once asked; listed says the list answered.
	var (
		confirmed     map[string]time.Duration
		asked, listed bool
	)
	wrote := false
	err = retry.OnError(stateRetry, func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }, func() error {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			cm = nil
		case err != nil:
			return reason.Errorf(v1alpha1.ReasonKubernetesError, "runner config: cannot read ConfigMap %s/%s: %w", rg.Namespace, name, err)
		}
		if cm != nil && !ownedByGroup(cm.OwnerReferences, rg) {
			return reason.Errorf(v1alpha1.ReasonRunnerConfigNotOwned,
				"runner config: ConfigMap %s/%s exists and is not owned by this RunnerGroup, so the scaler does not write it and starts no runner; delete or rename it",
				rg.Namespace, name)
		}
		var have map[string]string
		if cm != nil {
			have = cm.Data
		}
		next := maps.Clone(want)
		if extra := keysBeyond(have, next); len(extra) > 0 {
			if !asked {
				confirmed, listed = s.mountedConfigs(ctx, g)
				asked = true
			}
			// Kept: what the fresh list found mounted, rendered for its
			// Job's grace, or, when the list failed, everything as it is.
			for _, k := range extra {
				grace, mounted := confirmed[k]
				switch {
				case mounted:
					rendered, err := runnerjob.ConfigFor(rg, s.cfg.Runner, grace)
					if err != nil {
						return reason.Errorf(v1alpha1.ReasonInvalidRunnerConfig, "spec.runnerConfig: %w", err)
					}
					next[k] = string(rendered)
				case !listed:
					next[k] = have[k]
				}
			}
		}
		if maps.Equal(have, next) {
			return nil
		}
		if s.cfg.DryRun {
			g.log.Info("dry run: would write the runner config", "configmap", name)
			return nil
		}
		if cm == nil {
			_, err := cms.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{
					Name:            name,
					Namespace:       rg.Namespace,
					Labels:          runnerjob.GroupLabels(rg.Name),
					OwnerReferences: []metav1.OwnerReference{rg.ControllerRef()},
				},
				Data: next,
			}, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return reason.Errorf(v1alpha1.ReasonKubernetesError, "runner config: cannot create ConfigMap %s/%s: %w", rg.Namespace, name, err)
			}
			// AlreadyExists: another pass wrote it at the same moment,
			// perhaps for another grace; read it again and merge.
			wrote = err == nil
			return err
		}
		cm = cm.DeepCopy()
		cm.Data = next
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager}); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return reason.Errorf(v1alpha1.ReasonKubernetesError, "runner config: cannot update ConfigMap %s/%s: %w", rg.Namespace, name, err)
		}
		wrote = true
		return nil
	})
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			return reason.Errorf(v1alpha1.ReasonKubernetesError, "runner config: ConfigMap %s/%s kept changing under this pass: %w", rg.Namespace, name, err)
		}
		return err
	}
	if wrote {
		g.log.Info("wrote the runner config", "configmap", name, "keys", len(want))
	}
	return nil
}

// keepRunnerConfig is ensureRunnerConfig for a pass that creates no runner
// Job: while the group has runner Jobs, a key one of them mounts that is
// missing (the ConfigMap was deleted by hand, or a racing pass removed a
// key of a Job it could not see yet) is put back, so that the pod waiting
// for it starts, and keys no Job mounts any more go. The pass's listing of
// the namespace's ConfigMaps (with the state ConfigMaps) tells, without a
// request, when nothing is to be done. A failure here is logged: it does
// not make the group's runners fail, and the next pass tries again.
func (s *Scaler) keepRunnerConfig(ctx context.Context, g *groupRun, jobs []batchv1.Job) {
	if len(jobs) == 0 {
		return
	}
	if cm, ok := g.namespaces.listedConfigMap(g.rg.Namespace, runnerjob.ConfigMapName(g.rg.Name)); ok {
		want, err := s.runnerConfigs(g.rg, jobs)
		if err != nil || (cm != nil && ownedByGroup(cm.OwnerReferences, g.rg) && maps.Equal(cm.Data, want)) {
			return
		}
	}
	if err := s.ensureRunnerConfig(ctx, g, jobs); err != nil {
		g.log.Warn("cannot keep the runner config of the group's runner Jobs; pods that start now may wait for it", "error", err)
	}
}

// runnerConfigs are the keys of the group's runner config ConfigMap that
// the group needs, with their content: the key of the group's grace now,
// and the key each of jobs mounts, rendered with that Job's grace. The
// config of a Job made before each grace had its key ("config.yaml",
// shared by every such Job) is made from the newest one's grace.
func (s *Scaler) runnerConfigs(rg *v1alpha1.RunnerGroup, jobs []batchv1.Job) (map[string]string, error) {
	now, err := runnerjob.CurrentGrace(rg, s.cfg.Runner)
	if err != nil {
		return nil, err
	}
	graces := map[string]time.Duration{runnerjob.ConfigKeyFor(now): now}
	for k, grace := range mountedKeys(rg.Name, jobs) {
		graces[k] = grace
	}
	out := map[string]string{}
	for k, grace := range graces {
		rendered, err := runnerjob.ConfigFor(rg, s.cfg.Runner, grace)
		if err != nil {
			return nil, err
		}
		out[k] = string(rendered)
	}
	return out, nil
}

// mountedKeys maps each key of the group's runner config that one of jobs
// mounts to the grace of the newest Job that mounts it.
func mountedKeys(group string, jobs []batchv1.Job) map[string]time.Duration {
	out := map[string]time.Duration{}
	newest := map[string]time.Time{}
	for i := range jobs {
		j := &jobs[i]
		k, ok := runnerjob.MountedConfigKey(group, j)
		if !ok {
			continue
		}
		if at, seen := newest[k]; seen && j.CreationTimestamp.Time.Before(at) {
			continue
		}
		newest[k] = j.CreationTimestamp.Time
		out[k] = runnerjob.Grace(&j.Spec.Template)
	}
	return out
}

// mountedConfigs lists the group's runner Jobs afresh and maps each key of
// the runner config they mount to its grace (mountedKeys); ok is false
// when the list failed, and then nothing may be removed.
func (s *Scaler) mountedConfigs(ctx context.Context, g *groupRun) (map[string]time.Duration, bool) {
	l, err := s.kube.BatchV1().Jobs(g.rg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: runnerjob.Selector(g.rg.Name)})
	if err != nil {
		g.log.Warn("cannot list the group's runner Jobs; no runner config key is removed", "error", err)
		return nil, false
	}
	return mountedKeys(g.rg.Name, ownJobs(g.rg, l.Items)), true
}

// keysBeyond are the keys of have that want lacks.
func keysBeyond(have, want map[string]string) []string {
	var out []string
	for k := range have {
		if _, ok := want[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}
