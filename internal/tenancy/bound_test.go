package tenancy

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const (
	tenantRole = "gro-gitea-runner-operator-gitea-runners-tenant"
	scalerUser = "system:serviceaccount:gitea-runners:gro"
)

var scaler = Identity{User: scalerUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:gitea-runners", "system:authenticated"}}

// chartTenantRole is the chart's tenant ClusterRole.
func chartTenantRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: tenantRole}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "list", "watch", "get", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "update"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "list"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
	}}
}

func binding(namespace, kind, role string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "b-" + role, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects:   subjects,
	}
}

func sa(namespace, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}
}

func TestReadBoundEnablesOnlyWhereTheTenantRoleIsBoundToTheScaler(t *testing.T) {
	tests := []struct {
		name    string
		binding *rbacv1.RoleBinding
		enabled bool
	}{
		{"the enable command's binding (ServiceAccount subject)", binding("team-a", "ClusterRole", tenantRole, sa("gitea-runners", "gro")), true},
		{"a ServiceAccount subject without a namespace is the binding's", binding("gitea-runners", "ClusterRole", tenantRole, sa("", "gro")), true},
		{"the ServiceAccount as a User subject", binding("team-a", "ClusterRole", tenantRole, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: scalerUser}), true},
		{"a group the scaler is in", binding("team-a", "ClusterRole", tenantRole, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:gitea-runners"}), true},
		{"one subject of several", binding("team-a", "ClusterRole", tenantRole, sa("team-a", "ci"), sa("gitea-runners", "gro")), true},
		{"another ServiceAccount", binding("team-a", "ClusterRole", tenantRole, sa("team-a", "gro")), false},
		{"a ServiceAccount without a namespace in another namespace", binding("team-a", "ClusterRole", tenantRole, sa("", "gro")), false},
		{"another user", binding("team-a", "ClusterRole", tenantRole, rbacv1.Subject{Kind: rbacv1.UserKind, Name: "alice"}), false},
		{"a group the scaler is not in", binding("team-a", "ClusterRole", tenantRole, rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "system:serviceaccounts:team-a"}), false},
		{"another ClusterRole", binding("team-a", "ClusterRole", "edit", sa("gitea-runners", "gro")), false},
		{"a namespaced Role of the same name", binding("team-a", "Role", tenantRole, sa("gitea-runners", "gro")), false},
		{"no subjects", binding("team-a", "ClusterRole", tenantRole), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube := fake.NewClientset(chartTenantRole(), tt.binding)
			b, err := ReadBound(context.Background(), kube, tenantRole, scaler)
			require.NoError(t, err)
			enabled, canWatch := b.Enables(tt.binding.Namespace)
			assert.Equal(t, tt.enabled, enabled)
			assert.Equal(t, tt.enabled, canWatch, "the chart's role holds the watch rights")
			enabled, _ = b.Enables("team-z")
			assert.False(t, enabled, "a namespace without a binding")
		})
	}
}

// The binding names the role, not its rules: a role edited to lack a
// right enables nothing, and then the RoleBindings are not even listed.
func TestReadBoundTrustsNoBindingOfARoleThatLacksARight(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*rbacv1.ClusterRole)
		enabled bool
		watch   bool
		missing []string
	}{
		{name: "the chart's role", edit: func(*rbacv1.ClusterRole) {}, enabled: true, watch: true},
		{name: "delete jobs removed", edit: func(cr *rbacv1.ClusterRole) { cr.Rules[0].Verbs = []string{"create", "list", "watch", "get"} }, missing: []string{"delete jobs.batch"}},
		{name: "configmaps limited to names", edit: func(cr *rbacv1.ClusterRole) { cr.Rules[1].ResourceNames = []string{"x"} },
			missing: []string{"get configmaps", "list configmaps", "create configmaps", "update configmaps"}},
		{name: "no rules", edit: func(cr *rbacv1.ClusterRole) { cr.Rules = nil }, missing: []string{"create jobs.batch", "list jobs.batch", "get jobs.batch", "delete jobs.batch", "get configmaps", "list configmaps", "create configmaps", "update configmaps", "get secrets", "create secrets", "update secrets", "create events", "list events", "list pods"}},
		{name: "a wildcard", edit: func(cr *rbacv1.ClusterRole) {
			cr.Rules = []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}
		}, enabled: true, watch: true},
		{name: "the watch rights removed: enabled, listed each pass", edit: func(cr *rbacv1.ClusterRole) {
			cr.Rules[4].Verbs = []string{"list"}
		}, enabled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cr := chartTenantRole()
			tt.edit(cr)
			kube := fake.NewClientset(cr, binding("team-a", "ClusterRole", tenantRole, sa("gitea-runners", "gro")))
			b, err := ReadBound(context.Background(), kube, tenantRole, scaler)
			require.NoError(t, err)
			enabled, canWatch := b.Enables("team-a")
			assert.Equal(t, tt.enabled, enabled)
			assert.Equal(t, tt.watch, canWatch)
			var missing []string
			for _, r := range b.Missing {
				missing = append(missing, r.String())
			}
			assert.Equal(t, tt.missing, missing)
			assert.Equal(t, map[bool]int{true: 1, false: 0}[tt.enabled], b.Len())
			listed := false
			for _, a := range kube.Actions() {
				listed = listed || a.GetVerb() == "list"
			}
			assert.Equal(t, tt.missing == nil, listed, "the RoleBindings are listed only when the role covers the rights")
		})
	}
}

func TestReadBoundReadsEveryPageAndHoldsOnlyTheBoundNamespaces(t *testing.T) {
	kube := fake.NewClientset(chartTenantRole())
	pages := [][]rbacv1.RoleBinding{
		{*binding("team-a", "ClusterRole", "edit", sa("team-a", "ci")), *binding("team-b", "ClusterRole", tenantRole, sa("gitea-runners", "gro"))},
		{*binding("team-c", "ClusterRole", tenantRole, sa("gitea-runners", "gro"))},
	}
	var asked []metav1.ListOptions
	kube.PrependReactor("list", "rolebindings", func(a k8stesting.Action) (bool, runtime.Object, error) {
		opts := a.(k8stesting.ListActionImpl).GetListOptions()
		asked = append(asked, opts)
		i := len(asked) - 1
		l := &rbacv1.RoleBindingList{Items: pages[i]}
		if i+1 < len(pages) {
			l.Continue = "page2"
		}
		return true, l, nil
	})
	b, err := ReadBound(context.Background(), kube, tenantRole, scaler)
	require.NoError(t, err)
	require.Len(t, asked, 2)
	assert.Equal(t, int64(ListPage), asked[0].Limit)
	assert.Equal(t, "page2", asked[1].Continue)
	assert.Equal(t, 2, b.Len())
	for ns, want := range map[string]bool{"team-a": false, "team-b": true, "team-c": true} {
		got, _ := b.Enables(ns)
		assert.Equal(t, want, got, ns)
	}
}

func TestReadBoundReportsWhatItCannotRead(t *testing.T) {
	_, err := ReadBound(context.Background(), fake.NewClientset(), tenantRole, scaler)
	require.Error(t, err, "no tenant ClusterRole")
	assert.Contains(t, err.Error(), tenantRole)
}

func TestWhoAmIAsksTheAPIServer(t *testing.T) {
	kube := fake.NewClientset()
	kube.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
			UserInfo: authenticationv1.UserInfo{Username: scalerUser, Groups: scaler.Groups}}}, nil
	})
	who, err := WhoAmI(context.Background(), kube)
	require.NoError(t, err)
	assert.Equal(t, scaler, who)

	_, err = WhoAmI(context.Background(), fake.NewClientset())
	require.Error(t, err, "an answer without a user name")
}
