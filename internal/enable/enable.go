// Package enable builds what enabling a tenant namespace for the scaler
// takes, as the security docs list it: the RoleBinding of the tenant
// ClusterRole to the scaler's ServiceAccount, the Namespace's Pod Security
// label and grant annotations, and the label and key annotations on the
// namespace's token Secret. It builds server-side apply configurations,
// so applying them sets exactly those fields and leaves everything else
// (the Secret's data, other labels) to its owner.
package enable

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	psapi "k8s.io/pod-security-admission/api"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// FieldManager owns the fields the command sets.
const FieldManager = "gitea-runner-scaler-enable-namespace"

// Request is one namespace's enabling. An empty PodSecurity, nil
// GiteaURLs or Repositories, or an empty TokenSecret leave that part as it
// is; an empty but non-nil list grants nothing, as the annotation does.
type Request struct {
	Namespace string
	// TenantClusterRole and ServiceAccount (namespace:name) are the
	// chart's; its NOTES print them.
	TenantClusterRole string
	ServiceAccount    string
	PodSecurity       string
	GiteaURLs         []string
	Repositories      []string
	TokenSecret       string
	// The keys of TokenSecret for each use (tenancy's key annotations).
	RegistrationKeys, APIKeys, MintKeys []string
}

// Validate says, all at once, what in r cannot be applied.
func (r Request) Validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Label(r.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("namespace %q: %s", r.Namespace, strings.Join(msgs, "; ")))
	}
	if r.TenantClusterRole == "" {
		errs = append(errs, errors.New("--tenant-cluster-role is required (the chart's NOTES name it)"))
	}
	if ns, name, ok := strings.Cut(r.ServiceAccount, ":"); !ok || ns == "" || name == "" {
		errs = append(errs, fmt.Errorf("--service-account must be namespace:name (the chart's NOTES name it), got %q", r.ServiceAccount))
	}
	if r.PodSecurity != "" {
		if _, err := psapi.ParseLevel(r.PodSecurity); err != nil {
			errs = append(errs, fmt.Errorf("--pod-security: %w", err))
		}
	}
	keys := slices.Concat(r.RegistrationKeys, r.APIKeys, r.MintKeys)
	switch {
	case r.TokenSecret == "" && len(keys) > 0:
		errs = append(errs, errors.New("the token key flags need --token-secret"))
	case r.TokenSecret != "" && len(keys) == 0:
		errs = append(errs, errors.New("--token-secret needs the keys it holds (--registration-token-key, --api-token-key, --mint-token-key)"))
	}
	for _, k := range r.RegistrationKeys {
		if slices.Contains(r.APIKeys, k) || slices.Contains(r.MintKeys, k) {
			errs = append(errs, fmt.Errorf("key %q cannot be both a registration token and an API token", k))
		}
	}
	return errors.Join(errs...)
}

// RoleBinding binds the tenant ClusterRole to the scaler's ServiceAccount,
// named as the chart names the bindings it makes (watchNamespaces).
func (r Request) RoleBinding() *rbacv1ac.RoleBindingApplyConfiguration {
	saNamespace, saName, _ := strings.Cut(r.ServiceAccount, ":")
	return rbacv1ac.RoleBinding(r.TenantClusterRole, r.Namespace).
		WithLabels(map[string]string{"app.kubernetes.io/component": "tenant"}).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("ClusterRole").WithName(r.TenantClusterRole)).
		WithSubjects(rbacv1ac.Subject().WithKind("ServiceAccount").WithNamespace(saNamespace).WithName(saName))
}

// NamespaceObject is the Namespace's Pod Security label and grant
// annotations; nil when the request sets none of them.
func (r Request) NamespaceObject() *corev1ac.NamespaceApplyConfiguration {
	labels, annotations := map[string]string{}, map[string]string{}
	if r.PodSecurity != "" {
		labels[psapi.EnforceLevelLabel] = r.PodSecurity
	}
	if r.GiteaURLs != nil {
		annotations[tenancy.AnnotationGrantedGiteaURLs] = strings.Join(r.GiteaURLs, ",")
	}
	if r.Repositories != nil {
		annotations[tenancy.AnnotationGrantedRepositories] = strings.Join(r.Repositories, ",")
	}
	if len(labels) == 0 && len(annotations) == 0 {
		return nil
	}
	ns := corev1ac.Namespace(r.Namespace)
	if len(labels) > 0 {
		ns.WithLabels(labels)
	}
	if len(annotations) > 0 {
		ns.WithAnnotations(annotations)
	}
	return ns
}

// Secret is the token Secret's label and key annotations (its data stays
// its owner's); nil without TokenSecret.
func (r Request) Secret() *corev1ac.SecretApplyConfiguration {
	if r.TokenSecret == "" {
		return nil
	}
	annotations := map[string]string{}
	for name, keys := range map[string][]string{
		tenancy.AnnotationRegistrationKeys: r.RegistrationKeys,
		tenancy.AnnotationAPIKeys:          r.APIKeys,
		tenancy.AnnotationMintKeys:         r.MintKeys,
	} {
		if len(keys) > 0 {
			annotations[name] = strings.Join(keys, ",")
		}
	}
	return corev1ac.Secret(r.TokenSecret, r.Namespace).
		WithLabels(map[string]string{tenancy.SecretLabel: "true"}).
		WithAnnotations(annotations)
}

// PrivilegedRunners is the Pod Security level the built-in runner pod
// needs (Docker-in-Docker).
const PrivilegedRunners = string(psapi.LevelPrivileged)
