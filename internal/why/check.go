package why

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reason"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/selection"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tokenrule"
)

// The checks of a group, in the order a pass meets them.
const (
	CheckServed            = "served"
	CheckSpec              = "spec"
	CheckGiteaURL          = "gitea URL"
	CheckNamespace         = "namespace"
	CheckAPIToken          = "API token"
	CheckRegistrationToken = "registration token"
	CheckGitea             = "Gitea"
	CheckLastPass          = "last pass"
)

// Finding is one thing a pass needs of a group, and whether it holds.
type Finding struct {
	Check string `json:"check"`
	OK    bool   `json:"ok"`
	// Skipped: not checked, because a check before it failed (a token is
	// read only where a pass would read it).
	Skipped bool `json:"skipped,omitempty"`
	// Reason is the condition reason a pass records for it.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// GroupReport is what CheckGroup found.
type GroupReport struct {
	Group    string    `json:"group"`
	Findings []Finding `json:"findings"`
}

// Missing counts the findings that do not hold.
func (r *GroupReport) Missing() int {
	n := 0
	for _, f := range r.Findings {
		if !f.OK && !f.Skipped {
			n++
		}
	}
	return n
}

// CheckGroup says what a pass would need of rg that is missing, with the
// fix for each, by the rules why and the pass share: the listener's
// selection, the spec, tokenrule's refusal and token reads, then Gitea's
// answer to the group's own listing with its token. A group not created
// yet (a file) has no last pass; one that exists also gets its last
// pass's Ready condition. It writes nothing.
func CheckGroup(ctx context.Context, d Deps, cfg Config, rg *v1alpha1.RunnerGroup) (*GroupReport, error) {
	if d.Now == nil {
		d.Now = time.Now
	}
	listener, err := selection.New(cfg.Namespaces, cfg.Selector, cfg.ExcludeSelectors)
	if err != nil {
		return nil, err
	}
	rep := &GroupReport{Group: rg.Key()}
	add := func(check string, err error, fix string) bool {
		f := Finding{Check: check, OK: err == nil}
		if err != nil {
			f.Message, f.Fix = err.Error(), fix
			// Only the shared rules' refusals carry the reason a pass
			// records; Gitea's answers are mapped by the pass alone.
			var withReason *reason.Error
			if errors.As(err, &withReason) {
				f.Reason = reason.Of(err)
			}
		}
		rep.Findings = append(rep.Findings, f)
		return err == nil
	}
	skip := func(checks ...string) {
		for _, c := range checks {
			rep.Findings = append(rep.Findings, Finding{Check: c, Skipped: true,
				Message: "not checked: a pass reads the group's tokens only once the checks above hold"})
		}
	}

	if listener.Serves(rg.Namespace, rg.Labels) {
		add(CheckServed, nil, "")
	} else {
		add(CheckServed, fmt.Errorf("the listener (namespaces %s, selector %q, excludes %q) does not serve group %s", namespacesOrAll(cfg.Namespaces), cfg.Selector, cfg.ExcludeSelectors, rg.Key()),
			fmt.Sprintf("add namespace %s to the chart's watchNamespaces or tenantNamespaces, or label the group for a listener that serves it (listeners)", rg.Namespace))
	}
	specErr := rg.Spec.Validate()
	if specErr != nil {
		specErr = reason.Errorf(v1alpha1.ReasonInvalidSpec, "invalid spec: %w", specErr)
	}
	specOK := add(CheckSpec, specErr, "fix the field the message names")
	urlOK := add(CheckGiteaURL, tokenrule.CheckGiteaURL(cfg.AllowedGiteaURLs, rg),
		"use a Gitea URL the listener allows in spec.gitea.url, or have the platform team add it to the chart's allowedGiteaURLs")
	nsErr := tokenrule.CheckNamespace(cfg.Tenancy, rg, namespaceFacts(ctx, d, cfg, rg.Namespace))
	nsOK := add(CheckNamespace, nsErr, namespaceFix(cfg.Tenancy, rg, nsErr))
	if !specOK || !urlOK || !nsOK {
		if rg.Spec.RegistrationToken != nil {
			skip(CheckAPIToken, CheckRegistrationToken, CheckGitea)
		} else {
			skip(CheckAPIToken, CheckGitea)
		}
		rep.lastPass(rg, d.Now())
		return rep, nil
	}

	token, tokenErr := tokenrule.APIToken(ctx, d.Kube, rg)
	add(CheckAPIToken, tokenErr, secretFix(rg, rg.Spec.AuthToken.SecretRef, tokenrule.APITokenUse(rg), tokenErr))
	if ref := rg.Spec.RegistrationToken; ref != nil {
		_, err := tokenrule.SecretKey(ctx, d.Kube, map[string]*corev1.Secret{}, rg.Namespace, "registrationToken", ref.SecretRef, tenancy.UseRegistration)
		add(CheckRegistrationToken, err, secretFix(rg, ref.SecretRef, tenancy.UseRegistration, err))
	}
	if tokenErr != nil {
		skip(CheckGitea)
	} else {
		add(CheckGitea, askGitea(ctx, d, rg, token), "see the Gitea rows of the troubleshooting table (docs/troubleshooting.md): a new token for 401, the token user's rights on the scope for 403, the scope's owner or repository for 404")
	}
	rep.lastPass(rg, d.Now())
	return rep, nil
}

// askGitea lists the group's scope with its token, as a pass does first.
func askGitea(ctx context.Context, d Deps, rg *v1alpha1.RunnerGroup, token string) error {
	target := scope.Of(&rg.Spec)
	client, err := d.Gitea(rg.Spec.Gitea.URL, token)
	if err == nil {
		_, err = client.Snapshot(ctx, target)
	}
	if err != nil {
		return fmt.Errorf("cannot list the jobs of %s: %w", target, err)
	}
	return nil
}

// lastPass adds the Ready condition the group's last pass recorded; a
// group not created yet (no UID) has none.
func (r *GroupReport) lastPass(rg *v1alpha1.RunnerGroup, now time.Time) {
	if rg.UID == "" {
		return
	}
	ready := meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionReady)
	f := Finding{Check: CheckLastPass}
	switch {
	case ready != nil && ready.Status == metav1.ConditionFalse:
		f.Reason, f.Message = ready.Reason, ready.Message
		f.Fix = "see reason " + ready.Reason + " in the troubleshooting table (docs/troubleshooting.md)"
	case rg.Status.LastCheckTime == nil:
		// Not missing: a group just created waits for its first pass.
		f.Skipped = true
		f.Message = "no pass has served the group yet: the next pass does (a minute in mode cronjob; the chart's NOTES print the command for one now)"
	default:
		f.OK = true
		f.Message = fmt.Sprintf("Ready, %s ago at generation %d", now.Sub(rg.Status.LastCheckTime.Time).Round(time.Second), rg.Status.ObservedGeneration)
	}
	r.Findings = append(r.Findings, f)
}

// namespaceFix is the command that gives the namespace what err says it
// lacks.
func namespaceFix(names tenancy.Names, rg *v1alpha1.RunnerGroup, err error) string {
	if err == nil {
		return ""
	}
	enable := fmt.Sprintf("gitea-runner-scaler enable-namespace %s --tenant-cluster-role %s --service-account %s",
		rg.Namespace, orPlaceholder(names.TenantClusterRole, "ROLE"), orPlaceholder(names.ServiceAccount, "NS:NAME"))
	switch reason.Of(err) {
	case v1alpha1.ReasonNamespaceNotEnabled:
		return "someone who holds the tenant rights in " + rg.Namespace + " runs: " + enable
	case v1alpha1.ReasonNotGranted:
		p := scope.Of(&rg.Spec)
		grant := p.Owner()
		switch {
		case p.Scope() == v1alpha1.ScopeGlobal:
			grant = "*"
		case p.Repo() != "":
			grant += "/" + p.Repo()
		}
		return fmt.Sprintf("the platform team grants it (the flags set the whole annotation: add what the namespace has): %s --grant-gitea-url %s --grant-repository '%s'", enable, rg.Spec.Gitea.URL, grant)
	}
	return "check that you may read namespace " + rg.Namespace + " and create LocalSubjectAccessReviews there: this command asks with your rights"
}

// secretFix is what makes the Secret key of ref usable for use.
func secretFix(rg *v1alpha1.RunnerGroup, ref v1alpha1.SecretRef, use tenancy.TokenUse, err error) string {
	if err == nil {
		return ""
	}
	ns, name := rg.Namespace, ref.Name
	switch reason.Of(err) {
	case v1alpha1.ReasonSecretNotFound:
		return fmt.Sprintf("kubectl -n %s create secret generic %s --from-literal=%s=TOKEN, then label and annotate it as this command then says", ns, name, ref.Key)
	case v1alpha1.ReasonSecretNotLabelled:
		return fmt.Sprintf("kubectl -n %s label secret %s %s=true", ns, name, tenancy.SecretLabel)
	case v1alpha1.ReasonSecretKeyNotDeclared:
		return fmt.Sprintf("its owner adds %q to the Secret's annotation %s (comma-separated)", ref.Key, keyAnnotation(use))
	case v1alpha1.ReasonSecretKeyMissing:
		return fmt.Sprintf("put the token under key %q of Secret %s/%s", ref.Key, ns, name)
	}
	return "check that you may get Secret " + ns + "/" + name + ": this command reads with your rights"
}

// keyAnnotation is the annotation that declares a key for use.
func keyAnnotation(use tenancy.TokenUse) string {
	switch use {
	case tenancy.UseRegistration:
		return tenancy.AnnotationRegistrationKeys
	case tenancy.UseMint:
		return tenancy.AnnotationMintKeys + " (and " + tenancy.AnnotationAPIKeys + ")"
	}
	return tenancy.AnnotationAPIKeys
}

func namespacesOrAll(ns []string) string {
	if len(ns) == 0 {
		return "all"
	}
	return strings.Join(ns, ",")
}

func orPlaceholder(s, placeholder string) string {
	if s == "" {
		return placeholder
	}
	return s
}
