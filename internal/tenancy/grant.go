package tenancy

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/giteaurl"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// The grant: what a namespace's RunnerGroups may serve, as the platform
// team says it on the Namespace object. Annotations on the Namespace are
// the carrier because only someone who may update that cluster-scoped
// object can set them (the platform team, as for the Pod Security label),
// never a RunnerGroup writer nor the namespace admin who enables the
// namespace with a RoleBinding; the scaler already reads the Namespace of
// every group it serves, and the runnergroup-guardrails admission policy
// sees it as namespaceObject, so one annotation is enforced at kubectl
// apply and in every pass alike.
const (
	// AnnotationGrantedGiteaURLs lists, comma-separated, the Gitea URLs
	// the namespace's groups may use: the rule of the chart's
	// allowedGiteaURLs (scheme, host and port equal, path under the
	// entry's).
	AnnotationGrantedGiteaURLs = v1alpha1.Group + "/granted-gitea-urls"
	// AnnotationGrantedRepositories lists, comma-separated, what the
	// namespace's groups may serve: "owner" (the owner's every repository:
	// scope org or user of that owner, or scope repo under it),
	// "owner/repo" (scope repo of that repository only), or "*" (every
	// repository, which scope global needs). Names compare without regard
	// to case, as Gitea's do.
	AnnotationGrantedRepositories = v1alpha1.Group + "/granted-repositories"
)

// ErrNotGranted is what every refusal of CheckGrant wraps.
var ErrNotGranted = errors.New("not granted")

// CheckGrant says whether the namespace's grant lets a group serve the
// scope of p on the Gitea at url. The URL is the one the group's spec
// spells, as its client dials it: the grant judges that spelling, not the
// normalised p.URL(). An annotation that is absent limits nothing (a
// namespace the platform has not annotated may claim what it could
// before); one that is present but empty grants nothing; one that does
// not parse grants nothing and says which entry is wrong.
func CheckGrant(ns *corev1.Namespace, url string, p scope.Place) error {
	name := ns.Name
	if raw, ok := ns.Annotations[AnnotationGrantedGiteaURLs]; ok {
		entries := splitList(raw)
		urls, err := giteaurl.Parse(entries)
		if err != nil {
			return fmt.Errorf("%w: annotation %s of namespace %s: %w", ErrNotGranted, AnnotationGrantedGiteaURLs, name, err)
		}
		if urls.Empty() || urls.Check(url) != nil {
			return fmt.Errorf("%w: Gitea %s is not granted to namespace %s (granted: %s; annotation %s, set by the platform team)",
				ErrNotGranted, url, name, describeGrant(entries), AnnotationGrantedGiteaURLs)
		}
	}
	raw, ok := ns.Annotations[AnnotationGrantedRepositories]
	if !ok {
		return nil
	}
	entries := splitList(raw)
	owner, repo := strings.ToLower(p.Owner()), strings.ToLower(p.Repo())
	granted := false
	for _, e := range entries {
		o, r, hasRepo := strings.Cut(strings.ToLower(e), "/")
		if e != "*" && (o == "" || strings.Contains(r, "/") || (hasRepo && r == "")) {
			return fmt.Errorf("%w: annotation %s of namespace %s: entry %q is none of *, OWNER or OWNER/REPO", ErrNotGranted, AnnotationGrantedRepositories, name, e)
		}
		switch {
		case e == "*":
			granted = true
		case p.Scope() == v1alpha1.ScopeGlobal:
		case !hasRepo:
			granted = granted || o == owner
		default:
			granted = granted || (p.Scope() == v1alpha1.ScopeRepo && o == owner && r == repo)
		}
	}
	if granted {
		return nil
	}
	what := "owner " + p.Owner()
	switch p.Scope() {
	case v1alpha1.ScopeGlobal:
		what = "every repository (scope global)"
	case v1alpha1.ScopeRepo:
		what = "repository " + p.Owner() + "/" + p.Repo()
	}
	return fmt.Errorf("%w: %s is not granted to namespace %s (granted: %s; annotation %s, set by the platform team)",
		ErrNotGranted, what, name, describeGrant(entries), AnnotationGrantedRepositories)
}

// splitList splits a comma-separated annotation, dropping empty entries.
func splitList(raw string) []string {
	var out []string
	for _, e := range strings.Split(raw, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func describeGrant(entries []string) string {
	if len(entries) == 0 {
		return "none"
	}
	return strings.Join(entries, ", ")
}
