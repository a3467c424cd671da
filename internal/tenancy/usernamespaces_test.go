package tenancy

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"
)

// TestPodSecurityRelaxesUserNamespacedPodsOnlyWhenThePlatformSaysSo is
// issue 39: an API server with the feature gate
// UserNamespacesPodSecurityStandards admits, for a pod with hostUsers:
// false, any procMount (baseline) and any user id (restricted); the
// pre-check agrees with it only when the platform says the gate is on, and
// relaxes nothing else, nor pods in the host's user namespace.
func TestPodSecurityRelaxesUserNamespacedPodsOnlyWhenThePlatformSaysSo(t *testing.T) {
	unmasked := &corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}
	// restrictedAsRoot passes restricted but for running as root.
	restrictedAsRoot := &corev1.SecurityContext{
		RunAsUser: ptr.To[int64](0), AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	runnerPod := func(hostUsers *bool, sc *corev1.SecurityContext) *corev1.PodTemplateSpec {
		return pod(corev1.PodSpec{HostUsers: hostUsers, Containers: []corev1.Container{{Name: "runner", Image: "runner", SecurityContext: sc}}})
	}
	userNS := ptr.To(false)
	baseline := namespace(map[string]string{LabelEnforce: "baseline"})
	restricted := namespace(map[string]string{LabelEnforce: "restricted"})
	tests := []struct {
		name string
		ns   *corev1.Namespace
		pod  *corev1.PodTemplateSpec
		// The pre-check's answer without and with the relaxation: "" admits,
		// else a part of the refusal.
		strict, relaxed string
	}{
		{name: "procMount Unmasked in a user namespace, baseline", ns: baseline, pod: runnerPod(userNS, unmasked),
			strict: `container "runner" must not set securityContext.procMount to "Unmasked"`},
		{name: "procMount Unmasked in a user namespace, unlabelled (held to baseline)", ns: namespace(nil), pod: runnerPod(userNS, unmasked),
			strict: "procMount"},
		{name: "procMount Unmasked in the host's user namespace", ns: baseline, pod: runnerPod(nil, unmasked),
			strict: "procMount", relaxed: "procMount"},
		{name: "procMount Unmasked, hostUsers: true", ns: baseline, pod: runnerPod(ptr.To(true), unmasked),
			strict: "procMount", relaxed: "procMount"},
		{name: "root in a user namespace, restricted", ns: restricted, pod: runnerPod(userNS, restrictedAsRoot),
			strict: "runAsUser=0"},
		{name: "root in the host's user namespace, restricted", ns: restricted, pod: runnerPod(nil, restrictedAsRoot),
			strict: "runAsUser=0", relaxed: "runAsUser=0"},
		{name: "procMount Unmasked in a user namespace, restricted, which wants more", ns: restricted, pod: runnerPod(userNS, unmasked),
			strict: "procMount", relaxed: "allowPrivilegeEscalation != false"},
		{name: "privileged in a user namespace is still privileged", ns: baseline,
			pod:    runnerPod(userNS, &corev1.SecurityContext{Privileged: ptr.To(true), ProcMount: ptr.To(corev1.UnmaskedProcMount)}),
			strict: "privileged", relaxed: "privileged"},
		{name: "SYS_ADMIN in a user namespace is still refused", ns: baseline,
			pod:    runnerPod(userNS, &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}),
			strict: "non-default capabilities", relaxed: "non-default capabilities"},
		{name: "the unprivileged runner pod of runner-pods.md", ns: baseline,
			pod: pod(corev1.PodSpec{
				HostUsers:       userNS,
				SecurityContext: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("dind-rootless.json")}},
				Containers: []corev1.Container{{Name: "runner", Image: "runner", SecurityContext: &corev1.SecurityContext{
					RunAsUser: ptr.To[int64](1000), ProcMount: ptr.To(corev1.UnmaskedProcMount),
				}}},
			}),
			strict: "procMount"},
	}
	const gateHint = "Pod Security admits this user-namespaced pod at policy version v1.35 and later"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Refused only for want of the setting, the refusal names it.
			if strict := PodSecurity(tt.ns, tt.pod, Platform{}); tt.strict != "" && tt.relaxed == "" {
				assert.Contains(t, strict, gateHint)
			} else {
				assert.NotContains(t, strict, gateHint)
			}
			for _, c := range []struct {
				relax bool
				want  string
			}{{false, tt.strict}, {true, tt.relaxed}} {
				got := PodSecurity(tt.ns, tt.pod, Platform{UserNamespacesPodSecurityStandards: c.relax})
				if c.want == "" {
					assert.Empty(t, got, "relaxed: %v", c.relax)
					continue
				}
				assert.Contains(t, got, c.want, "relaxed: %v", c.relax)
			}
		})
	}
}

// TestPodSecurityKeepsEachCallersSetting: Pod Security's library keeps the
// relaxation in one process-wide switch; calls with either setting at once
// each get the answer for their own.
func TestPodSecurityKeepsEachCallersSetting(t *testing.T) {
	ns := namespace(map[string]string{LabelEnforce: "baseline"})
	p := pod(corev1.PodSpec{HostUsers: ptr.To(false), Containers: []corev1.Container{{Name: "runner", Image: "runner",
		SecurityContext: &corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}}}})
	const callers, calls = 8, 200
	wrong := make([]int, callers)
	var wg sync.WaitGroup
	for i := range callers {
		relax := i%2 == 0
		wg.Go(func() {
			for range calls {
				if refused := PodSecurity(ns, p, Platform{UserNamespacesPodSecurityStandards: relax}) != ""; refused == relax {
					wrong[i]++
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, make([]int, callers), wrong, "wrong answers per caller")
}

// TestUserNamespacedPodsAreJudgedByThePolicyVersion: from Kubernetes 1.35,
// Pod Security's checks at policy versions 1.35 and later admit a
// user-namespaced pod's unmasked /proc with no gate (the API server at
// 1.37.2 does, on the bed); "latest" is the API server's own version, and
// a version past it is the server's. Unknown, the scaler does not relax.
func TestUserNamespacedPodsAreJudgedByThePolicyVersion(t *testing.T) {
	p := pod(corev1.PodSpec{HostUsers: ptr.To(false), Containers: []corev1.Container{{Name: "runner", Image: "runner",
		SecurityContext: &corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}}}})
	v := psaapi.MajorMinorVersion
	tests := []struct {
		name    string
		version string // the namespace's enforce-version label; "" for none
		server  psaapi.Version
		gate    bool
		admits  bool
	}{
		{name: "latest, server unknown", server: psaapi.Version{}},
		{name: "latest on 1.34", server: v(1, 34)},
		{name: "latest on 1.35", server: v(1, 35), admits: true},
		{name: "latest on 1.37", server: v(1, 37), admits: true},
		{name: "v1.34 on 1.37", version: "v1.34", server: v(1, 37)},
		{name: "v1.36 on 1.37", version: "v1.36", server: v(1, 37), admits: true},
		{name: "v1.36 on 1.34 is the server's 1.34", version: "v1.36", server: v(1, 34)},
		{name: "v1.36, server unknown", version: "v1.36", admits: true},
		{name: "v1.30 on 1.30 with the gate", version: "v1.30", server: v(1, 30), gate: true, admits: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			labels := map[string]string{LabelEnforce: "baseline"}
			if tt.version != "" {
				labels[psaapi.EnforceVersionLabel] = tt.version
			}
			got := PodSecurity(namespace(labels), p, Platform{Server: tt.server, UserNamespacesPodSecurityStandards: tt.gate})
			if tt.admits {
				assert.Empty(t, got)
			} else {
				assert.Contains(t, got, "procMount")
			}
		})
	}
}

func TestParseServerVersion(t *testing.T) {
	tests := []struct {
		major, minor string
		want         psaapi.Version
		err          bool
	}{
		{major: "1", minor: "37", want: psaapi.MajorMinorVersion(1, 37)},
		{major: "1", minor: "35+", want: psaapi.MajorMinorVersion(1, 35)},
		{major: "", minor: "", err: true},
		{major: "1", minor: "x", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.major+"."+tt.minor, func(t *testing.T) {
			got, err := ParseServerVersion(tt.major, tt.minor)
			if tt.err {
				assert.Error(t, err)
				return
			}
			assert.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
