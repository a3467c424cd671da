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
	privileged := &corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}}
	plain := &corev1.PodSpec{Containers: []corev1.Container{{Name: "runner"}}}
	hostNet := &corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "runner"}}}
	ns := func(labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: labels}}
	}
	tests := []struct {
		name    string
		ns      *corev1.Namespace
		spec    *corev1.PodSpec
		trust   bool
		refused string
	}{
		{"privileged namespace", ns(map[string]string{LabelEnforce: "privileged"}), privileged, false, ""},
		{"baseline namespace", ns(map[string]string{LabelEnforce: "baseline"}), privileged, false, `enforces Pod Security level "baseline"`},
		{"restricted namespace even when unlabelled ones are trusted", ns(map[string]string{LabelEnforce: "restricted"}), privileged, true, `level "restricted"`},
		{"unlabelled namespace", ns(nil), privileged, false, "has no pod-security.kubernetes.io/enforce label"},
		{"unlabelled namespace, trusted", ns(nil), privileged, true, ""},
		{"a host network pod is privileged too", ns(map[string]string{LabelEnforce: "baseline"}), hostNet, false, "baseline"},
		{"an unprivileged pod is left to admission", ns(map[string]string{LabelEnforce: "restricted"}), plain, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PodSecurity(tt.ns, tt.spec, tt.trust)
			if tt.refused == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tt.refused)
			assert.Contains(t, got, "pod-security.kubernetes.io/enforce=privileged", "the message says what to change")
		})
	}
}

func TestSecretAllowedOnlyWithTheLabel(t *testing.T) {
	sec := func(l map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: l}}
	}
	assert.True(t, SecretAllowed(sec(map[string]string{SecretLabel: "true"})))
	assert.False(t, SecretAllowed(sec(map[string]string{SecretLabel: "yes"})))
	assert.False(t, SecretAllowed(sec(nil)))
}
