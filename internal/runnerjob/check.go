package runnerjob

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/podtemplate"
)

// CheckTemplate tells, before any Job is created, whether the group's
// spec.template is one the scaler accepts: nothing reserved, no Secret or
// ServiceAccount, no pinned field (podtemplate.CheckGroup), and, merged
// over the install-wide template, a runner pod that Build accepts.
func CheckTemplate(rg *v1alpha1.RunnerGroup, opts Options) error {
	if err := podtemplate.CheckGroup(rg.Spec.Template, opts.Pinned); err != nil {
		return err
	}
	_, err := Build(rg, NewName(rg.Name), 1, opts)
	return err
}

// CheckInstallTemplate tells whether the install-wide template
// (opts.Template) is one the scaler accepts: nothing reserved, and merged
// over the built-in pod, a runner pod Build accepts. It may reference
// Secrets and ServiceAccounts: the platform team writes it.
func CheckInstallTemplate(opts Options) error {
	if err := podtemplate.CheckReserved(opts.Template); err != nil {
		return err
	}
	pod, err := podtemplate.Merge(DefaultPod(opts), opts.Template)
	if err != nil {
		return err
	}
	return checkStateDir(&pod)
}

// checkStateDir refuses a runner container with a volume mounted where the
// .runner state file would survive a container restart: at
// RunnerStateDir, above it, or on the file itself.
func checkStateDir(pod *corev1.PodTemplateSpec) error {
	for _, c := range pod.Spec.Containers {
		if c.Name != ContainerName {
			continue
		}
		stateFile := path.Join(RunnerStateDir, ".runner")
		for _, m := range c.VolumeMounts {
			p := path.Clean(m.MountPath)
			if p == stateFile || p == RunnerStateDir || strings.HasPrefix(RunnerStateDir, strings.TrimSuffix(p, "/")+"/") {
				return fmt.Errorf("the runner container mounts volume %q at %s, which would keep act_runner's state file %s across container restarts; a restarted runner would then reuse a spent ephemeral registration: mount it elsewhere", m.Name, m.MountPath, stateFile)
			}
		}
	}
	return nil
}
