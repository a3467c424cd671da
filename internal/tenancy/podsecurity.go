package tenancy

import (
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// LabelEnforce is Pod Security Admission's enforce label on a namespace.
const LabelEnforce = psaapi.EnforceLevelLabel

// LevelPrivileged is the Pod Security level that admits privileged pods.
const LevelPrivileged = string(psaapi.LevelPrivileged)

// evaluator holds Pod Security Admission's own checks, as the API server
// runs them: a hand-written list of what makes a pod dangerous missed
// hostPath, added capabilities, host ports, unconfined seccomp and
// AppArmor, unmasked /proc and unsafe sysctls, and would miss
// whatever a later Kubernetes adds to baseline.
var evaluator = func() policy.Evaluator {
	e, err := policy.NewEvaluator(policy.DefaultChecks())
	if err != nil {
		panic(fmt.Sprintf("pod security checks: %v", err)) // Kubernetes' own list; cannot fail
	}
	return e
}()

// Platform is what the platform says about the cluster's Pod Security
// that the API does not show: the cluster's default level and the API
// server's feature gates.
type Platform struct {
	// TrustUnlabelled takes a namespace without an enforce label to admit
	// privileged pods (the cluster's default level, privileged unless the
	// cluster says otherwise).
	TrustUnlabelled bool
	// UserNamespacesPodSecurityStandards says the API server runs with the
	// feature gate of that name (alpha since Kubernetes 1.29, off by
	// default): Pod Security then admits any procMount, and at restricted
	// any user id, for a pod with hostUsers: false, since root and an
	// unmasked /proc in a user namespace are not the node's.
	UserNamespacesPodSecurityStandards bool
	// Server is the API server's Kubernetes version (major.minor), the
	// version Pod Security evaluates a namespace's "latest" at; the zero
	// Version when unknown. From 1.35 Pod Security's own checks, at
	// policy versions 1.35 and later, relax for user-namespaced pods
	// what the gate relaxes, with no gate.
	Server psaapi.Version
}

// userNamespacesRelaxedSince is the first policy version whose checks
// admit any procMount (baseline) and any user id (restricted) for a pod
// with hostUsers: false (k8s.io/pod-security-admission v0.35's
// procMount1_35baseline, runAsNonRoot1_35, runAsUser1_35). This module's
// copy of the checks predates it, so the scaler applies the relaxation by
// the policy version, as the API server does.
var userNamespacesRelaxedSince = psaapi.MajorMinorVersion(1, 35)

// ParseServerVersion is the major.minor of the API server's /version
// (Major "1", Minor "37" or "37+"), for Platform.Server.
func ParseServerVersion(major, minor string) (psaapi.Version, error) {
	v, err := psaapi.ParseVersion("v" + major + "." + strings.TrimSuffix(minor, "+"))
	if err != nil || v.Latest() {
		return psaapi.Version{}, fmt.Errorf("the API server's version %q.%q is not major.minor", major, minor)
	}
	return v, nil
}

// userNamespacesRelaxed says whether the API server's Pod Security admits
// a user-namespaced pod's unmasked /proc and root user at policy version
// v: with the alpha gate at every version, and from 1.35 at versions 1.35
// and later, "latest" and versions past the server's being the server's
// own. An unknown server version relaxes "latest" never.
func userNamespacesRelaxed(v psaapi.Version, p Platform) bool {
	if p.UserNamespacesPodSecurityStandards {
		return true
	}
	if known := p.Server.Major() > 0; known && (v.Latest() || p.Server.Older(v)) {
		v = p.Server
	}
	return !v.Latest() && !v.Older(userNamespacesRelaxedSince)
}

// evaluateMu serialises evaluations: Pod Security's library reads the
// user-namespace relaxation from one process-wide switch (the API server
// sets it once from its feature gate), while the scaler's setting comes
// with each call, so that scalers and tests with different settings in
// one process each get the answer for theirs. Nothing else in this module
// evaluates Pod Security, and one evaluation takes microseconds.
var evaluateMu sync.Mutex

func evaluate(lv psaapi.LevelVersion, tmpl *corev1.PodTemplateSpec, userNamespaces bool) policy.AggregateCheckResult {
	evaluateMu.Lock()
	defer evaluateMu.Unlock()
	policy.RelaxPolicyForUserNamespacePods(userNamespaces)
	return policy.AggregateCheckResults(evaluator.EvaluatePod(lv, &tmpl.ObjectMeta, &tmpl.Spec))
}

// PodSecurity says why ns must not get the runner pod tmpl, or "" when it
// may.
//
// The scaler creating a pod that the group's writer could not create is
// the escalation to prevent. In a namespace with an enforce label, the pod
// is judged at that level and version with Pod Security's own checks, so a
// pod the API server would refuse gets no Job (and a privileged pod goes
// only where the label says privileged, a label only someone who may
// update namespaces sets). A namespace without the label gets the
// cluster's default level, which the API does not show and which is
// privileged unless the cluster says otherwise: there the scaler holds the
// pod to baseline itself, so hostPath, host namespaces, added
// capabilities and the like never reach such a namespace through the
// scaler. p.TrustUnlabelled (a platform decision) takes the default to be
// privileged instead. User-namespaced pods are judged as the API server
// judges them (userNamespacesRelaxed): relaxed from policy version 1.35,
// or at every version when p.UserNamespacesPodSecurityStandards says the
// API server has the gate; without knowing, the scaler refuses what such
// an API server would admit, never the other way round.
func PodSecurity(ns *corev1.Namespace, tmpl *corev1.PodTemplateSpec, p Platform) string {
	lv, labelled := enforced(ns, p.TrustUnlabelled)
	if lv.Level == psaapi.LevelPrivileged {
		return ""
	}
	relaxed := userNamespacesRelaxed(lv.Version, p)
	result := evaluate(lv, tmpl, relaxed)
	if result.Allowed {
		return ""
	}
	// A user-namespaced pod the relaxation would admit says so: the
	// group's writer cannot tell that the platform has not told the
	// scaler of the API server's gate.
	var gate string
	if !relaxed && tmpl.Spec.HostUsers != nil && !*tmpl.Spec.HostUsers && evaluate(lv, tmpl, true).Allowed {
		gate = "; Pod Security admits this user-namespaced pod at policy version v1.35 and later (an older one with the feature gate UserNamespacesPodSecurityStandards, which the platform tells the scaler with scaler.userNamespacesPodSecurityStandards)"
	}
	if !labelled {
		return fmt.Sprintf("namespace %s has no %s label, so the scaler holds the runner pod to Pod Security %q, which it fails: %s; "+
			"a cluster admin who accepts such runner pods there labels it: kubectl label namespace %s %s=%s (or the platform sets scaler.trustUnlabelledNamespaces)%s",
			ns.Name, LabelEnforce, lv, result.ForbiddenDetail(), ns.Name, LabelEnforce, LevelPrivileged, gate)
	}
	return fmt.Sprintf("namespace %s enforces Pod Security level %q (version %s), which the runner pod fails: %s; "+
		"change the runner template, run the group in a namespace labelled %s=%s, or have a cluster admin relabel this one%s",
		ns.Name, lv.Level, lv.Version, result.ForbiddenDetail(), LabelEnforce, LevelPrivileged, gate)
}

// enforced is the level and version the scaler holds a namespace's runner
// pods to, and whether the namespace says it: its enforce label; without
// one, baseline (the cluster's default level, which the API does not show,
// is privileged unless the cluster says otherwise), or privileged when the
// platform trusts unlabelled namespaces.
func enforced(ns *corev1.Namespace, trustUnlabelled bool) (psaapi.LevelVersion, bool) {
	_, labelled := ns.Labels[LabelEnforce]
	if !labelled {
		if trustUnlabelled {
			return psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()}, false
		}
		return psaapi.LevelVersion{Level: psaapi.LevelBaseline, Version: psaapi.LatestVersion()}, false
	}
	// Labels Pod Security cannot parse make it enforce restricted at the
	// latest version; PolicyToEvaluate says the same.
	p, _ := psaapi.PolicyToEvaluate(ns.Labels, psaapi.Policy{
		Enforce: psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()},
		Audit:   psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()},
		Warn:    psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()},
	})
	return p.Enforce, true
}

// RunnerConfigRights says why ns must not get a runner config that gives
// job containers what needs lists (runnerconfig.NeedsPrivileged), or ""
// when it may: such a config goes only where the scaler would create a
// privileged runner pod, a namespace whose level is privileged.
func RunnerConfigRights(ns *corev1.Namespace, needs []string, p Platform) string {
	if len(needs) == 0 {
		return ""
	}
	lv, labelled := enforced(ns, p.TrustUnlabelled)
	if lv.Level == psaapi.LevelPrivileged {
		return ""
	}
	what := strings.Join(needs, "; ")
	if !labelled {
		return fmt.Sprintf("the runner config gives job containers what only a namespace labelled %s=%s allows, and namespace %s has no %s label: %s; "+
			"a cluster admin who accepts that labels it: kubectl label namespace %s %s=%s (or the platform sets scaler.trustUnlabelledNamespaces)",
			LabelEnforce, LevelPrivileged, ns.Name, LabelEnforce, what, ns.Name, LabelEnforce, LevelPrivileged)
	}
	return fmt.Sprintf("namespace %s enforces Pod Security level %q, and the runner config gives job containers what only level privileged allows: %s; "+
		"remove it from spec.runnerConfig (or the chart's runnerConfig), or run the group in a namespace labelled %s=%s",
		ns.Name, lv.Level, what, LabelEnforce, LevelPrivileged)
}
