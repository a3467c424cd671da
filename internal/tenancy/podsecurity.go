package tenancy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// LabelEnforce is Pod Security Admission's enforce label on a namespace.
const LabelEnforce = "pod-security.kubernetes.io/enforce"

// LevelPrivileged is the Pod Security level that admits privileged pods.
const LevelPrivileged = "privileged"

// Privileged reports whether a pod spec needs the privileged Pod Security
// level: a privileged container (the runner's Docker-in-Docker) or a host
// namespace. The scaler checks only this; anything baseline or restricted
// refuses besides is reported by the runner lifecycle from the Job's
// FailedCreate event.
func Privileged(spec *corev1.PodSpec) bool {
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		return true
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
				return true
			}
		}
	}
	return false
}

// PodSecurity says why ns must not get a pod with spec, or "" when it may.
//
// The scaler creating a privileged pod where the group's writer could not
// is the escalation to prevent, so a privileged pod goes only where the
// namespace's enforce label says privileged: a label that only someone who
// may update namespaces (the platform team) sets. A namespace without the
// label gets the cluster's default level, which the API does not show;
// trustUnlabelled (a platform decision) takes that default to be
// privileged. A baseline or restricted namespace is refused always: its
// pods could never start.
func PodSecurity(ns *corev1.Namespace, spec *corev1.PodSpec, trustUnlabelled bool) string {
	if !Privileged(spec) {
		return ""
	}
	level, labelled := ns.Labels[LabelEnforce]
	switch {
	case level == LevelPrivileged:
		return ""
	case !labelled && trustUnlabelled:
		return ""
	case !labelled:
		return fmt.Sprintf("the runner pod is privileged (Docker-in-Docker) and namespace %s has no %s label, so the scaler cannot tell that it admits privileged pods; "+
			"a cluster admin who accepts privileged runners there labels it: kubectl label namespace %s %s=%s (or the platform sets scaler.trustUnlabelledNamespaces)",
			ns.Name, LabelEnforce, ns.Name, LabelEnforce, LevelPrivileged)
	default:
		return fmt.Sprintf("the runner pod is privileged (Docker-in-Docker) and namespace %s enforces Pod Security level %q, which would refuse it; "+
			"run the group in a namespace labelled %s=%s, or have a cluster admin relabel this one",
			ns.Name, level, LabelEnforce, LevelPrivileged)
	}
}

// SecretLabel marks a Secret the scaler may read for a RunnerGroup of its
// namespace. Without it, a RunnerGroup's writer who cannot read Secrets
// could name any Secret of the namespace and have the scaler send it to
// Gitea as a token or hand it to a runner pod. Setting the label needs the
// right to change that Secret: its owner says it is meant for runners.
const SecretLabel = "gitea.bpg.pw/runner-token"

// SecretAllowed reports whether the scaler may use sec for a group.
func SecretAllowed(sec *corev1.Secret) bool {
	return sec.Labels[SecretLabel] == "true"
}
