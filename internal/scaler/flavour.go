package scaler

import (
	"cmp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reason"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerconfig"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// The flavour of a group's runner pods (spec.flavour, else the platform's
// default, the chart's runnerFlavour.default; a platform that pins it
// refuses another) is chosen where its namespace is judged, since Auto
// depends on what the namespace admits:
//
//   - Privileged, UserNamespaced and Host are taken as asked, and the pod
//     must pass the namespace's Pod Security;
//   - Auto takes Privileged where the namespace admits the privileged pod,
//     which every install before the flavours had, so none of them
//     changes; else UserNamespaced, where the platform set it up and the
//     namespace admits it. The refusal names both. Never Host: its jobs
//     run without Docker, which a group must ask for.
//
// A group never gets more than it asked for: each flavour's pod is judged
// by the same Pod Security pre-check, and the API server still decides.

// runnerOptions are the runner Jobs' settings for g: the scaler's, with
// the group's flavour.
func (s *Scaler) runnerOptions(g *groupRun) runnerjob.Options {
	opts := s.cfg.Runner
	opts.Flavour = g.flavour
	return opts
}

// pickFlavour chooses the group's flavour in namespace ns, or says why
// none of those it may have can run there.
func (s *Scaler) pickFlavour(g *groupRun, ns *corev1.Namespace) (v1alpha1.RunnerFlavour, error) {
	setUp := s.cfg.Runner.UserNamespaced.Enabled()
	want := cmp.Or(s.cfg.Runner.DefaultFlavour, v1alpha1.FlavourAuto)
	if asked := g.rg.Spec.Flavour; asked != "" && asked != want {
		if s.cfg.Runner.FlavourPinned {
			return "", reason.Errorf(v1alpha1.ReasonInvalidSpec, "spec.flavour %s: the platform pins every group's flavour to %s (the chart's runnerFlavour); leave spec.flavour unset", asked, want)
		}
		want = asked
	}
	switch want {
	case v1alpha1.FlavourPrivileged, v1alpha1.FlavourHost:
		return want, s.admits(g, ns, want)
	case v1alpha1.FlavourUserNamespaced:
		if !setUp {
			return "", reason.Errorf(v1alpha1.ReasonFlavourNotSetUp, "spec.flavour is UserNamespaced, and this install has no user-namespaced runner pods: "+
				"the platform team sets them up (the chart's userNamespacedRunners: an image, a seccomp profile on every node, a device plugin for /dev/net/tun); "+
				"until then leave spec.flavour unset in a namespace that admits privileged pods")
		}
		return v1alpha1.FlavourUserNamespaced, s.admits(g, ns, v1alpha1.FlavourUserNamespaced)
	}
	privErr := s.admits(g, ns, v1alpha1.FlavourPrivileged)
	if privErr == nil {
		return v1alpha1.FlavourPrivileged, nil
	}
	if reason.Of(privErr) != v1alpha1.ReasonPodSecurityForbidsRunner {
		return "", privErr // not the namespace's: no other flavour would mend it
	}
	if !setUp {
		return "", reason.Errorf(v1alpha1.ReasonPodSecurityForbidsRunner, "%s; the unprivileged flavour (spec.flavour UserNamespaced) is not set up on this install (the chart's userNamespacedRunners)", privErr.Error())
	}
	unsErr := s.admits(g, ns, v1alpha1.FlavourUserNamespaced)
	if unsErr == nil {
		return v1alpha1.FlavourUserNamespaced, nil
	}
	if reason.Of(unsErr) != v1alpha1.ReasonPodSecurityForbidsRunner {
		return "", unsErr
	}
	return "", reason.Errorf(v1alpha1.ReasonPodSecurityForbidsRunner, "neither runner pod flavour passes: Privileged: %s; UserNamespaced: %s", privErr.Error(), unsErr.Error())
}

// admits says why the namespace's Pod Security would refuse the group's
// runner pod of flavour f, or nil.
func (s *Scaler) admits(g *groupRun, ns *corev1.Namespace, f v1alpha1.RunnerFlavour) error {
	opts := s.cfg.Runner
	opts.Flavour = f
	// The runner pod as it would be created, with the group's template and
	// the install's: its shape does not depend on the Gitea job. The
	// template was checked before, so Build accepts it.
	job, err := runnerjob.Build(g.rg, runnerjob.NewName(g.rg.Name), 1, opts)
	if err != nil {
		return reason.Errorf(v1alpha1.ReasonInvalidTemplate, "spec.template: %w", err)
	}
	platform := s.cfg.PodSecurity
	if hu := job.Spec.Template.Spec.HostUsers; hu != nil && !*hu {
		platform.Server = s.serverVersion()
	}
	if why := tenancy.PodSecurity(ns, &job.Spec.Template, platform); why != "" {
		return reason.Errorf(v1alpha1.ReasonPodSecurityForbidsRunner, "%s", why)
	}
	return nil
}

// flavourFits refuses a runner config that the flavour's Docker daemon
// cannot carry out: the job containers would fail as they start.
func flavourFits(f v1alpha1.RunnerFlavour, c v1alpha1.RunnerConfig) error {
	if f != v1alpha1.FlavourUserNamespaced {
		return nil
	}
	if cannot := runnerconfig.UserNamespacedCannot(c); len(cannot) > 0 {
		return reason.Errorf(v1alpha1.ReasonInvalidRunnerConfig, "the runner config asks of job containers what a user-namespaced runner pod (spec.flavour %s) cannot give, its Docker daemon holding no privilege: %s; "+
			"remove it from spec.runnerConfig (or the chart's runnerConfig), or run the group with spec.flavour Privileged in a namespace that admits privileged pods", f, strings.Join(cannot, "; "))
	}
	return nil
}
