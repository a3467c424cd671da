package tenancy

import (
	"context"
	"fmt"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"
)

// Identity is who the API server takes the scaler to be: the user and
// groups the RBAC authorizer matches a binding's subjects against.
type Identity struct {
	User   string
	Groups []string
}

// WhoAmI asks the API server who the caller is (one SelfSubjectReview).
// It is the authenticator's own answer, so it holds whatever the
// credentials are (the pod's ServiceAccount token, a kubeconfig user,
// impersonation), and it names the groups a Group subject may bind.
func WhoAmI(ctx context.Context, kube kubernetes.Interface) (Identity, error) {
	r, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return Identity{}, fmt.Errorf("cannot ask the API server who the scaler is: %w", err)
	}
	u := r.Status.UserInfo
	if u.Username == "" {
		return Identity{}, fmt.Errorf("the API server's SelfSubjectReview named no user")
	}
	return Identity{User: u.Username, Groups: u.Groups}, nil
}

// Bound is what one cluster-wide read of RoleBindings says about the
// scaler's rights: the namespaces where a RoleBinding binds the tenant
// ClusterRole to the scaler, and whether that ClusterRole's rules, as they
// are now, cover Rights (and WatchRights).
//
// Why that is enough to serve a namespace without asking a review there:
// RBAC only adds rights, so a RoleBinding in a namespace that binds a role
// whose rules cover Rights to the scaler's user (or one of its groups)
// means the RBAC authorizer allows the scaler every one of Rights there,
// whatever else is bound; a SelfSubjectRulesReview there would list those
// very rules. The binding names the role, not its rules, so the role is
// read every time too: an edited role that lost a right proves nothing. A
// namespace Bound does not enable is asked as before (Review), so any
// other way of granting the rights still works and a namespace without
// them gets the same answer. Creating such a binding is subject to the
// same escalation prevention as before, and the API server still
// authorizes every request the scaler sends.
type Bound struct {
	namespaces map[string]bool
	// Missing are the Rights the tenant ClusterRole's rules lack; with
	// any, Bound enables no namespace.
	Missing []Right
	watch   bool
}

// ListPage is how many objects one request of a cluster-wide list asks
// for (EachListed).
const ListPage = 500

// ReadBound reads the tenant ClusterRole role (one GET) and, when its rules
// cover Rights, the RoleBindings of every namespace (one list per
// ListPage of them). It needs get on that ClusterRole and list on
// RoleBindings cluster-wide.
func ReadBound(ctx context.Context, kube kubernetes.Interface, role string, who Identity) (Bound, error) {
	cr, err := kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
	if err != nil {
		return Bound{}, fmt.Errorf("cannot read the tenant ClusterRole %s: %w", role, err)
	}
	rules := make([]authorizationv1.ResourceRule, 0, len(cr.Rules))
	for _, r := range cr.Rules {
		rules = append(rules, authorizationv1.ResourceRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
	}
	b := Bound{namespaces: map[string]bool{}, watch: true}
	for _, r := range Rights {
		if !covered(rules, r) {
			b.Missing = append(b.Missing, r)
		}
	}
	for _, r := range WatchRights {
		b.watch = b.watch && covered(rules, r)
	}
	if len(b.Missing) > 0 {
		return b, nil
	}
	err = EachListed(ctx, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return kube.RbacV1().RoleBindings("").List(ctx, opts)
	}, func(o runtime.Object) {
		if rb := o.(*rbacv1.RoleBinding); binds(rb, role, who) {
			b.namespaces[rb.Namespace] = true
		}
	})
	if err != nil {
		return Bound{}, fmt.Errorf("cannot list RoleBindings: %w", err)
	}
	return b, nil
}

// EachListed gives each object of a cluster-wide list to each, ListPage at
// a time (client-go's pager), so no more than a page or so of a large
// cluster's objects is held at once.
func EachListed(ctx context.Context, list func(context.Context, metav1.ListOptions) (runtime.Object, error), each func(runtime.Object)) error {
	p := pager.New(list)
	p.PageSize = ListPage
	return p.EachListItem(ctx, metav1.ListOptions{}, func(o runtime.Object) error {
		each(o)
		return nil
	})
}

// Enables says whether a RoleBinding of the tenant ClusterRole enables
// namespace, and whether the scaler may watch there by that role. A
// namespace it does not enable may still be enabled some other way:
// Review it.
func (b Bound) Enables(namespace string) (enabled, canWatch bool) {
	if len(b.Missing) > 0 || !b.namespaces[namespace] {
		return false, false
	}
	return true, b.watch
}

// Len is how many namespaces the bindings enable.
func (b Bound) Len() int {
	if len(b.Missing) > 0 {
		return 0
	}
	return len(b.namespaces)
}

// binds reports whether rb binds the ClusterRole role to who, by the RBAC
// authorizer's own subject rules: a User by name, a Group by membership,
// a ServiceAccount by its user name (namespace defaulted to the binding's).
func binds(rb *rbacv1.RoleBinding, role string, who Identity) bool {
	if rb.RoleRef.APIGroup != rbacv1.GroupName || rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != role {
		return false
	}
	for _, s := range rb.Subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if s.Name == who.User {
				return true
			}
		case rbacv1.GroupKind:
			if slices.Contains(who.Groups, s.Name) {
				return true
			}
		case rbacv1.ServiceAccountKind:
			ns := s.Namespace
			if ns == "" {
				ns = rb.Namespace
			}
			if "system:serviceaccount:"+ns+":"+s.Name == who.User {
				return true
			}
		}
	}
	return false
}
