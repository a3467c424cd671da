package giteasetup

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Repo names a repository by its owner (an organisation or a user) and name.
type Repo struct{ Owner, Name string }

func (r Repo) String() string { return r.Owner + "/" + r.Name }

// ParseRepo reads "owner/name".
func ParseRepo(s string) (Repo, error) {
	owner, name, ok := strings.Cut(s, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return Repo{}, fmt.Errorf("%q is not owner/name", s)
	}
	return Repo{Owner: owner, Name: name}, nil
}

func (r Repo) path(segments ...string) string {
	return apiPath(append([]string{"repos", r.Owner, r.Name}, segments...)...)
}

// CreateOrg creates a public organisation.
func (c *Client) CreateOrg(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodPost, "/orgs", map[string]any{"username": name, "visibility": "public"}, nil)
}

// OrgExists says whether the organisation exists.
func (c *Client) OrgExists(ctx context.Context, name string) (bool, error) {
	return c.exists(ctx, apiPath("orgs", name))
}

// DeleteOrg deletes an organisation. Gitea refuses while it owns
// repositories, so delete those first.
func (c *Client) DeleteOrg(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodDelete, apiPath("orgs", name), nil, nil)
}

// newRepo is the repository every test and demo starts from: a first
// commit on branch main, so workflows can be pushed at once.
func newRepo(name string) map[string]any {
	return map[string]any{"name": name, "auto_init": true, "default_branch": "main"}
}

// createdRepo is what Gitea answers when it created a repository.
type createdRepo struct {
	Name  string `json:"name"`
	Owner struct {
		Login string `json:"login"`
	} `json:"owner"`
}

// CreateOrgRepo creates a repository (see newRepo) in an organisation.
func (c *Client) CreateOrgRepo(ctx context.Context, org, name string) (Repo, error) {
	var out createdRepo
	if err := c.call(ctx, http.MethodPost, apiPath("orgs", org, "repos"), newRepo(name), &out); err != nil {
		return Repo{}, err
	}
	return Repo{Owner: out.Owner.Login, Name: out.Name}, nil
}

// CreateUserRepo creates a repository (see newRepo) of the user whose
// token the client holds.
func (c *Client) CreateUserRepo(ctx context.Context, name string) (Repo, error) {
	var out createdRepo
	if err := c.call(ctx, http.MethodPost, "/user/repos", newRepo(name), &out); err != nil {
		return Repo{}, err
	}
	return Repo{Owner: out.Owner.Login, Name: out.Name}, nil
}

// RepoExists says whether the repository exists.
func (c *Client) RepoExists(ctx context.Context, r Repo) (bool, error) {
	return c.exists(ctx, r.path())
}

// DeleteRepo deletes a repository, and with it its Actions runs and jobs.
func (c *Client) DeleteRepo(ctx context.Context, r Repo) error {
	return c.call(ctx, http.MethodDelete, r.path(), nil, nil)
}

// CreateUser creates a user (an admin call) who may log in with password
// at once.
func (c *Client) CreateUser(ctx context.Context, name, email, password string) error {
	return c.call(ctx, http.MethodPost, "/admin/users", map[string]any{
		"username": name, "email": email, "password": password, "must_change_password": false,
	}, nil)
}

// CreateToken mints an access token of user with the scopes, as the user
// would in the web UI. Gitea asks for the user's password for that: call it
// on a client from WithPassword.
func (c *Client) CreateToken(ctx context.Context, user, name string, scopes ...string) (string, error) {
	var out struct {
		SHA1 string `json:"sha1"`
	}
	if err := c.call(ctx, http.MethodPost, apiPath("users", user, "tokens"), map[string]any{"name": name, "scopes": scopes}, &out); err != nil {
		return "", err
	}
	if out.SHA1 == "" {
		return "", fmt.Errorf("gitea gave user %s an empty token", user)
	}
	return out.SHA1, nil
}

// Runners is a scope runners register in: the whole instance, an
// organisation, the client's own user, or a repository.
type Runners struct{ path string }

// GlobalRunners are the instance's runners; their token takes an admin.
func GlobalRunners() Runners { return Runners{apiPath("admin", "actions", "runners")} }

// OrgRunners are an organisation's runners.
func OrgRunners(org string) Runners { return Runners{apiPath("orgs", org, "actions", "runners")} }

// UserRunners are the runners of the user whose token the client holds.
func UserRunners() Runners { return Runners{apiPath("user", "actions", "runners")} }

// RepoRunners are a repository's runners.
func RepoRunners(r Repo) Runners { return Runners{r.path("actions", "runners")} }

// RegistrationToken returns the scope's runner registration token (Gitea
// makes one the first time it is asked).
func (c *Client) RegistrationToken(ctx context.Context, scope Runners) (string, error) {
	if scope.path == "" {
		return "", errors.New("no runner scope given")
	}
	var out struct {
		Token string `json:"token"`
	}
	if err := c.call(ctx, http.MethodPost, scope.path+"/registration-token", nil, &out); err != nil {
		return "", err
	}
	if out.Token == "" {
		return "", fmt.Errorf("gitea gave an empty registration token at %s", scope.path)
	}
	return out.Token, nil
}

// PushWorkflow commits .gitea/workflows/<name> to the main branch, which
// triggers its push workflows.
func (c *Client) PushWorkflow(ctx context.Context, r Repo, name string, content []byte) error {
	return c.PushFile(ctx, r, ".gitea/workflows/"+name, content)
}

// PushFile commits a new file at path (slash-separated) to the main
// branch, which triggers the repository's push workflows.
func (c *Client) PushFile(ctx context.Context, r Repo, path string, content []byte) error {
	return c.call(ctx, http.MethodPost, r.path(append([]string{"contents"}, strings.Split(path, "/")...)...), map[string]any{
		"content": base64.StdEncoding.EncodeToString(content),
		"message": "Add " + path,
		"branch":  "main",
	}, nil)
}

// AddCollaborator gives a user a permission ("read", "write", "admin") on
// the repository.
func (c *Client) AddCollaborator(ctx context.Context, r Repo, user, permission string) error {
	return c.call(ctx, http.MethodPut, r.path("collaborators", user), map[string]any{"permission": permission}, nil)
}

// CreateRepoHook adds a webhook of type gitea to the repository: JSON
// deliveries of the workflow_job events to url, signed with secret.
func (c *Client) CreateRepoHook(ctx context.Context, r Repo, url, secret string) error {
	return c.call(ctx, http.MethodPost, r.path("hooks"), map[string]any{
		"type":   "gitea",
		"active": true,
		"events": []string{"workflow_job"},
		"config": map[string]string{"url": url, "content_type": "json", "secret": secret},
	}, nil)
}

// SetRunnerDisabled disables or enables the scope's runner id (Gitea 1.26's
// PATCH …/actions/runners/{id}), as the scaler's reaper disables one and as
// an admin could enable it again.
func (c *Client) SetRunnerDisabled(ctx context.Context, scope Runners, id int64, disabled bool) error {
	if scope.path == "" {
		return errors.New("no runner scope given")
	}
	return c.call(ctx, http.MethodPatch, scope.path+"/"+strconv.FormatInt(id, 10), map[string]any{"disabled": disabled}, nil)
}
