// Package tokenrule is the rule of where a group's API token may go. A pass
// checks it before it reads the token (CheckGiteaURL with the spec,
// CheckNamespace with the namespace's other checks), and the why command
// checks it by the same functions (Refusal) before it reads the token to
// ask Gitea, so the two cannot drift: the token goes to a group's Gitea
// only when
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
//     for the group's use (APITokenUse; SecretKey checks it).
//
// What a pass checks besides (the template, the runner config, Pod
// Security, the registration token) decides what runner pods may run, not
// where the token goes, and needs the install's runner options.
package tokenrule

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/giteaurl"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reason"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// CheckGiteaURL refuses a group whose spec.gitea.url allowed does not
// admit (nil admits any host but the special addresses).
func CheckGiteaURL(allowed *giteaurl.Policy, rg *v1alpha1.RunnerGroup) error {
	if err := allowed.Check(rg.Spec.Gitea.URL); err != nil {
		return reason.Errorf(v1alpha1.ReasonGiteaURLNotAllowed, "spec.gitea.url: %w; the platform team lists the allowed Gitea URLs (chart value allowedGiteaURLs)", err)
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
		return reason.Errorf(v1alpha1.ReasonKubernetesError, "%w", f.ReviewErr)
	case len(f.Missing) > 0:
		return reason.Errorf(v1alpha1.ReasonNamespaceNotEnabled, "%s", names.NotEnabledMessage(rg.Namespace, f.Missing))
	case f.NamespaceErr != nil:
		return reason.Errorf(v1alpha1.ReasonKubernetesError, "cannot read namespace %s for its Pod Security labels and grant: %w", rg.Namespace, f.NamespaceErr)
	case f.Namespace == nil:
		return reason.Errorf(v1alpha1.ReasonKubernetesError, "namespace %s was not read, so its grant is not known", rg.Namespace)
	}
	if err := tenancy.CheckGrant(f.Namespace, rg.Spec.Gitea.URL, scope.Of(&rg.Spec)); err != nil {
		return reason.Errorf(v1alpha1.ReasonNotGranted, "%w", err)
	}
	return nil
}

// Refusal says why a pass would not send rg's API token anywhere, by the
// checks above in the pass's order, or nil when it may: allowed are the
// install's allowed Gitea URLs, names word the advice on enabling a
// namespace, f are the facts of rg's namespace.
func Refusal(allowed *giteaurl.Policy, names tenancy.Names, rg *v1alpha1.RunnerGroup, f NamespaceFacts) error {
	if err := rg.Spec.Validate(); err != nil {
		return reason.Errorf(v1alpha1.ReasonInvalidSpec, "invalid spec: %w", err)
	}
	if err := CheckGiteaURL(allowed, rg); err != nil {
		return err
	}
	return CheckNamespace(names, rg, f)
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

// APIToken reads the group's Gitea API token from its Secret, as a pass
// does, with the caller's client: the why command asks Gitea with it, so
// its user needs the right to read that Secret, a right the scaler never
// lends. The key must be declared for the use a pass makes of it
// (APITokenUse). Read it only for a group Refusal lets through.
// Errors name the Secret and key, never the value.
func APIToken(ctx context.Context, kube kubernetes.Interface, rg *v1alpha1.RunnerGroup) (string, error) {
	return SecretKey(ctx, kube, map[string]*corev1.Secret{}, rg.Namespace, "authToken", rg.Spec.AuthToken.SecretRef, APITokenUse(rg))
}

// SecretKey returns one key of a Secret in a group's namespace, for use,
// reading the Secret with kube only if read does not hold it yet (a pass
// reads each Secret once for all its groups); field names the spec field
// that refers to it. Errors name the Secret and key, never the value.
func SecretKey(ctx context.Context, kube kubernetes.Interface, read map[string]*corev1.Secret, namespace, field string, ref v1alpha1.SecretRef, use tenancy.TokenUse) (string, error) {
	sec, ok := read[ref.Name]
	if !ok {
		var err error
		sec, err = kube.CoreV1().Secrets(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return "", reason.Errorf(v1alpha1.ReasonSecretNotFound, "spec.%s: Secret %s/%s not found", field, namespace, ref.Name)
		case err != nil:
			return "", reason.Errorf(v1alpha1.ReasonKubernetesError, "spec.%s: cannot read Secret %s/%s: %w", field, namespace, ref.Name, err)
		}
		read[ref.Name] = sec
	}
	// Checked on every use, however the Secret was read (the pass may
	// have read it for another group of the namespace).
	if !tenancy.SecretAllowed(sec) {
		return "", reason.Errorf(v1alpha1.ReasonSecretNotLabelled, "spec.%s: Secret %s/%s lacks the label %s=true that lets the scaler use it; whoever may change the Secret adds it: kubectl label secret --namespace %s %s %s=true",
			field, namespace, ref.Name, tenancy.SecretLabel, namespace, ref.Name, tenancy.SecretLabel)
	}
	// Before the value is read: a key the owner did not declare for this
	// use is not looked at.
	if why := tenancy.TokenKeyRefusal(sec, ref.Key, use); why != "" {
		return "", reason.Errorf(v1alpha1.ReasonSecretKeyNotDeclared, "spec.%s: %s", field, why)
	}
	v, ok := sec.Data[ref.Key]
	if !ok || len(strings.TrimSpace(string(v))) == 0 {
		return "", reason.Errorf(v1alpha1.ReasonSecretKeyMissing, "spec.%s: Secret %s/%s has no key %q or it is empty", field, namespace, ref.Name, ref.Key)
	}
	return strings.TrimSpace(string(v)), nil
}
