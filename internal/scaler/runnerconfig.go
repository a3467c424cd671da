package scaler

import (
	"context"
	"maps"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/owned"
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
	// A fresh list of the group's Jobs is asked for once, and only when
	// the ConfigMap holds a key beyond want.
	mounted := sync.OnceValues(func() (map[string]time.Duration, bool) { return s.mountedConfigs(ctx, g) })
	var res owned.Result
	// A lost race reads again and merges: the other pass may have written
	// the key of another grace.
	err = retry.OnError(stateRetry, owned.Raced, func() error {
		res, err = owned.Ensure(ctx, cms, rg, name, owned.Want[corev1.ConfigMap, *corev1.ConfigMap]{
			DryRun: s.cfg.DryRun,
			Desire: func(have *corev1.ConfigMap) (*corev1.ConfigMap, error) {
				var data map[string]string
				if have != nil {
					data = have.Data
				}
				next, err := s.keptConfigs(g, want, data, mounted)
				if err != nil {
					return nil, err
				}
				return runnerjob.RunnerConfigMap(rg, next), nil
			},
		})
		return err
	})
	switch {
	case owned.Raced(err):
		return reason.Errorf(v1alpha1.ReasonKubernetesError, "runner config: ConfigMap %s/%s kept changing under this pass: %w", rg.Namespace, name, err)
	case err != nil:
		return ownedObjectError(err, v1alpha1.ReasonRunnerConfigNotOwned, "runner config",
			"so the scaler does not write it and starts no runner; delete or rename it")
	case res == owned.WouldWrite:
		g.log.Info("dry run: would write the runner config", "configmap", name)
	case res != owned.Unchanged:
		g.log.Info("wrote the runner config", "configmap", name, "keys", len(want))
	}
	return nil
}

// keptConfigs are the keys the runner config ConfigMap should hold, given
// those it holds (have): want, and of the keys beyond want those a fresh
// list of the group's Jobs (mounted) finds mounted, rendered for their
// Job's grace, or, when the list failed, every key as it is.
func (s *Scaler) keptConfigs(g *groupRun, want, have map[string]string, mounted func() (map[string]time.Duration, bool)) (map[string]string, error) {
	next := maps.Clone(want)
	extra := keysBeyond(have, next)
	if len(extra) == 0 {
		return next, nil
	}
	confirmed, listed := mounted()
	for _, k := range extra {
		grace, isMounted := confirmed[k]
		switch {
		case isMounted:
			rendered, err := s.renderedConfig(g.rg, grace)
			if err != nil {
				return nil, reason.Errorf(v1alpha1.ReasonInvalidRunnerConfig, "spec.runnerConfig: %w", err)
			}
			next[k] = rendered
		case !listed:
			next[k] = have[k]
		}
	}
	return next, nil
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
		if err != nil || (cm != nil && owned.Controls(g.rg, cm) && maps.Equal(cm.Data, want)) {
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
	now, err := s.currentGrace(rg)
	if err != nil {
		return nil, err
	}
	graces := map[string]time.Duration{runnerjob.ConfigKeyFor(now): now}
	for k, grace := range mountedKeys(rg.Name, jobs) {
		graces[k] = grace
	}
	out := map[string]string{}
	for k, grace := range graces {
		if out[k], err = s.renderedConfig(rg, grace); err != nil {
			return nil, err
		}
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

// renderedConfigs remember, in a loop, what each group's runner config is
// made of: the grace of the pods Build makes for the group now, and the
// config rendered for each grace asked. Both follow from the group's spec,
// its namespace (fixed for its UID) and the scaler's own configuration
// (fixed for its life), so they hold while the group's generation stays,
// as verdicts do; a steady pass then compares the ConfigMap it listed with
// them, and neither builds a runner Job nor renders. A single pass keeps
// none.
type renderedConfigs struct {
	mu   sync.Mutex
	kept passKept[configKey, configPart]
	// builds and renders count the work done rather than remembered.
	builds, renders int
}

// configKey names one part: the group's grace now (current), or its
// config rendered for grace.
type configKey struct {
	group      types.UID
	generation int64
	current    bool
	grace      time.Duration
}

// configPart is the grace or the rendered config a configKey names.
type configPart struct {
	grace  time.Duration
	config string
}

// turn starts a pass.
func (r *renderedConfigs) turn() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kept.turn()
}

// part returns the part key names: remembered, or made, and remembered
// when keep says so. A single pass has no renderedConfigs (nil): it makes
// each part.
func (r *renderedConfigs) part(key configKey, keep bool, make func() (configPart, error)) (configPart, error) {
	if r == nil {
		return make()
	}
	r.mu.Lock()
	if keep {
		if p, ok := r.kept.get(key, func(configPart) bool { return true }); ok {
			r.mu.Unlock()
			return p, nil
		}
	}
	if key.current {
		r.builds++
	} else {
		r.renders++
	}
	r.mu.Unlock()
	p, err := make()
	if keep && err == nil {
		r.mu.Lock()
		r.kept.keep(key, p)
		r.mu.Unlock()
	}
	return p, err
}

// keepsConfigs says whether the group's runner config parts are
// remembered: in a loop, for a group with a generation (only fakes have
// none).
func (s *Scaler) keepsConfigs(rg *v1alpha1.RunnerGroup) bool {
	return s.mem != nil && rg.Generation != 0
}

// currentGrace is runnerjob.CurrentGrace of the group, remembered.
func (s *Scaler) currentGrace(rg *v1alpha1.RunnerGroup) (time.Duration, error) {
	key := configKey{group: rg.UID, generation: rg.Generation, current: true}
	p, err := s.mem.renderedConfigs().part(key, s.keepsConfigs(rg), func() (configPart, error) {
		grace, err := runnerjob.CurrentGrace(rg, s.cfg.Runner)
		return configPart{grace: grace}, err
	})
	return p.grace, err
}

// renderedConfig is runnerjob.ConfigFor of the group and grace,
// remembered.
func (s *Scaler) renderedConfig(rg *v1alpha1.RunnerGroup, grace time.Duration) (string, error) {
	key := configKey{group: rg.UID, generation: rg.Generation, grace: grace}
	p, err := s.mem.renderedConfigs().part(key, s.keepsConfigs(rg), func() (configPart, error) {
		out, err := runnerjob.ConfigFor(rg, s.cfg.Runner, grace)
		return configPart{config: string(out)}, err
	})
	return p.config, err
}
