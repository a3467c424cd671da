package scaler

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/giteaurl"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// The rule of where a group's API token may go. A pass checks it before it
// reads the token (validate: CheckGiteaURL in checkSpec, CheckNamespace in
// tenantChecks), and the why command checks it by the same functions
// (TokenRefusal) before it reads the token to ask Gitea, so the two cannot
// drift (issue 36): the token goes to a group's Gitea only when
//
//   - the chart's allowedGiteaURLs (--allowed-gitea-urls; empty: any host
//     but loopback, link-local and metadata addresses) admit the group's
//     spec.gitea.url;
//   - the group's namespace is enabled: the scaler holds tenancy.Rights
//     there;
//   - the namespace's grant (tenancy.CheckGrant: the annotations
//     granted-gitea-urls and granted-repositories, set by the platform
//     team) covers that URL and what the group serves;
//   - the token's Secret carries tenancy.SecretLabel and declares the key
//     for the group's use (APITokenUse; readSecretKey checks it).
//
// What a pass checks besides (the template, the runner config, Pod
// Security, the registration token) decides what runner pods may run, not
// where the token goes, and needs the install's runner options.

// CheckGiteaURL refuses a group whose spec.gitea.url allowed does not
// admit (nil admits any host but the special addresses).
func CheckGiteaURL(allowed *giteaurl.Policy, rg *v1alpha1.RunnerGroup) error {
	if err := allowed.Check(rg.Spec.Gitea.URL); err != nil {
		return newGroupError(v1alpha1.ReasonGiteaURLNotAllowed, "spec.gitea.url: %w; the platform team lists the allowed Gitea URLs (chart value allowedGiteaURLs)", err)
	}
	return nil
}

// NamespaceFacts are what is known of a group's namespace.
type NamespaceFacts struct {
	// Missing are the rights the scaler lacks there (none: it is enabled);
	// ReviewErr says they could not be told.
	Missing   []tenancy.Right
	ReviewErr error
	// Namespace is the Namespace object, whose annotations are the grant;
	// NamespaceErr says it could not be read.
	Namespace    *corev1.Namespace
	NamespaceErr error
}

// CheckNamespace refuses a group whose namespace is not enabled, cannot be
// told to be, or whose grant does not cover the group's Gitea URL and
// target. names word the advice on enabling a namespace.
func CheckNamespace(names tenancy.Names, rg *v1alpha1.RunnerGroup, f NamespaceFacts) error {
	switch {
	case f.ReviewErr != nil:
		return newGroupError(v1alpha1.ReasonKubernetesError, "%w", f.ReviewErr)
	case len(f.Missing) > 0:
		return newGroupError(v1alpha1.ReasonNamespaceNotEnabled, "%s", names.NotEnabledMessage(rg.Namespace, f.Missing))
	case f.NamespaceErr != nil:
		return newGroupError(v1alpha1.ReasonKubernetesError, "cannot read namespace %s for its Pod Security labels and grant: %w", rg.Namespace, f.NamespaceErr)
	case f.Namespace == nil:
		return newGroupError(v1alpha1.ReasonKubernetesError, "namespace %s was not read, so its grant is not known", rg.Namespace)
	}
	if err := tenancy.CheckGrant(f.Namespace, rg.Spec.Gitea.URL, grantTarget(&rg.Spec)); err != nil {
		return newGroupError(v1alpha1.ReasonNotGranted, "%w", err)
	}
	return nil
}

// TokenRefusal says why a pass would not send rg's API token anywhere, by
// the checks above in the pass's order, or nil when it may. f are the
// facts of rg's namespace.
func TokenRefusal(cfg Config, rg *v1alpha1.RunnerGroup, f NamespaceFacts) error {
	if err := rg.Spec.Validate(); err != nil {
		return newGroupError(v1alpha1.ReasonInvalidSpec, "invalid spec: %w", err)
	}
	if err := CheckGiteaURL(cfg.AllowedGiteaURLs, rg); err != nil {
		return err
	}
	return CheckNamespace(cfg.Tenancy, rg, f)
}

// APITokenUse is what a group's API token key must be declared for: a
// group that has the scaler mint its registration token needs the key
// declared for minting too.
func APITokenUse(rg *v1alpha1.RunnerGroup) tenancy.TokenUse {
	if rg.MintsRegistrationToken() {
		return tenancy.UseMint
	}
	return tenancy.UseAPI
}

// ReasonOf is the condition reason of a group's failure, as a pass would
// record it.
func ReasonOf(err error) string { return reasonOf(err) }
