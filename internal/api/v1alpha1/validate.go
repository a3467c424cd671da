package v1alpha1

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"
)

// SameTokenKeyMessage refuses a group whose registrationToken and authToken
// are one key: the registration token reaches the runner pod, which the
// group's writer controls, and the API token must never.
const SameTokenKeyMessage = "spec.registrationToken and spec.authToken name the same key of the same Secret: the registration token reaches the runner pod and the API token must not; point them at different keys"

// Validate checks a spec the way the CRD's schema and CEL rules do at
// admission. The API server is the first line; this is the second, for
// objects admitted before the CRD carried a rule, or by a cluster whose CRD
// is managed apart and older. Each message names the field.
func (s *RunnerGroupSpec) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	switch s.Scope {
	case ScopeGlobal:
		if s.Org != "" || s.User != "" || s.Repo != "" {
			bad("spec.org, spec.user and spec.repo must be empty for scope global")
		}
	case ScopeOrg:
		if s.Org == "" {
			bad("spec.org is required for scope org")
		}
		if s.User != "" || s.Repo != "" {
			bad("spec.user and spec.repo must be empty for scope org")
		}
	case ScopeUser:
		if s.User == "" {
			bad("spec.user is required for scope user")
		}
		if s.Org != "" || s.Repo != "" {
			bad("spec.org and spec.repo must be empty for scope user")
		}
	case ScopeRepo:
		if s.Repo == "" {
			bad("spec.repo is required for scope repo")
		}
		if (s.Org == "") == (s.User == "") {
			bad("scope repo needs exactly one of spec.org or spec.user as the repository's owner")
		}
	default:
		bad("spec.scope must be one of global, org, user, repo, not %q", s.Scope)
	}

	if u, err := url.Parse(s.Gitea.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("spec.gitea.url must be an http or https URL")
	} else if u.User != nil {
		bad("spec.gitea.url must not carry credentials")
	}
	if s.MaxActiveRunners < 0 {
		bad("spec.maxActiveRunners must be 0 or more")
	}
	if s.MinIdleRunners < 0 || s.MinIdleRunners > s.MaxActiveRunners {
		bad("spec.minIdleRunners must be between 0 and spec.maxActiveRunners")
	}
	seen := map[string]bool{}
	for i, l := range s.Labels {
		name, _, _ := strings.Cut(l, ":")
		if s.Flavour == FlavourHost && IsDockerLabel(l) {
			bad("spec.labels[%d] %q: spec.flavour Host runs jobs on the runner pod itself, without Docker: use host labels (\"name\" or \"name:host\")", i, l)
		}
		switch {
		case l == "" || name == "":
			bad("spec.labels[%d] must not be empty", i)
		case strings.ContainsAny(l, ", \t"):
			bad("spec.labels[%d] must not contain commas or spaces", i)
		case strings.ContainsFunc(l, unicode.IsControl):
			// why and status print labels to an operator's terminal.
			bad("spec.labels[%d] must not contain control characters", i)
		case seen[name]:
			bad("spec.labels[%d]: label name %q is given twice", i, name)
		}
		seen[name] = true
	}
	if !s.UsesDefaultLabels() && len(s.Labels) == 0 {
		bad("spec.labels must name at least one label when spec.defaultLabels is false")
	}
	if s.RegistrationToken != nil {
		if r := s.RegistrationToken.SecretRef; r.Name == "" || r.Key == "" {
			bad("spec.registrationToken.secretRef needs both name and key")
		}
	}
	if r := s.AuthToken.SecretRef; r.Name == "" || r.Key == "" {
		bad("spec.authToken.secretRef needs both name and key")
	}
	if s.RegistrationToken != nil && s.RegistrationToken.SecretRef == s.AuthToken.SecretRef {
		bad("%s", SameTokenKeyMessage)
	}
	return errors.Join(errs...)
}

// Owner returns the owner of the group's org, user or repository.
func (s *RunnerGroupSpec) Owner() string {
	if s.Org != "" {
		return s.Org
	}
	return s.User
}

// Paused says the group starts no runners: spec.suspend, or a cap of 0.
func (s *RunnerGroupSpec) Paused() bool {
	return s.Suspend || s.MaxActiveRunners == 0
}

// RunnerCap is the most runner Jobs the group may have now: its cap, or 0
// while it is suspended (which keeps spec.maxActiveRunners for later).
func (s *RunnerGroupSpec) RunnerCap() int32 {
	if s.Suspend {
		return 0
	}
	return s.MaxActiveRunners
}

// WarmPool is the warm pool the group keeps now: spec.minIdleRunners, or
// none while it is suspended.
func (s *RunnerGroupSpec) WarmPool() int32 {
	if s.Suspend {
		return 0
	}
	return s.MinIdleRunners
}

// UsesDefaultLabels reports whether the scaler's default labels are added
// to the group's own: unless spec.defaultLabels is false.
func (s *RunnerGroupSpec) UsesDefaultLabels() bool {
	return s.DefaultLabels == nil || *s.DefaultLabels
}

// MintedRegistrationTokenKey is the key of the registration token in the
// Secret the scaler mints for a group without spec.registrationToken.
const MintedRegistrationTokenKey = "token"

// MintedRegistrationTokenSecret names the Secret that holds the registration
// token the scaler mints for the group named group. RunnerGroup names are
// at most 50 characters, so the name stays a valid Secret name.
func MintedRegistrationTokenSecret(group string) string {
	return group + "-registration-token"
}

// Key is "namespace/name": how the scaler and its read-only commands name a
// group in logs, in the assignment rule and in a runner's owner tag.
func (rg *RunnerGroup) Key() string { return rg.Namespace + "/" + rg.Name }

// RegistrationTokenRef is where the group's runners read their registration
// token: spec.registrationToken when set, else the Secret the scaler mints.
func (rg *RunnerGroup) RegistrationTokenRef() SecretRef {
	if rg.Spec.RegistrationToken != nil {
		return rg.Spec.RegistrationToken.SecretRef
	}
	return SecretRef{Name: MintedRegistrationTokenSecret(rg.Name), Key: MintedRegistrationTokenKey}
}

// MintsRegistrationToken reports whether the scaler mints the group's
// registration token (spec.registrationToken is left out).
func (rg *RunnerGroup) MintsRegistrationToken() bool {
	return rg.Spec.RegistrationToken == nil
}

// IsDockerLabel says whether a runner label runs its jobs in a Docker
// container ("name:docker://image", "name:docker"), as the runner parses
// it; a bare name is a host label.
func IsDockerLabel(l string) bool {
	_, rest, ok := strings.Cut(l, ":")
	if !ok {
		return false
	}
	schema, _, _ := strings.Cut(rest, ":")
	return schema == "docker"
}
