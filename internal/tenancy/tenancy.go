// Package tenancy holds the rules that keep a RunnerGroup's writer from
// gaining, through the scaler, a right they do not hold:
//
//   - A namespace is served only where the scaler holds Rights, which the
//     chart's tenant ClusterRole grants once someone binds it there.
//     Kubernetes lets only a holder of those rights create that binding
//     (RBAC escalation prevention), so enabling a namespace gives no one a
//     power they lacked. Missing asks the API server what the scaler may do
//     there, so any way of granting the rights works. With cluster-wide
//     reads, ReadBound answers for every namespace at once from the
//     RoleBindings of the tenant ClusterRole to the scaler and that role's
//     current rules: RBAC only adds rights, so such a binding proves them
//     (see Bound); every other namespace is still asked.
//   - A privileged runner pod is created only in a namespace whose Pod
//     Security label admits privileged pods (PodSecurity).
//   - A Secret is read for a group only when it carries SecretLabel.
package tenancy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Right is one verb on one resource.
type Right struct {
	Group, Resource, Verb string
}

// String reads like "create jobs.batch" or "get secrets".
func (r Right) String() string {
	if r.Group == "" {
		return r.Verb + " " + r.Resource
	}
	return r.Verb + " " + r.Resource + "." + r.Group
}

// Rights are what the scaler does inside a namespace it serves, and so the
// rules of the chart's tenant ClusterRole (an e2e test checks the installed
// chart against this list):
//   - runner Jobs: create; list (observe); get (is an orphan's Job gone);
//     delete (runners that never started, idle runners);
//   - the state ConfigMaps: get, list (once per namespace and pass), create,
//     update; and the namespace's registrations ledger (package ledger):
//     get, create, update;
//   - the registration and API token Secrets: get; create and update the
//     minted <group>-registration-token (only one the group owns);
//   - Events: create (on the group), list (a Job's FailedCreate);
//   - runner pods: list (did one start, and why not).
var Rights = []Right{
	{"batch", "jobs", "create"}, {"batch", "jobs", "list"}, {"batch", "jobs", "get"}, {"batch", "jobs", "delete"},
	{"", "configmaps", "get"}, {"", "configmaps", "list"}, {"", "configmaps", "create"}, {"", "configmaps", "update"},
	{"", "secrets", "get"}, {"", "secrets", "create"}, {"", "secrets", "update"},
	{"", "events", "create"}, {"", "events", "list"},
	{"", "pods", "list"},
}

// WatchRights are what a looping scaler needs besides Rights to keep a
// namespace's runner Jobs, runner pods and state ConfigMaps in watch
// caches between passes (package kubecache). They are optional: where
// they are missing the namespace is served all the same, and each pass
// lists what it reads, as a single pass does. The token Secrets are not
// among them: the scaler may get a Secret by name but never list or watch
// Secrets.
var WatchRights = []Right{
	{"batch", "jobs", "watch"}, {"", "configmaps", "watch"}, {"", "pods", "watch"},
}

// Missing returns the Rights the caller lacks in namespace; none means the
// namespace is enabled. It asks once with a SelfSubjectRulesReview; only
// when the API server says that answer is incomplete (an authorizer other
// than RBAC, such as a webhook, may allow more) does it ask a
// SelfSubjectAccessReview for each right the rules do not show.
func Missing(ctx context.Context, kube kubernetes.Interface, namespace string) ([]Right, error) {
	missing, _, err := Review(ctx, kube, namespace)
	return missing, err
}

// Review is Missing, and also says whether the same answer shows every
// one of WatchRights (canWatch). Those are judged by the rules alone: a
// namespace whose rules do not show them is listed each pass, which costs
// requests but is never wrong, so no SelfSubjectAccessReview is spent on
// them.
func Review(ctx context.Context, kube kubernetes.Interface, namespace string) (missing []Right, canWatch bool, err error) {
	rr, err := kube.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: namespace},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("cannot review the scaler's rights in namespace %s: %w", namespace, err)
	}
	canWatch = true
	for _, r := range WatchRights {
		canWatch = canWatch && covered(rr.Status.ResourceRules, r)
	}
	for _, r := range Rights {
		if !covered(rr.Status.ResourceRules, r) {
			missing = append(missing, r)
		}
	}
	if !rr.Status.Incomplete || len(missing) == 0 {
		return missing, canWatch, nil
	}
	still, err := accessReviews(ctx, kube, namespace, missing)
	return still, canWatch, err
}

// accessReviews asks, right by right, which of missing the caller lacks
// indeed.
func accessReviews(ctx context.Context, kube kubernetes.Interface, namespace string, missing []Right) ([]Right, error) {
	var still []Right
	for _, r := range missing {
		ar, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Group: r.Group, Resource: r.Resource, Verb: r.Verb,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("cannot review the scaler's right to %s in namespace %s: %w", r, namespace, err)
		}
		if !ar.Status.Allowed {
			still = append(still, r)
		}
	}
	return still, nil
}

// covered reports whether a rule grants r on every object of its resource
// (a rule limited to resourceNames does not: the scaler names Jobs and
// ConfigMaps it has not made yet).
func covered(rules []authorizationv1.ResourceRule, r Right) bool {
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	for _, rule := range rules {
		if len(rule.ResourceNames) == 0 && has(rule.APIGroups, r.Group) && has(rule.Resources, r.Resource) && has(rule.Verbs, r.Verb) {
			return true
		}
	}
	return false
}

// Names says how a namespace is enabled for one scaler: the tenant
// ClusterRole and the scaler's ServiceAccount ("namespace:name"), both as
// the chart names them. Empty fields make the advice generic.
type Names struct {
	TenantClusterRole string
	ServiceAccount    string
}

// EnableCommand is the command that enables namespace, or what to grant
// when the names are not known.
func (n Names) EnableCommand(namespace string) string {
	if n.TenantClusterRole == "" || n.ServiceAccount == "" {
		return "grant the scaler's ServiceAccount the rules of the chart's tenant ClusterRole in namespace " + namespace
	}
	return fmt.Sprintf("kubectl create rolebinding %s --namespace %s --clusterrole %s --serviceaccount %s",
		n.TenantClusterRole, namespace, n.TenantClusterRole, n.ServiceAccount)
}

// NotEnabledMessage says why a group of namespace is not served.
func (n Names) NotEnabledMessage(namespace string, missing []Right) string {
	shown := make([]string, 0, 3)
	for _, r := range missing[:min(len(missing), 3)] {
		shown = append(shown, r.String())
	}
	if len(missing) > 3 {
		shown = append(shown, fmt.Sprintf("and %d more", len(missing)-3))
	}
	return fmt.Sprintf("namespace %s is not enabled for this scaler (it may not %s there); someone who holds those rights there enables it with: %s",
		namespace, strings.Join(shown, ", "), n.EnableCommand(namespace))
}

// ServiceAccountIdentity is who the API server takes the ServiceAccount
// "namespace:name" (Names.ServiceAccount's form) to be: its user and the
// groups every ServiceAccount is in.
func ServiceAccountIdentity(sa string) (Identity, error) {
	ns, name, ok := strings.Cut(sa, ":")
	if !ok || ns == "" || name == "" || strings.Contains(name, ":") {
		return Identity{}, fmt.Errorf("the scaler's ServiceAccount must be namespace:name, got %q", sa)
	}
	return Identity{
		User:   "system:serviceaccount:" + ns + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}, nil
}

// MissingFor returns the Rights who lacks in namespace, asked by someone
// else (the why command, with its user's credentials): the caller's own
// review (Missing) when the caller is who, otherwise one
// LocalSubjectAccessReview per right, which needs create on
// localsubjectaccessreviews there (the admin ClusterRole has it). The API
// server's authorizers answer either way, so any way of granting the
// rights counts, as it does for the scaler.
func MissingFor(ctx context.Context, kube kubernetes.Interface, namespace string, who Identity) ([]Right, error) {
	if me, err := WhoAmI(ctx, kube); err == nil && me.User == who.User {
		return Missing(ctx, kube, namespace)
	}
	var missing []Right
	for _, r := range Rights {
		ar, err := kube.AuthorizationV1().LocalSubjectAccessReviews(namespace).Create(ctx, &authorizationv1.LocalSubjectAccessReview{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace},
			Spec: authorizationv1.SubjectAccessReviewSpec{User: who.User, Groups: who.Groups, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Group: r.Group, Resource: r.Resource, Verb: r.Verb,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("cannot tell whether %s may %s in namespace %s (a LocalSubjectAccessReview there): %w", who.User, r, namespace, err)
		}
		if !ar.Status.Allowed {
			missing = append(missing, r)
		}
	}
	return missing, nil
}
