// Package giteafake is an in-memory Gitea API for unit tests and fault
// injection. It serves a configurable scene (orgs, users, repositories,
// Actions jobs) over httptest on loopback, through the endpoints the scaler
// reads and with the JSON shapes, status codes, headers and pagination that
// Gitea 1.26.0 produces (internal/gitea/testdata holds the recordings it is
// checked against):
//
//	GET /api/v1/version
//	GET /api/v1/admin/actions/jobs               site admin token only (403)
//	GET /api/v1/orgs/{org}/actions/jobs          admin or org member (403)
//	GET /api/v1/repos/{owner}/{repo}/actions/jobs
//	GET /api/v1/user/actions/jobs                jobs of the token's own user
//	GET /api/v1/users/{user}/repos
//
// Job listings take repeated status filters with Gitea's meaning (pending,
// waiting, requested and action_required all select blocked jobs) and answer
// 400 {"message":"Invalid status X"} for anything else; every listing takes
// limit and page and answers with Link, X-Total-Count and (for jobs)
// total_count. Any other path gets Gitea's plain-text 404.
//
// It is not a Gitea: no write endpoints, no private repositories, no
// permissions beyond the few checks above.
package giteafake

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Job statuses as the API reports them.
const (
	StatusBlocked    = "waiting" // needs: not finished, or awaiting approval
	StatusQueued     = "queued"  // ready, waits for a runner
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed" // see Job.Conclusion
)

// Gitea's defaults for DEFAULT_PAGING_NUM and MAX_RESPONSE_ITEMS.
const (
	DefaultPageSize = 30
	MaxPageSize     = 50
)

// Org is an organization. Members may list its jobs with a non-admin token.
type Org struct {
	Name    string
	Members []string
}

// Repo is a repository owned by a user or an org.
type Repo struct {
	Owner string
	Name  string
	// Empty marks a repository without commits.
	Empty bool
}

// Job is one Actions job.
type Job struct {
	ID    int64
	Owner string // repository owner
	Repo  string // repository name
	RunID int64
	Name  string
	// Labels are the runs-on labels.
	Labels []string
	// Status is one of the Status* constants.
	Status string
	// Conclusion is set for completed jobs: success, failure, cancelled or
	// skipped.
	Conclusion string
	RunnerID   int64
	RunnerName string
	RunAttempt int64
	HeadSHA    string
	HeadBranch string
}

// Scene is everything the fake serves.
type Scene struct {
	Orgs  []Org
	Users []string
	Repos []Repo
	Jobs  []Job
}

// Fault changes how the next requests are answered.
type Fault struct {
	// Delay holds the answer back (or until the client gives up).
	Delay time.Duration
	// Status, when not 0, replaces the answer: this status with Body (or a
	// Gitea-style JSON error when Body is empty). Status 0 means the normal
	// answer after Delay.
	Status int
	Body   string
	// ContentType of Body; default "application/json;charset=utf-8".
	ContentType string
}

type fault struct {
	Fault
	left int
}

type account struct {
	user  string
	admin bool
}

type owner struct {
	id    int64
	isOrg bool
	org   Org
}

type repo struct {
	id int64
	Repo
}

// Server is a running fake Gitea. All methods are safe for concurrent use,
// also while requests are being served.
type Server struct {
	// URL is the origin, e.g. "http://127.0.0.1:41234".
	URL string

	srv *httptest.Server

	mu       sync.Mutex
	owners   map[string]*owner
	repos    []*repo
	jobs     map[int64]*Job
	tokens   map[string]account
	faults   []*fault
	requests []string
	version  string
}

// New starts a fake with an empty scene and no tokens. Close it when done.
func New() *Server {
	s := &Server{
		owners:  map[string]*owner{},
		jobs:    map[int64]*Job{},
		tokens:  map[string]account{},
		version: "development",
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server. Requests held back by a Delay fault end early.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// AddToken makes token valid for user; admin tokens may use /admin and see
// every org.
func (s *Server) AddToken(token, user string, admin bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[token] = account{user: user, admin: admin}
}

// SetVersion sets what /api/v1/version answers (default "development", what
// a Gitea built from source says).
func (s *Server) SetVersion(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version = v
}

// Load replaces the scene. Repositories get IDs 1, 2, ... in the order given
// (acme/app then alice/tool gives the IDs of the recordings); orgs, then
// users, get their own IDs the same way. Tokens, faults and the request log
// are kept.
func (s *Server) Load(sc Scene) error {
	owners := map[string]*owner{}
	var id int64
	for _, o := range sc.Orgs {
		if owners[o.Name] != nil {
			return fmt.Errorf("giteafake: duplicate owner %q", o.Name)
		}
		id++
		owners[o.Name] = &owner{id: id, isOrg: true, org: Org{Name: o.Name, Members: slices.Clone(o.Members)}}
	}
	for _, u := range sc.Users {
		if owners[u] != nil {
			return fmt.Errorf("giteafake: duplicate owner %q", u)
		}
		id++
		owners[u] = &owner{id: id}
	}
	var repos []*repo
	seen := map[string]bool{}
	for i, r := range sc.Repos {
		if owners[r.Owner] == nil {
			return fmt.Errorf("giteafake: repo %s/%s: unknown owner", r.Owner, r.Name)
		}
		if seen[r.Owner+"/"+r.Name] {
			return fmt.Errorf("giteafake: duplicate repo %s/%s", r.Owner, r.Name)
		}
		seen[r.Owner+"/"+r.Name] = true
		repos = append(repos, &repo{id: int64(i + 1), Repo: r})
	}
	jobs := map[int64]*Job{}
	for _, j := range sc.Jobs {
		if err := checkJob(j, seen); err != nil {
			return err
		}
		if jobs[j.ID] != nil {
			return fmt.Errorf("giteafake: duplicate job %d", j.ID)
		}
		j.Labels = slices.Clone(j.Labels)
		jobs[j.ID] = &j
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owners, s.repos, s.jobs = owners, repos, jobs
	return nil
}

func checkJob(j Job, repos map[string]bool) error {
	if j.ID <= 0 {
		return fmt.Errorf("giteafake: job ID %d must be positive", j.ID)
	}
	if !repos[j.Owner+"/"+j.Repo] {
		return fmt.Errorf("giteafake: job %d: unknown repo %s/%s", j.ID, j.Owner, j.Repo)
	}
	switch j.Status {
	case StatusBlocked, StatusQueued, StatusInProgress, StatusCompleted:
		return nil
	}
	return fmt.Errorf("giteafake: job %d: unknown status %q", j.ID, j.Status)
}

// AddJob adds a job, or replaces the job with the same ID.
func (s *Server) AddJob(j Job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	known := map[string]bool{}
	for _, r := range s.repos {
		known[r.Owner+"/"+r.Name] = true
	}
	if err := checkJob(j, known); err != nil {
		return err
	}
	j.Labels = slices.Clone(j.Labels)
	s.jobs[j.ID] = &j
	return nil
}

// SetJobStatus moves a job to status, as a runner or Gitea would between two
// scaler passes. runnerName is set as given (with a runner ID derived from
// the job ID when not empty); use "" for a job that no runner holds.
func (s *Server) SetJobStatus(id int64, status, runnerName string) error {
	return s.UpdateJob(id, func(j *Job) {
		j.Status = status
		j.RunnerName = runnerName
		j.RunnerID = 0
		if runnerName != "" {
			j.RunnerID = 1000 + id
		}
		if status == StatusCompleted && j.Conclusion == "" {
			j.Conclusion = "success"
		}
		if status != StatusCompleted {
			j.Conclusion = ""
		}
	})
}

// UpdateJob changes a job in place under the fake's lock.
func (s *Server) UpdateJob(id int64, change func(*Job)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	if j == nil {
		return fmt.Errorf("giteafake: no job %d", id)
	}
	c := *j
	c.Labels = slices.Clone(j.Labels)
	change(&c)
	switch c.Status {
	case StatusBlocked, StatusQueued, StatusInProgress, StatusCompleted:
	default:
		return fmt.Errorf("giteafake: job %d: unknown status %q", id, c.Status)
	}
	c.ID, c.Owner, c.Repo = j.ID, j.Owner, j.Repo
	*j = c
	return nil
}

// RemoveJob deletes a job (Gitea deletes jobs with their run).
func (s *Server) RemoveJob(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.jobs, id)
}

// InjectFault applies f to the next n requests, whatever their path. Faults
// injected one after the other apply one after the other.
func (s *Server) InjectFault(n int, f Fault) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &fault{Fault: f, left: n})
}

// RequestCount is how many requests arrived since the start or the last
// ResetRequests.
func (s *Server) RequestCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Requests lists the requests since the start or the last ResetRequests as
// "GET /api/v1/...?query", in arrival order.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// ResetRequests clears the request log.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// reply is an answer computed under the lock and written after it.
type reply struct {
	status int
	header map[string]string
	body   []byte
	// notFound answers with net/http's plain-text 404, which is what Gitea's
	// router gives for a path it does not know.
	notFound bool
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	f := s.arrive(r)
	if f != nil && f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	var rep reply
	if f != nil && f.Status != 0 {
		rep = s.faultReply(*f)
	} else {
		rep = s.answer(r)
	}
	if rep.notFound {
		http.NotFound(w, r)
		return
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body)
}

// arrive logs the request and takes the fault that applies to it, if any.
func (s *Server) arrive(r *http.Request) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r.Method+" "+r.URL.RequestURI())
	if len(s.faults) == 0 {
		return nil
	}
	f := s.faults[0]
	f.left--
	if f.left == 0 {
		s.faults = s.faults[1:]
	}
	c := f.Fault
	return &c
}

const jsonType = "application/json;charset=utf-8"

func (s *Server) faultReply(f Fault) reply {
	if f.Body == "" {
		return s.errorReply(f.Status, fmt.Sprintf("injected fault: HTTP %d", f.Status))
	}
	ct := cmp.Or(f.ContentType, jsonType)
	return reply{status: f.Status, header: map[string]string{"Content-Type": ct}, body: []byte(f.Body)}
}

func (s *Server) jsonReply(status int, v any, header map[string]string) reply {
	body, err := json.Marshal(v)
	if err != nil {
		return reply{status: http.StatusInternalServerError, body: []byte(err.Error())}
	}
	h := map[string]string{"Content-Type": jsonType}
	for k, v := range header {
		h[k] = v
	}
	return reply{status: status, header: h, body: body}
}

// errorReply is Gitea's APIError body: {"message":..., "url": swagger}.
func (s *Server) errorReply(status int, msg string) reply {
	return s.jsonReply(status, map[string]any{"message": msg, "url": s.URL + "/api/swagger"}, nil)
}

// notFoundReply is Gitea's APIErrorNotFound body, which also has "errors".
func (s *Server) notFoundReply(msg string, errs []string) reply {
	return s.jsonReply(http.StatusNotFound, map[string]any{
		"message": cmp.Or(msg, "not found"),
		"url":     s.URL + "/api/swagger",
		"errors":  errs,
	}, nil)
}

// answer routes a request the way Gitea does: unknown path first (plain
// 404, no auth), then the token (401), then access (403/404), then the
// query (400).
func (s *Server) answer(r *http.Request) reply {
	segs, ok := apiSegments(r.URL.Path)
	if !ok || r.Method != http.MethodGet {
		return reply{notFound: true}
	}
	s.mu.Lock()
	defer s.mu.Unlock()

	switch {
	case match(segs, "version"):
		return s.jsonReply(http.StatusOK, map[string]string{"version": s.version}, nil)
	case match(segs, "admin", "actions", "jobs"),
		match(segs, "orgs", "*", "actions", "jobs"),
		match(segs, "repos", "*", "*", "actions", "jobs"),
		match(segs, "user", "actions", "jobs"),
		match(segs, "users", "*", "repos"):
	default:
		return reply{notFound: true}
	}

	acct, rep, ok := s.authenticate(r)
	if !ok {
		return rep
	}
	switch {
	case match(segs, "admin", "actions", "jobs"):
		if !acct.admin {
			return s.errorReply(http.StatusForbidden, "user should be the site admin")
		}
		return s.listJobs(r, func(*Job) bool { return true })
	case match(segs, "orgs", "*", "actions", "jobs"):
		o := s.owners[segs[1]]
		if o == nil || !o.isOrg {
			return s.notFoundReply("GetOrgByName", []string{fmt.Sprintf("org does not exist [id: 0, name: %s]", segs[1])})
		}
		if !acct.admin && !slices.Contains(o.org.Members, acct.user) {
			return s.errorReply(http.StatusForbidden, "Must be an organization member")
		}
		return s.listJobs(r, func(j *Job) bool { return j.Owner == segs[1] })
	case match(segs, "repos", "*", "*", "actions", "jobs"):
		if s.findRepo(segs[1], segs[2]) == nil {
			return s.notFoundReply("", nil)
		}
		return s.listJobs(r, func(j *Job) bool { return j.Owner == segs[1] && j.Repo == segs[2] })
	case match(segs, "user", "actions", "jobs"):
		return s.listJobs(r, func(j *Job) bool { return j.Owner == acct.user })
	default: // users/{user}/repos
		if s.owners[segs[1]] == nil {
			return s.errorReply(http.StatusNotFound, fmt.Sprintf("user redirect does not exist [name: %s]", segs[1]))
		}
		return s.listRepos(r, segs[1])
	}
}

func (s *Server) authenticate(r *http.Request) (account, reply, bool) {
	h := r.Header.Get("Authorization")
	var tok string
	for _, p := range []string{"token ", "Bearer ", "bearer "} {
		if t, ok := strings.CutPrefix(h, p); ok {
			tok = strings.TrimSpace(t)
		}
	}
	if tok == "" {
		return account{}, s.errorReply(http.StatusUnauthorized, "token is required"), false
	}
	acct, ok := s.tokens[tok]
	if !ok {
		return account{}, s.errorReply(http.StatusUnauthorized, "invalid username, password or token"), false
	}
	return acct, reply{}, true
}

func (s *Server) findRepo(owner, name string) *repo {
	for _, r := range s.repos {
		if r.Owner == owner && r.Name == name {
			return r
		}
	}
	return nil
}

// statusFilter is Gitea's mapping from an API status filter to the jobs it
// selects (routers/api/v1/shared/action.go, convertToInternal).
func statusFilter(v string) (func(*Job) bool, bool) {
	is := func(status, conclusion string) func(*Job) bool {
		return func(j *Job) bool {
			return j.Status == status && (conclusion == "" || j.Conclusion == conclusion)
		}
	}
	switch v {
	case "pending", "waiting", "requested", "action_required":
		return is(StatusBlocked, ""), true
	case "queued":
		return is(StatusQueued, ""), true
	case "in_progress":
		return is(StatusInProgress, ""), true
	case "completed":
		return is(StatusCompleted, ""), true
	case "failure", "success":
		return is(StatusCompleted, v), true
	case "skipped", "neutral":
		return is(StatusCompleted, "skipped"), true
	case "cancelled", "timed_out":
		return is(StatusCompleted, "cancelled"), true
	}
	return nil, false
}

func (s *Server) listJobs(r *http.Request, inScope func(*Job) bool) reply {
	var filters []func(*Job) bool
	for _, v := range r.URL.Query()["status"] {
		f, ok := statusFilter(v)
		if !ok {
			return s.errorReply(http.StatusBadRequest, "Invalid status "+v)
		}
		filters = append(filters, f)
	}
	var all []*Job
	for _, j := range s.jobs {
		if !inScope(j) {
			continue
		}
		if len(filters) > 0 && !slices.ContainsFunc(filters, func(f func(*Job) bool) bool { return f(j) }) {
			continue
		}
		all = append(all, j)
	}
	slices.SortFunc(all, func(a, b *Job) int { return cmp.Compare(a.ID, b.ID) })

	page, size := pageParams(r)
	items := make([]jobJSON, 0)
	for _, j := range pageOf(all, page, size) {
		items = append(items, s.jobJSON(j))
	}
	return s.jsonReply(http.StatusOK,
		map[string]any{"jobs": items, "total_count": len(all)},
		s.pageHeaders(r, len(all), size))
}

func (s *Server) listRepos(r *http.Request, ownerName string) reply {
	var all []*repo
	for _, rp := range s.repos {
		if rp.Owner == ownerName {
			all = append(all, rp)
		}
	}
	page, size := pageParams(r)
	o := s.owners[ownerName]
	items := make([]repoJSON, 0)
	for _, rp := range pageOf(all, page, size) {
		items = append(items, s.repoJSON(rp, o))
	}
	return s.jsonReply(http.StatusOK, items, s.pageHeaders(r, len(all), size))
}

// pageParams reads page and limit like Gitea: page at least 1, limit
// DefaultPageSize when missing or not positive, at most MaxPageSize.
func pageParams(r *http.Request) (page, size int) {
	q := r.URL.Query()
	page, _ = strconv.Atoi(q.Get("page"))
	size, _ = strconv.Atoi(q.Get("limit"))
	page = max(page, 1)
	switch {
	case size <= 0:
		size = DefaultPageSize
	case size > MaxPageSize:
		size = MaxPageSize
	}
	return page, size
}

func pageOf[T any](all []T, page, size int) []T {
	start := (page - 1) * size
	if start >= len(all) {
		return nil
	}
	return all[start:min(start+size, len(all))]
}

// pageHeaders are Gitea's Link and X-Total-Count. Link follows Gitea's
// paginator: the current page is clamped to the last one, rel="next" while
// current*size < total, rel="last" unless on the last page, rel="first" and
// rel="prev" unless on the first; each link is the request URL with page
// replaced (query keys sorted).
func (s *Server) pageHeaders(r *http.Request, total, size int) map[string]string {
	h := map[string]string{"X-Total-Count": strconv.Itoa(total)}
	asked, _ := strconv.Atoi(r.URL.Query().Get("page"))
	pages := (total + size - 1) / size
	cur := max(min(asked, pages), 1)
	hasNext := cur*size < total
	link := func(page int, rel string) string {
		u := *r.URL
		q := u.Query()
		q.Set("page", strconv.Itoa(page))
		u.RawQuery = q.Encode()
		return fmt.Sprintf("<%s%s>; rel=%q", s.URL, u.RequestURI(), rel)
	}
	var links []string
	if hasNext {
		links = append(links, link(cur+1, "next"))
		links = append(links, link(pages, "last"))
	}
	if cur > 1 {
		links = append(links, link(1, "first"))
		links = append(links, link(cur-1, "prev"))
	}
	if len(links) > 0 {
		h["Link"] = strings.Join(links, ",")
	}
	return h
}

// epoch is what Gitea 1.26 writes for a time that is not set.
var epoch = time.Unix(0, 0).UTC()

// created is the creation time every fake job and repo reports.
var created = time.Date(2026, 11, 21, 5, 36, 24, 0, time.UTC)

type jobJSON struct {
	ID          int64     `json:"id"`
	URL         string    `json:"url"`
	HTMLURL     string    `json:"html_url"`
	RunID       int64     `json:"run_id"`
	RunURL      string    `json:"run_url"`
	Name        string    `json:"name"`
	Labels      []string  `json:"labels"`
	RunAttempt  int64     `json:"run_attempt"`
	HeadSHA     string    `json:"head_sha"`
	HeadBranch  string    `json:"head_branch,omitempty"`
	Status      string    `json:"status"`
	Conclusion  string    `json:"conclusion,omitempty"`
	RunnerID    int64     `json:"runner_id,omitempty"`
	RunnerName  string    `json:"runner_name,omitempty"`
	Steps       []any     `json:"steps"`
	CreatedAt   time.Time `json:"created_at"`
	StartedAt   time.Time `json:"started_at"`
	CompletedAt time.Time `json:"completed_at"`
}

func (s *Server) jobJSON(j *Job) jobJSON {
	repoPath := url.PathEscape(j.Owner) + "/" + url.PathEscape(j.Repo)
	runID := cmp.Or(j.RunID, 1)
	labels := slices.Clone(j.Labels)
	if labels == nil {
		labels = []string{}
	}
	return jobJSON{
		ID:          j.ID,
		URL:         fmt.Sprintf("%s/api/v1/repos/%s/actions/jobs/%d", s.URL, repoPath, j.ID),
		HTMLURL:     fmt.Sprintf("%s/%s/actions/runs/%d/jobs/%d", s.URL, repoPath, runID, j.ID),
		RunID:       runID,
		RunURL:      fmt.Sprintf("%s/api/v1/repos/%s/actions/runs/%d", s.URL, repoPath, runID),
		Name:        j.Name,
		Labels:      labels,
		RunAttempt:  j.RunAttempt,
		HeadSHA:     j.HeadSHA,
		HeadBranch:  cmp.Or(j.HeadBranch, "main"),
		Status:      j.Status,
		Conclusion:  j.Conclusion,
		RunnerID:    j.RunnerID,
		RunnerName:  j.RunnerName,
		Steps:       []any{},
		CreatedAt:   created,
		StartedAt:   epoch,
		CompletedAt: epoch,
	}
}

type userJSON struct {
	ID       int64  `json:"id"`
	Login    string `json:"login"`
	UserName string `json:"username"`
}

type repoJSON struct {
	ID            int64     `json:"id"`
	Owner         userJSON  `json:"owner"`
	Name          string    `json:"name"`
	FullName      string    `json:"full_name"`
	Empty         bool      `json:"empty"`
	Private       bool      `json:"private"`
	Fork          bool      `json:"fork"`
	Archived      bool      `json:"archived"`
	HTMLURL       string    `json:"html_url"`
	URL           string    `json:"url"`
	CloneURL      string    `json:"clone_url"`
	DefaultBranch string    `json:"default_branch"`
	HasActions    bool      `json:"has_actions"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

func (s *Server) repoJSON(r *repo, o *owner) repoJSON {
	full := r.Owner + "/" + r.Name
	esc := url.PathEscape(r.Owner) + "/" + url.PathEscape(r.Name)
	return repoJSON{
		ID:            r.id,
		Owner:         userJSON{ID: o.id, Login: r.Owner, UserName: r.Owner},
		Name:          r.Name,
		FullName:      full,
		Empty:         r.Empty,
		HTMLURL:       s.URL + "/" + esc,
		URL:           s.URL + "/api/v1/repos/" + esc,
		CloneURL:      s.URL + "/" + esc + ".git",
		DefaultBranch: "main",
		HasActions:    true,
		CreatedAt:     created,
		UpdatedAt:     created,
	}
}

// apiSegments splits a path below /api/v1/ into its segments.
func apiSegments(p string) ([]string, bool) {
	rest, ok := strings.CutPrefix(p, "/api/v1/")
	if !ok {
		return nil, false
	}
	return strings.Split(strings.TrimSuffix(rest, "/"), "/"), true
}

// match reports whether segs has the pattern's shape; "*" matches any one
// non-empty segment.
func match(segs []string, pattern ...string) bool {
	if len(segs) != len(pattern) {
		return false
	}
	for i, p := range pattern {
		if segs[i] == "" || (p != "*" && p != segs[i]) {
			return false
		}
	}
	return true
}
