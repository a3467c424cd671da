package gitea

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	sdk "code.gitea.io/sdk/gitea"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// The API status filters we ask for. See the package comment for why these
// three and no others.
const (
	statusQueued  = "queued"
	statusBlocked = "waiting"
	statusRunning = "in_progress"
)

// statusRank orders the listings by how far a job has got. A job can move
// while we read (queued -> in_progress between two listings) and then shows
// up in two of them; the later state wins. Counting such a job as running
// rather than queued errs on the side of not starting a runner twice; the
// next pass sees it as it really is.
var statusRank = map[string]int{statusBlocked: 0, statusQueued: 1, statusRunning: 2}

// allStatuses are the three filters, asked together in one request per
// page: Gitea 1.26 ORs repeated status parameters (the recording
// org-jobs-queued-inprogress.json).
var allStatuses = []string{statusQueued, statusBlocked, statusRunning}

// statusOfJob places a job from a listing that asked for several statuses
// by the status Gitea reports on it. Gitea 1.26 and 1.27 report their
// internal states as queued (ready), waiting (blocked) and in_progress
// (running; 1.27 also shows a cancelling job so, but no filter returns it);
// other servers may say "pending" or "requested" for a blocked job.
// Anything not queued or running is therefore blocked, which never starts
// a runner for it. Finished jobs are never asked for, and Gitea filters in
// the query that reads the page, so a finished job in a listing means the
// filter was dropped on the way (askedFor fails the listing).
func statusOfJob(s string) (string, bool) {
	switch s {
	case statusQueued, statusRunning:
		return s, true
	case "completed":
		return "", false
	default:
		return statusBlocked, true
	}
}

// maxConcurrentListings bounds the requests one Snapshot has in flight: the
// user scope's listings (one per repository) queue behind it, so one target
// cannot flood Gitea.
const maxConcurrentListings = 3

// client implements Client. It holds no mutable state: every request builds
// its own SDK client bound to that request's context (the SDK keeps the
// context in a field set by SetContext, so one SDK client shared by
// concurrent requests would mix up their deadlines). Building one is cheap:
// with SetGiteaVersion("") it makes no request.
type client struct {
	baseURL  string // as given, without a trailing slash
	basePath string // path prefix of baseURL (Gitea under a sub-path), for error URLs
	token    string
	opts     Options
}

// NewClient returns a Client for the Gitea server at baseURL (e.g.
// "https://gitea.example.com" or "http://gitea-http.gitea:3000"), which
// authenticates with the API token. It makes no request.
//
// The base URL must not carry credentials: the token is the only secret and
// is sent in the Authorization header, so it never ends up in a URL or error.
func NewClient(baseURL, token string, opts Options) (Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		// The *url.Error text repeats the raw URL, which may hold credentials.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("gitea: invalid base URL: %w", err)
	}
	switch {
	case u.User != nil:
		return nil, errors.New("gitea: invalid base URL: it must not carry credentials, use the token")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("gitea: invalid base URL %q: scheme must be http or https", u.Redacted())
	case u.Host == "":
		return nil, fmt.Errorf("gitea: invalid base URL %q: no host", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("gitea: invalid base URL %q: no query or fragment allowed", u.Redacted())
	}
	if token == "" {
		return nil, errors.New("gitea: empty API token: job listings need one")
	}
	return &client{
		baseURL:  strings.TrimSuffix(baseURL, "/"),
		basePath: strings.TrimSuffix(u.EscapedPath(), "/"),
		token:    token,
		opts:     opts.withDefaults(),
	}, nil
}

// newSDK builds an SDK client for one request, sending through hc.
//
// SetGiteaVersion("") turns off the SDK's server version check. Without it
// the SDK asks /api/v1/version before the first action-job call and refuses
// to go on when the answer is not a semantic version, and a Gitea built from
// source answers "development" (see testdata/version.json). Skipping it also
// saves that request. The job endpoints we use exist since Gitea 1.26.
func (c *client) newSDK(ctx context.Context, hc *http.Client) (*sdk.Client, error) {
	return sdk.NewClient(c.baseURL,
		sdk.SetGiteaVersion(""),
		sdk.SetToken(c.token),
		sdk.SetHTTPClient(hc),
		sdk.SetUserAgent(c.opts.UserAgent),
		sdk.SetContext(ctx),
	)
}

// do runs one request under its own timeout and body limit, and turns a
// failure into an *APIError naming uri.
func (c *client) do(ctx context.Context, uri string, call func(*sdk.Client) (*sdk.Response, error)) (*sdk.Response, error) {
	rctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	x := &exchange{max: c.opts.MaxResponseBytes}
	sc, err := c.newSDK(rctx, x.httpClient(c.opts.HTTPClient))
	if err != nil {
		// Not reachable with the options above; the SDK's text holds no token.
		return nil, fmt.Errorf("gitea: cannot set up SDK client: %w", err)
	}
	// The SDK reads the whole body before it returns, so cancelling rctx
	// afterwards loses nothing.
	resp, err := call(sc)
	if err != nil {
		return resp, c.classify(ctx, uri, resp, x, err)
	}
	return resp, nil
}

// requestURI is what an error names for a request: the path below the
// origin and the query, the way the SDK encodes it (keys sorted).
func (c *client) requestURI(apiPath string, q url.Values) string {
	s := c.basePath + "/api/v1" + apiPath
	if len(q) > 0 {
		s += "?" + q.Encode()
	}
	return s
}

func (c *client) pageQuery(page int, statuses ...string) url.Values {
	q := url.Values{}
	q.Set("page", strconv.Itoa(page))
	q.Set("limit", strconv.Itoa(c.opts.PageSize))
	for _, st := range statuses {
		q.Add("status", st)
	}
	return q
}

// jobSource is one job endpoint: the admin, org or repo listing.
type jobSource struct {
	apiPath string // escaped path below /api/v1, for error URLs
	repo    string // "owner/name" when the source is one repository
	list    func(*sdk.Client, sdk.ListRepoActionJobsOptions) (*sdk.ActionWorkflowJobsResponse, *sdk.Response, error)
}

func adminSource() jobSource {
	return jobSource{apiPath: "/admin/actions/jobs", list: (*sdk.Client).ListAdminActionJobs}
}

func orgSource(org string) jobSource {
	return jobSource{
		apiPath: "/orgs/" + url.PathEscape(org) + "/actions/jobs",
		list: func(sc *sdk.Client, o sdk.ListRepoActionJobsOptions) (*sdk.ActionWorkflowJobsResponse, *sdk.Response, error) {
			return sc.ListOrgActionJobs(org, o)
		},
	}
}

func repoSource(owner, repo string) jobSource {
	return jobSource{
		apiPath: "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(repo) + "/actions/jobs",
		repo:    owner + "/" + repo,
		list: func(sc *sdk.Client, o sdk.ListRepoActionJobsOptions) (*sdk.ActionWorkflowJobsResponse, *sdk.Response, error) {
			return sc.ListRepoActionJobs(owner, repo, o)
		},
	}
}

// listing is one source read with its status filters, every page. With
// one filter its jobs have that status; with several, each job's own
// status field places it (statusOfJob).
type listing struct {
	src      jobSource
	statuses []string
}

// allStatusesOf is a source's one listing of the three statuses.
func allStatusesOf(src jobSource) []listing {
	return []listing{{src, allStatuses}}
}

// Snapshot reads the target's queued, blocked and running jobs.
//
// Requests per call, with P = PageSize: global, org and repo make
// ceil(jobs/P) (at least 1), the three statuses asked together; user makes
// ceil(repos/P) repository pages plus that per non-empty repository. A
// listing whose last page is full costs no extra request, because Gitea's
// Link header says there is no next page.
//
// The user scope lists /users/{user}/repos and then each repository's jobs:
// Gitea 1.26 has no /users/{user}/actions/jobs (404), and /user/actions/jobs
// covers only the token's own user.
//
// A job ID that turns up more than once (on two pages, because the list
// shifted while we paged) is kept once, in its latest state. A job is
// classified by its status field (statusOfJob).
func (c *client) Snapshot(ctx context.Context, t scope.Place) (Snapshot, error) {
	ctx = WithTarget(ctx, t)
	if err := validate(t); err != nil {
		return Snapshot{}, err
	}
	ls, _, err := c.targetListings(ctx, t, allStatusesOf)
	if err != nil {
		return Snapshot{}, err
	}
	results, _, err := c.runListings(ctx, ls)
	if err != nil {
		return Snapshot{}, c.explainFailure(ctx, err)
	}
	return buildSnapshot(ls, results), nil
}

// targetListings are the listings that cover a target, each source's made
// by of; pages is how many pages the user scope's repository listing took
// (0 for the other scopes).
func (c *client) targetListings(ctx context.Context, t scope.Place, of func(jobSource) []listing) (ls []listing, pages int, err error) {
	switch t.Scope() {
	case ScopeGlobal:
		ls = of(adminSource())
	case ScopeOrg:
		ls = of(orgSource(t.Owner()))
	case ScopeRepo:
		ls = of(repoSource(t.Owner(), t.Repo()))
	case ScopeUser:
		var repos []repoRef
		if repos, pages, err = c.userRepos(ctx, t.Owner()); err != nil {
			return nil, 0, err
		}
		for _, r := range repos {
			ls = append(ls, of(repoSource(r.owner, r.name))...)
		}
	}
	return ls, pages, nil
}

// runListings reads every listing, at most maxConcurrentListings at a time,
// and stops at the first failure. pages is the most pages one listing took.
func (c *client) runListings(ctx context.Context, ls []listing) (results []listed, pages int, err error) {
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()

	results = make([]listed, len(ls))
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		errOnce  sync.Once
		firstErr error
	)
	next := make(chan int)
	for range min(maxConcurrentListings, len(ls)) {
		wg.Go(func() {
			for i := range next {
				got, err := c.fetchJobs(gctx, ls[i])
				if err != nil {
					// The first failure is the cause; the ones after it are
					// mostly our own cancellation of the others.
					errOnce.Do(func() { firstErr = err; cancel() })
					continue
				}
				results[i] = got
				mu.Lock()
				pages = max(pages, got.pages)
				mu.Unlock()
			}
		})
	}
feed:
	for i := range ls {
		select {
		case next <- i:
		case <-gctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()

	if firstErr != nil {
		return nil, 0, firstErr
	}
	// The caller may have given up before any worker saw it.
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("gitea: snapshot stopped: %w", err)
	}
	return results, pages, nil
}

// fetchJobs reads every page of one listing. A job whose status the
// listing did not ask for fails it (checkStatuses); a page that fails for
// one job is read around it (readAround).
func (c *client) fetchJobs(ctx context.Context, l listing) (listed, error) {
	var out listed
	uri := func(page int) string { return c.requestURI(l.src.apiPath, c.pageQuery(page, l.statuses...)) }
	keep := func(page int, resp *sdk.Response, res *sdk.ActionWorkflowJobsResponse) (int, *sdk.Response, error) {
		out.pages++
		if err := checkStatuses(l, uri(page), resp, res.Jobs); err != nil {
			return 0, resp, err
		}
		out.jobs = append(out.jobs, res.Jobs...)
		return len(res.Jobs), resp, nil
	}
	err := paginate(ctx, true, uri, func(ctx context.Context, page int) (int, *sdk.Response, error) {
		var res *sdk.ActionWorkflowJobsResponse
		if len(l.statuses) > 1 {
			res = new(sdk.ActionWorkflowJobsResponse)
			resp, err := c.getJSON(ctx, l.src.apiPath, c.pageQuery(page, l.statuses...), res)
			if readAroundable(l, err) {
				return c.readAround(ctx, l, page, err, &out)
			}
			if err != nil {
				return 0, resp, err
			}
			return keep(page, resp, res)
		}
		resp, err := c.do(ctx, uri(page), func(sc *sdk.Client) (*sdk.Response, error) {
			var (
				resp *sdk.Response
				err  error
			)
			res, resp, err = l.src.list(sc, sdk.ListRepoActionJobsOptions{
				ListOptions: sdk.ListOptions{Page: page, PageSize: c.opts.PageSize},
				Status:      l.statuses[0],
			})
			return resp, err
		})
		if readAroundable(l, err) {
			return c.readAround(ctx, l, page, err, &out)
		}
		if err != nil {
			return 0, resp, err
		}
		if res == nil { // not produced by SDK v0.25.1; an empty page is the safe reading
			out.pages++
			return 0, resp, nil
		}
		return keep(page, resp, res)
	})
	return out, err
}

// listed is what one listing read: its jobs, how many pages that took, how
// many jobs Gitea could not list and how many of those its 500 did not
// explain (readAround).
type listed struct {
	jobs        []*sdk.ActionWorkflowJob
	pages       int
	unlisted    int
	unexplained int
}

// checkStatuses fails a page holding a job whose status the listing did
// not ask for: Gitea filters in its query, so such a job means a proxy or
// a Gitea dropped the status filter, and the listing may lack the jobs it
// was asked for (a proxy that keeps one of repeated parameters would make
// busy runners look idle).
func checkStatuses(l listing, uri string, resp *sdk.Response, jobs []*sdk.ActionWorkflowJob) error {
	for _, j := range jobs {
		if j != nil && !askedFor(l.statuses, j.Status) {
			return &APIError{Kind: ErrBadResponse, URL: uri, Status: statusOf(resp),
				Message: fmt.Sprintf("job %d has status %q, which the listing did not ask for: a proxy or Gitea ignored the status filter", j.ID, j.Status)}
		}
	}
	return nil
}

// askedFor says whether a job with this status belongs in a listing that
// asked for statuses (the filter values, read as Gitea reads them: see
// statusOfJob).
func askedFor(statuses []string, status string) bool {
	placed, ok := statusOfJob(status)
	return ok && slices.Contains(statuses, placed)
}

type repoRef struct{ owner, name string }

// userRepos lists the repositories the user owns, every page.
//
// Unlike the job listings, an empty page does not end this one while Gitea's
// Link header names a next page: Gitea drops repositories the token may not
// see after it has cut the page (routers/api/v1/user/repo.go,
// listUserRepos), so a page can be empty with more pages behind it.
//
// Empty repositories are skipped: with no commit there is no workflow, so
// no job, and each one would cost three requests per pass.
func (c *client) userRepos(ctx context.Context, user string) ([]repoRef, int, error) {
	apiPath := "/users/" + url.PathEscape(user) + "/repos"
	uri := func(page int) string { return c.requestURI(apiPath, c.pageQuery(page)) }
	var (
		repos []repoRef
		seen  = map[string]bool{}
		pages int
	)
	err := paginate(ctx, false, uri, func(ctx context.Context, page int) (int, *sdk.Response, error) {
		pages++
		var list []*sdk.Repository
		resp, err := c.do(ctx, uri(page), func(sc *sdk.Client) (*sdk.Response, error) {
			var (
				resp *sdk.Response
				err  error
			)
			list, resp, err = sc.ListUserRepos(user, sdk.ListReposOptions{
				ListOptions: sdk.ListOptions{Page: page, PageSize: c.opts.PageSize},
			})
			return resp, err
		})
		if err != nil {
			return 0, resp, err
		}
		for _, r := range list {
			if r == nil || r.Empty || r.Name == "" {
				continue
			}
			owner := user
			if r.Owner != nil && r.Owner.UserName != "" {
				owner = r.Owner.UserName
			}
			key := owner + "/" + r.Name
			if !seen[key] {
				seen[key] = true
				repos = append(repos, repoRef{owner: owner, name: r.Name})
			}
		}
		return len(list), resp, nil
	})
	return repos, pages, err
}

// buildSnapshot merges the listings' jobs, keeping each ID once.
func buildSnapshot(ls []listing, results []listed) Snapshot {
	type entry struct {
		job    Job
		status string // one of the three filters
	}
	byID := map[int64]entry{}
	var s Snapshot
	for i, l := range ls {
		s.Unlisted += results[i].unlisted
		for _, j := range results[i].jobs {
			if j == nil {
				continue
			}
			status := l.statuses[0]
			if len(l.statuses) > 1 {
				var ok bool
				if status, ok = statusOfJob(j.Status); !ok {
					continue
				}
			}
			if e, ok := byID[j.ID]; ok && statusRank[e.status] >= statusRank[status] {
				continue
			}
			byID[j.ID] = entry{job: toJob(j, l.src.repo), status: status}
		}
	}
	for _, e := range byID {
		switch e.status {
		case statusQueued:
			s.Queued = append(s.Queued, e.job)
		case statusBlocked:
			s.Blocked = append(s.Blocked, e.job)
		case statusRunning:
			s.Running = append(s.Running, e.job)
		}
	}
	byJobID := func(a, b Job) int { return cmp.Compare(a.ID, b.ID) }
	slices.SortFunc(s.Queued, byJobID)
	slices.SortFunc(s.Blocked, byJobID)
	slices.SortFunc(s.Running, byJobID)
	return s
}

func toJob(j *sdk.ActionWorkflowJob, listingRepo string) Job {
	repo := repoFromURLs(j.HTMLURL, j.URL)
	if repo == "" {
		repo = listingRepo
	}
	return Job{
		ID:         j.ID,
		Labels:     slices.Clone(j.Labels),
		RunnerName: j.RunnerName,
		Repo:       repo,
		Created:    j.CreatedAt,
		Started:    Stamp(j.StartedAt),
	}
}

// repoFromURLs finds "owner/name" in a job's html_url
// (".../{owner}/{repo}/actions/runs/{run}/jobs/{job}") or, failing that, its
// API url (".../api/v1/repos/{owner}/{repo}/actions/jobs/{job}"). Both are
// read from the end or from the API marker, so a Gitea served under a
// sub-path (ROOT_URL https://host/git/) parses too.
func repoFromURLs(htmlURL, apiURL string) string {
	// Look for the "actions","runs" pair from the end instead of counting
	// segments, so a shorter or longer tail still parses.
	segs := pathSegments(htmlURL)
	for i := len(segs) - 2; i >= 2; i-- {
		if segs[i] == "actions" && segs[i+1] == "runs" {
			return segs[i-2] + "/" + segs[i-1]
		}
	}
	segs = pathSegments(apiURL)
	for i := 0; i+4 < len(segs); i++ {
		if segs[i] == "api" && segs[i+1] == "v1" && segs[i+2] == "repos" {
			return segs[i+3] + "/" + segs[i+4]
		}
	}
	return ""
}

func pathSegments(raw string) []string {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	return strings.FieldsFunc(u.Path, func(r rune) bool { return r == '/' })
}
