package gitea

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	sdk "code.gitea.io/sdk/gitea"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// Runner is a runner registered with Gitea, as the lifecycle step needs it.
type Runner struct {
	ID   int64
	Name string
	// Online is Gitea's status: the runner's last recorded contact is less
	// than a minute old. Gitea 1.26 records every contact; 1.27 at most
	// every 30 s (routers/api/actions/runner/interceptor.go), so there a
	// runner that stopped shows offline 30 to 60 s after its last contact.
	Online bool
	// Disabled runners are given no task.
	Disabled bool
	// Ephemeral runners take one task and are then removed by Gitea.
	Ephemeral bool
	// Busy is Gitea's busy flag: the runner reported on a task in the last
	// ten seconds. Only its presence means something (see Runners).
	Busy bool
}

// Runners manages the runners registered in a target's scope, through
// Gitea's runners API (/api/v1/{admin,orgs/{org},repos/{owner}/{repo},user}
// /actions/runners). A user target reaches /user/actions/runners, the
// runners of the token's own user: Gitea has no runners endpoint for
// another user. Implementations are safe for concurrent use.
//
// Whether a runner runs a job is told by an in_progress job carrying its
// name (Snapshot.Running). Gitea's busy flag is no proof of the contrary:
// it says only that the runner reported on a task in the last ten seconds,
// and a runner that runs a task can go without reporting
// (testdata/repo-runners-while-running.json). But it is the one sign of a
// runner still at work on a job no listing shows: a job cancelled while its
// runner runs its cleanup steps (Gitea 1.27's cancelling state, which no
// status filter selects; in 1.26 the job is completed at once while the
// runner still winds down). So busy may keep a runner, never remove one.
type Runners interface {
	// ListRunners lists the scope's runners, every page.
	ListRunners(ctx context.Context, t scope.Place) ([]Runner, error)
	// DisableRunner makes Gitea give the runner no further task. A runner
	// that is gone is an error of kind ErrNotFound.
	DisableRunner(ctx context.Context, t scope.Place, id int64) error
	// DeleteRunner removes the registration. Gitea does it even while the
	// runner runs a task (testdata/repo-runner-delete-while-running.json),
	// so callers check first. A runner that is gone is not an error.
	DeleteRunner(ctx context.Context, t scope.Place, id int64) error
	// InProgress lists the target's in_progress jobs, every page, read so
	// that no job that runs throughout the call is missed: what a runner
	// is deleted on (see client.InProgress). An error means "not known".
	InProgress(ctx context.Context, t scope.Place) ([]Job, error)
}

// runnerScope is one scope's runner endpoints.
type runnerScope struct {
	apiPath string // escaped path of the listing below /api/v1
	list    func(*sdk.Client, sdk.ListActionRunnersOptions) (*sdk.ActionRunnersResponse, *sdk.Response, error)
	update  func(*sdk.Client, int64, sdk.EditActionRunnerOption) (*sdk.ActionRunner, *sdk.Response, error)
	delete  func(*sdk.Client, int64) (*sdk.Response, error)
}

func runnerScopeOf(t scope.Place) (runnerScope, error) {
	if err := validate(t); err != nil {
		return runnerScope{}, err
	}
	switch t.Scope() {
	case ScopeGlobal:
		return runnerScope{
			apiPath: "/admin/actions/runners",
			list:    (*sdk.Client).ListAdminActionRunners,
			update:  (*sdk.Client).UpdateAdminActionRunner,
			delete:  (*sdk.Client).DeleteAdminActionRunner,
		}, nil
	case ScopeOrg:
		org := t.Owner()
		return runnerScope{
			apiPath: "/orgs/" + url.PathEscape(org) + "/actions/runners",
			list: func(sc *sdk.Client, o sdk.ListActionRunnersOptions) (*sdk.ActionRunnersResponse, *sdk.Response, error) {
				return sc.ListOrgActionRunners(org, o)
			},
			update: func(sc *sdk.Client, id int64, o sdk.EditActionRunnerOption) (*sdk.ActionRunner, *sdk.Response, error) {
				return sc.UpdateOrgActionRunner(org, id, o)
			},
			delete: func(sc *sdk.Client, id int64) (*sdk.Response, error) { return sc.DeleteOrgActionRunner(org, id) },
		}, nil
	case ScopeRepo:
		owner, repo := t.Owner(), t.Repo()
		return runnerScope{
			apiPath: "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(repo) + "/actions/runners",
			list: func(sc *sdk.Client, o sdk.ListActionRunnersOptions) (*sdk.ActionRunnersResponse, *sdk.Response, error) {
				return sc.ListRepoActionRunners(owner, repo, o)
			},
			update: func(sc *sdk.Client, id int64, o sdk.EditActionRunnerOption) (*sdk.ActionRunner, *sdk.Response, error) {
				return sc.UpdateRepoActionRunner(owner, repo, id, o)
			},
			delete: func(sc *sdk.Client, id int64) (*sdk.Response, error) {
				return sc.DeleteRepoActionRunner(owner, repo, id)
			},
		}, nil
	default: // ScopeUser: only the token's own user has a runners endpoint.
		return runnerScope{
			apiPath: "/user/actions/runners",
			list:    (*sdk.Client).ListUserActionRunners,
			update:  (*sdk.Client).UpdateUserActionRunner,
			delete:  (*sdk.Client).DeleteUserActionRunner,
		}, nil
	}
}

// ListRunners implements Runners.
//
// Gitea 1.26 pages the runners listing without a Link or X-Total-Count
// header (testdata/org-runners.json): only the body's total_count says
// whether more pages follow, so the listing goes on while a page is not
// empty and fewer runners than total_count were seen.
func (c *client) ListRunners(ctx context.Context, t scope.Place) ([]Runner, error) {
	ctx = WithTarget(ctx, t)
	rs, err := runnerScopeOf(t)
	if err != nil {
		return nil, err
	}
	var out []Runner
	for page := 1; page <= maxPages; page++ {
		var res *sdk.ActionRunnersResponse
		uri := c.requestURI(rs.apiPath, c.pageQuery(page, ""))
		_, err := c.do(ctx, uri, func(sc *sdk.Client) (*sdk.Response, error) {
			var (
				resp *sdk.Response
				err  error
			)
			res, resp, err = rs.list(sc, sdk.ListActionRunnersOptions{ListOptions: sdk.ListOptions{Page: page, PageSize: c.opts.PageSize}})
			return resp, err
		})
		if err != nil {
			return nil, c.explainFailure(ctx, err)
		}
		if res == nil || len(res.Runners) == 0 {
			return out, nil
		}
		for _, r := range res.Runners {
			if r != nil {
				out = append(out, Runner{ID: r.ID, Name: r.Name, Online: r.Status == "online", Disabled: r.Disabled, Ephemeral: r.Ephemeral, Busy: r.Busy})
			}
		}
		if int64(len(out)) >= res.TotalCount {
			return out, nil
		}
	}
	return nil, &APIError{Kind: ErrBadResponse, URL: c.requestURI(rs.apiPath, nil), Message: fmt.Sprintf("more than %d pages", maxPages)}
}

// DisableRunner implements Runners.
func (c *client) DisableRunner(ctx context.Context, t scope.Place, id int64) error {
	ctx = WithTarget(ctx, t)
	rs, err := runnerScopeOf(t)
	if err != nil {
		return err
	}
	disabled := true
	_, err = c.doMethod(ctx, http.MethodPatch, c.requestURI(runnerPath(rs, id), nil), func(sc *sdk.Client) (*sdk.Response, error) {
		_, resp, err := rs.update(sc, id, sdk.EditActionRunnerOption{Disabled: &disabled})
		return resp, err
	})
	return err
}

// DeleteRunner implements Runners.
func (c *client) DeleteRunner(ctx context.Context, t scope.Place, id int64) error {
	ctx = WithTarget(ctx, t)
	rs, err := runnerScopeOf(t)
	if err != nil {
		return err
	}
	_, err = c.doMethod(ctx, http.MethodDelete, c.requestURI(runnerPath(rs, id), nil), func(sc *sdk.Client) (*sdk.Response, error) {
		return rs.delete(sc, id)
	})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

func runnerPath(rs runnerScope, id int64) string {
	return rs.apiPath + "/" + strconv.FormatInt(id, 10)
}

// doMethod is do for a request that is not a GET, so its errors say so.
func (c *client) doMethod(ctx context.Context, method, uri string, call func(*sdk.Client) (*sdk.Response, error)) (*sdk.Response, error) {
	resp, err := c.do(ctx, uri, call)
	var ae *APIError
	if errors.As(err, &ae) {
		ae.Method = method
	}
	return resp, err
}
