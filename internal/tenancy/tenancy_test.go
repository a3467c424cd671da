package tenancy

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// reviews answers the fake's SelfSubjectRulesReviews with rules (and
// incomplete), and its SelfSubjectAccessReviews by allow; it counts both.
type reviews struct {
	rules      []authorizationv1.ResourceRule
	incomplete bool
	allow      func(authorizationv1.ResourceAttributes) bool
	rulesN     int
	accessN    int
}

func (r *reviews) client() *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "selfsubjectrulesreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r.rulesN++
		rr := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectRulesReview).DeepCopy()
		rr.Status = authorizationv1.SubjectRulesReviewStatus{ResourceRules: r.rules, Incomplete: r.incomplete}
		return true, rr, nil
	})
	c.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r.accessN++
		ar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		ar.Status.Allowed = r.allow != nil && r.allow(*ar.Spec.ResourceAttributes)
		return true, ar, nil
	})
	return c
}

// tenantRules are the chart's tenant ClusterRole rules.
var tenantRules = []authorizationv1.ResourceRule{
	{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "list", "get", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "update"}},
	{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "update"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "list"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
}

func TestMissingTellsAnEnabledNamespaceByItsRules(t *testing.T) {
	tests := []struct {
		name    string
		r       reviews
		missing []string
		access  int
	}{
		{name: "the tenant rules enable it with one review", r: reviews{rules: tenantRules}},
		{name: "a wildcard role enables it", r: reviews{rules: []authorizationv1.ResourceRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}},
		{
			name:    "no rules: every right is missing, and complete rules need no further review",
			r:       reviews{},
			missing: []string{"create jobs.batch", "list jobs.batch", "get jobs.batch", "delete jobs.batch", "get configmaps", "list configmaps", "create configmaps", "update configmaps", "get secrets", "create secrets", "update secrets", "create events", "list events", "list pods"},
		},
		{
			name: "rules limited to resource names do not count",
			r: reviews{rules: append(tenantRules[1:], authorizationv1.ResourceRule{
				APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"*"}, ResourceNames: []string{"one"}})},
			missing: []string{"create jobs.batch", "list jobs.batch", "get jobs.batch", "delete jobs.batch"},
		},
		{
			name: "incomplete rules: what they do not show is asked one by one",
			r: reviews{rules: tenantRules[1:], incomplete: true, allow: func(a authorizationv1.ResourceAttributes) bool {
				return a.Namespace == "team-a" && a.Verb != "delete"
			}},
			missing: []string{"delete jobs.batch"},
			access:  4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r
			missing, err := Missing(context.Background(), r.client(), "team-a")
			require.NoError(t, err)
			var got []string
			for _, m := range missing {
				got = append(got, m.String())
			}
			assert.Equal(t, tt.missing, got)
			assert.Equal(t, 1, r.rulesN, "one rules review per call")
			assert.Equal(t, tt.access, r.accessN)
		})
	}
}

func TestMissingReportsAFailedReview(t *testing.T) {
	c := fake.NewClientset()
	c.PrependReactor("create", "selfsubjectrulesreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("apiserver down")
	})
	_, err := Missing(context.Background(), c, "team-a")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "namespace team-a")
}

func TestNotEnabledMessageNamesTheCommand(t *testing.T) {
	n := Names{TenantClusterRole: "gro-gitea-runner-operator-gitea-runners-tenant", ServiceAccount: "gitea-runners:gro-gitea-runner-operator"}
	msg := n.NotEnabledMessage("team-a", Rights)
	assert.Contains(t, msg, "kubectl create rolebinding gro-gitea-runner-operator-gitea-runners-tenant --namespace team-a --clusterrole gro-gitea-runner-operator-gitea-runners-tenant --serviceaccount gitea-runners:gro-gitea-runner-operator")
	assert.Contains(t, msg, "create jobs.batch, list jobs.batch, get jobs.batch, and 11 more")
	assert.Contains(t, Names{}.NotEnabledMessage("team-a", Rights[:1]), "tenant ClusterRole in namespace team-a")
}

func TestPodSecurityAdmitsAPrivilegedRunnerOnlyWhereTheNamespaceSaysPrivileged(t *testing.T) {
	privileged := pod(corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}})
	plain := pod(corev1.PodSpec{Containers: []corev1.Container{{Name: "runner"}}})
	hostNet := pod(corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "runner"}}})
	tests := []struct {
		name    string
		ns      *corev1.Namespace
		pod     *corev1.PodTemplateSpec
		trust   bool
		refused string
	}{
		{"privileged namespace", namespace(map[string]string{LabelEnforce: "privileged"}), privileged, false, ""},
		{"baseline namespace", namespace(map[string]string{LabelEnforce: "baseline"}), privileged, false, `enforces Pod Security level "baseline"`},
		{"restricted namespace even when unlabelled ones are trusted", namespace(map[string]string{LabelEnforce: "restricted"}), privileged, true, `level "restricted"`},
		{"unlabelled namespace", namespace(nil), privileged, false, "has no pod-security.kubernetes.io/enforce label"},
		{"unlabelled namespace, trusted", namespace(nil), privileged, true, ""},
		{"a host network pod is privileged too", namespace(map[string]string{LabelEnforce: "baseline"}), hostNet, false, "host namespaces (hostNetwork=true)"},
		{"an unprivileged pod in a baseline namespace", namespace(map[string]string{LabelEnforce: "baseline"}), plain, false, ""},
		{"an unprivileged pod in an unlabelled namespace", namespace(nil), plain, false, ""},
		// The namespace's own level decides: a pod restricted refuses
		// would never start there, so no Job is made for it.
		{"an unprivileged pod that restricted refuses", namespace(map[string]string{LabelEnforce: "restricted"}), plain, false, `level "restricted"`},
		// A label Pod Security cannot parse makes it enforce restricted.
		{"an enforce label that is no level", namespace(map[string]string{LabelEnforce: "privilegd"}), privileged, false, `level "restricted"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PodSecurity(tt.ns, tt.pod, Platform{TrustUnlabelled: tt.trust})
			if tt.refused == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tt.refused)
			assert.Contains(t, got, "pod-security.kubernetes.io/enforce=privileged", "the message says what to change")
		})
	}
}

// TestPodSecurityHoldsUnlabelledNamespacesToBaseline is issue 24 item 2:
// in a namespace without an enforce label the cluster's default level
// decides, and Kubernetes' default is privileged, so the scaler itself
// holds the runner pod to Pod Security baseline there, with Pod
// Security's own checks: each of these gives node root or the node's
// network, and none is privileged: true.
func TestPodSecurityHoldsUnlabelledNamespacesToBaseline(t *testing.T) {
	runner := func(sc *corev1.SecurityContext) corev1.Container {
		return corev1.Container{Name: "runner", Image: "runner", SecurityContext: sc}
	}
	tests := map[string]struct {
		pod  *corev1.PodTemplateSpec
		want string // the baseline check that refuses it
	}{
		"hostPath / as root": {
			pod: pod(corev1.PodSpec{Containers: []corev1.Container{runner(&corev1.SecurityContext{RunAsUser: ptr.To[int64](0)})},
				Volumes: []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}}),
			want: "hostPath volumes",
		},
		"capabilities.add SYS_ADMIN": {
			pod:  pod(corev1.PodSpec{Containers: []corev1.Container{runner(&corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}})}}),
			want: "non-default capabilities",
		},
		"a hostPort": {
			pod:  pod(corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}}}}),
			want: "hostPort",
		},
		"seccomp Unconfined": {
			pod:  pod(corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}, Containers: []corev1.Container{runner(nil)}}),
			want: "seccompProfile",
		},
		"procMount Unmasked": {
			pod:  pod(corev1.PodSpec{Containers: []corev1.Container{runner(&corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)})}}),
			want: "procMount",
		},
		"an unsafe sysctl": {
			pod:  pod(corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.core_pattern", Value: "|/tmp/x"}}}, Containers: []corev1.Container{runner(nil)}}),
			want: "forbidden sysctls",
		},
		"the AppArmor annotation unconfined": {
			pod: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "runner": "unconfined"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{runner(nil)}},
			},
			want: "AppArmor",
		},
		"hostPID": {
			pod:  pod(corev1.PodSpec{HostPID: true, Containers: []corev1.Container{runner(nil)}}),
			want: "host namespaces",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := PodSecurity(namespace(nil), tc.pod, Platform{})
			assert.Contains(t, got, "has no pod-security.kubernetes.io/enforce label")
			assert.Contains(t, got, tc.want)
			assert.Empty(t, PodSecurity(namespace(map[string]string{LabelEnforce: "privileged"}), tc.pod, Platform{}), "a privileged namespace admits it")
			assert.Empty(t, PodSecurity(namespace(nil), tc.pod, Platform{TrustUnlabelled: true}), "the platform trusts unlabelled namespaces")
		})
	}
}

// TestPodSecurityEvaluatesAtTheNamespacesVersion: a namespace pinned to
// an older Pod Security version is judged by that version's checks, as the
// API server will. Before v1.25, restricted did not require seccomp.
func TestPodSecurityEvaluatesAtTheNamespacesVersion(t *testing.T) {
	restrictedBut := pod(corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
		Containers: []corev1.Container{{Name: "runner", SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}}},
	})
	latest := namespace(map[string]string{LabelEnforce: "restricted"})
	old := namespace(map[string]string{LabelEnforce: "restricted", "pod-security.kubernetes.io/enforce-version": "v1.18"})
	assert.Contains(t, PodSecurity(latest, restrictedBut, Platform{}), "seccompProfile")
	assert.Empty(t, PodSecurity(old, restrictedBut, Platform{}))
}

func pod(spec corev1.PodSpec) *corev1.PodTemplateSpec { return &corev1.PodTemplateSpec{Spec: spec} }

func namespace(labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: labels}}
}

func TestSecretAllowedOnlyWithTheLabel(t *testing.T) {
	sec := func(l map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: l}}
	}
	assert.True(t, SecretAllowed(sec(map[string]string{SecretLabel: "true"})))
	assert.False(t, SecretAllowed(sec(map[string]string{SecretLabel: "yes"})))
	assert.False(t, SecretAllowed(sec(nil)))
}

// The watch rights are optional: their absence enables the namespace all
// the same, and they are judged by the rules alone.
func TestReviewTellsWhetherALoopMayWatch(t *testing.T) {
	withWatch := []authorizationv1.ResourceRule{
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "list", "watch", "get", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update"}},
		tenantRules[2], tenantRules[3],
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
	}
	tests := []struct {
		name     string
		r        reviews
		canWatch bool
		access   int
	}{
		{name: "the chart's tenant rules", r: reviews{rules: withWatch}, canWatch: true},
		{name: "an older binding without watch", r: reviews{rules: tenantRules}},
		{name: "a wildcard", r: reviews{rules: []authorizationv1.ResourceRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}, canWatch: true},
		{name: "incomplete rules ask nothing for watch", r: reviews{rules: tenantRules, incomplete: true, allow: func(authorizationv1.ResourceAttributes) bool { return true }}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r
			missing, canWatch, err := Review(context.Background(), r.client(), "team-a")
			require.NoError(t, err)
			assert.Empty(t, missing, "enabled either way")
			assert.Equal(t, tt.canWatch, canWatch)
			assert.Equal(t, tt.access, r.accessN)
		})
	}
}
