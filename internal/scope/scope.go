// Package scope says where a group's runners register: a Gitea instance and
// a scope of it (the instance, an org, a user or a repository). The same
// value names the jobs a group serves, the runners listing the scaler reads,
// what a namespace's grant must allow, and where the ledger and a runner
// Job record a runner's registration.
//
// A Place is made only by New (or Of, Parse), which owns what each scope
// takes: the instance no owner and no repository, an org or a user its
// owner alone, a repository both. Its stored form is one string (Stored),
// the same in a runner Job's annotation and in the ledger.
package scope

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// Place is a scope of a Gitea instance. The zero Place is no place. Two
// places are equal (==) when they are the same scope of the same instance,
// however their URLs were spelt, so a Place is a map key.
type Place struct {
	url   string
	scope v1alpha1.Scope
	owner string
	repo  string
}

// New is the place of scope s on the Gitea at url. The owner is the org
// (org), the user (user) or the repository's owner (repo), and repo the
// repository's name without its owner (repo only); what the scope does not
// take is dropped, so the instance has no owner whatever the caller held.
// The URL is normalised (Instance); it may be empty where the Gitea is
// known otherwise (a client talks to one Gitea).
func New(url string, s v1alpha1.Scope, owner, repo string) Place {
	p := Place{url: Instance(url), scope: s, owner: owner, repo: repo}
	switch s {
	case v1alpha1.ScopeGlobal:
		p.owner, p.repo = "", ""
	case v1alpha1.ScopeOrg, v1alpha1.ScopeUser:
		p.repo = ""
	}
	return p
}

// Of is where a group's spec says its runners register: its Gitea and
// scope. For scope repo the owner is whichever of org or user is set (the
// CRD requires exactly one).
func Of(spec *v1alpha1.RunnerGroupSpec) Place {
	return New(spec.Gitea.URL, spec.Scope, spec.Owner(), spec.Repo)
}

// URL is the place's Gitea, normalised (Instance).
func (p Place) URL() string { return p.url }

// Scope is which kind of scope the place is.
func (p Place) Scope() v1alpha1.Scope { return p.scope }

// Owner is the org, the user or the repository's owner; empty for the
// instance.
func (p Place) Owner() string { return p.owner }

// Repo is the repository's name without its owner (scope repo only).
func (p Place) Repo() string { return p.repo }

// IsZero says whether p is no place.
func (p Place) IsZero() bool { return p == Place{} }

// On is the place of scope s with owner on p's Gitea: the scopes that
// contain p (the instance, p's owner as an org or a user).
func (p Place) On(s v1alpha1.Scope, owner string) Place { return New(p.url, s, owner, "") }

// Check says what a place lacks that its scope needs (an org without its
// org, a repository without its name), or that its scope is none of the
// four: such a place would make a listing of the wrong thing.
func (p Place) Check() error {
	switch p.scope {
	case v1alpha1.ScopeGlobal:
		return nil
	case v1alpha1.ScopeOrg, v1alpha1.ScopeUser:
		if p.owner == "" {
			return fmt.Errorf("invalid target %q: %s scope needs an owner", p.String(), p.scope)
		}
	case v1alpha1.ScopeRepo:
		if p.owner == "" || p.repo == "" {
			return fmt.Errorf("invalid target %q: repo scope needs an owner and a repo", p.String())
		}
	default:
		return fmt.Errorf("invalid target: unknown scope %q", string(p.scope))
	}
	return nil
}

// Name is what the scope names within its kind: "" for the instance, the
// org or the user ("acme"), the repository with its owner ("acme/app").
func (p Place) Name() string {
	switch p.scope {
	case v1alpha1.ScopeGlobal:
		return ""
	case v1alpha1.ScopeRepo:
		return p.owner + "/" + p.repo
	default:
		return p.owner
	}
}

// String names the scope for logs, errors and conditions, without the URL:
// "global", "org acme", "user alice", "repo acme/app".
func (p Place) String() string {
	if p.scope == v1alpha1.ScopeGlobal {
		return string(p.scope)
	}
	return string(p.scope) + " " + p.Name()
}

// Path names the scope as Gitea's API paths do: "admin", "orgs/acme",
// "users/alice", "repos/acme/app". The metrics label requests with it.
func (p Place) Path() string {
	switch p.scope {
	case v1alpha1.ScopeGlobal:
		return "admin"
	case v1alpha1.ScopeOrg:
		return "orgs/" + p.owner
	case v1alpha1.ScopeUser:
		return "users/" + p.owner
	case v1alpha1.ScopeRepo:
		return "repos/" + p.owner + "/" + p.repo
	}
	return "other"
}

// Contains says whether runners registered in p take jobs of o: both on one
// Gitea, and the instance's take every job, an org's or a user's those of
// its own repositories (and its own), a repository's only its own.
func (p Place) Contains(o Place) bool {
	switch {
	case p.url != o.url:
		return false
	case p == o, p.scope == v1alpha1.ScopeGlobal:
		return true
	case p.scope == v1alpha1.ScopeOrg || p.scope == v1alpha1.ScopeUser:
		return o.scope == v1alpha1.ScopeRepo && o.owner == p.owner
	}
	return false
}

// HoldsRepo says whether a job of repository repo ("owner/name") is the
// place's to serve: the instance holds every repository, an org or a user
// its own, a repository itself. Gitea compares the names without regard
// to case. The instance is not compared: a job's repository is named
// without it.
func (p Place) HoldsRepo(repo string) bool {
	owner, name, _ := strings.Cut(repo, "/")
	switch p.scope {
	case v1alpha1.ScopeGlobal:
		return true
	case v1alpha1.ScopeOrg, v1alpha1.ScopeUser:
		return owner != "" && strings.EqualFold(owner, p.owner)
	case v1alpha1.ScopeRepo:
		return owner != "" && strings.EqualFold(owner, p.owner) && strings.EqualFold(name, p.repo)
	}
	return false
}

// Stored is the place's stored form, in a runner Job's runner-scope
// annotation and in the ledger: the URL and the scope, e.g.
// "https://gitea.example.com org acme", "https://gitea.example.com repo
// acme/app", "https://gitea.example.com global".
func (p Place) Stored() string {
	return p.url + " " + p.String()
}

// Parse reads a Stored form back; ok is false for a string Stored did not
// make.
func Parse(stored string) (_ Place, ok bool) {
	parts := strings.Split(stored, " ")
	switch {
	case len(parts) == 2 && parts[1] == string(v1alpha1.ScopeGlobal):
		return New(parts[0], v1alpha1.ScopeGlobal, "", ""), parts[0] != ""
	case len(parts) != 3 || parts[0] == "" || parts[2] == "":
		return Place{}, false
	}
	url, s, owner := parts[0], v1alpha1.Scope(parts[1]), parts[2]
	switch s {
	case v1alpha1.ScopeRepo:
		owner, repo, found := strings.Cut(owner, "/")
		if !found || owner == "" || repo == "" {
			return Place{}, false
		}
		return New(url, s, owner, repo), true
	case v1alpha1.ScopeOrg, v1alpha1.ScopeUser:
		if strings.Contains(owner, "/") {
			return Place{}, false
		}
		return New(url, s, owner, ""), true
	}
	return Place{}, false
}

// MarshalText writes the stored form, so a Place in JSON is that string.
func (p Place) MarshalText() ([]byte, error) { return []byte(p.Stored()), nil }

// UnmarshalText reads the stored form.
func (p *Place) UnmarshalText(b []byte) error {
	q, ok := Parse(string(b))
	if !ok {
		return fmt.Errorf("not a stored place: %q", string(b))
	}
	*p = q
	return nil
}

// fields is the form ledgers were written in before a place was one
// string: a JSON object with the URL and the scope's parts.
type fields struct {
	URL   string `json:"url"`
	Scope string `json:"scope"`
	Owner string `json:"owner,omitempty"`
	Repo  string `json:"repo,omitempty"`
}

// UnmarshalJSON reads the stored form, or the object of url, scope, owner
// and repo that ledgers held before it, which is still in clusters.
func (p *Place) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		return p.UnmarshalText([]byte(s))
	}
	var f fields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*p = New(f.URL, v1alpha1.Scope(f.Scope), f.Owner, f.Repo)
	return nil
}

// Instance normalises a Gitea base URL so that two spellings of one instance
// compare equal: the scheme and host lowercased, the scheme's default port
// dropped, and the path without a trailing slash. A URL that does not parse
// is returned as it is (the CRD refuses such URLs at admission).
func Instance(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return raw
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host + strings.TrimRight(u.EscapedPath(), "/")
}

// Compare orders places by URL, then scope, owner and repository, for
// output that reads the same every pass.
func Compare(a, b Place) int {
	return cmp.Or(strings.Compare(a.url, b.url), strings.Compare(string(a.scope), string(b.scope)),
		strings.Compare(a.owner, b.owner), strings.Compare(a.repo, b.repo))
}
