package giteatest

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// answer routes a request the way Gitea does: unknown path first (plain
// 404, no auth), then the token (401), then access (403/404), then the
// query (400).
func (s *Server) answer(r *http.Request) reply {
	segs, ok := apiSegments(r.URL.Path)
	if !ok {
		return reply{notFound: true}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if scope, idSeg, ok := runnerPath(segs); ok {
		return s.answerRunners(r, scope, idSeg)
	}
	if r.Method != http.MethodGet {
		return reply{notFound: true}
	}

	switch {
	case match(segs, "version"):
		return s.jsonReply(http.StatusOK, map[string]string{"version": s.version}, nil)
	case match(segs, "user"):
		acct, rep, ok := s.authenticate(r)
		if !ok {
			return rep
		}
		return s.userReply(acct)
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
		return s.listInstanceJobs(r)
	case match(segs, "orgs", "*", "actions", "jobs"):
		o := s.owners[segs[1]]
		if o == nil || !o.isOrg {
			return s.orgNotFound(segs[1])
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

// runnerPath splits a runners path into its scope's segments and the
// runner ID segment ("" for the listing).
func runnerPath(segs []string) ([]string, string, bool) {
	for _, n := range []int{0, 1} {
		if len(segs) < 2+n {
			continue
		}
		scope, tail := segs[:len(segs)-2-n], segs[len(segs)-2-n:]
		if tail[0] != "actions" || tail[1] != "runners" {
			continue
		}
		if match(scope, "admin") || match(scope, "orgs", "*") || match(scope, "repos", "*", "*") || match(scope, "user") {
			id := ""
			if n == 1 {
				id = tail[2]
			}
			return scope, id, true
		}
	}
	return nil, "", false
}

// answerRunners authorises a runners request the way Gitea's routes do and
// answers it within the scope.
func (s *Server) answerRunners(r *http.Request, scope []string, idSeg string) reply {
	acct, rep, ok := s.authenticate(r)
	if !ok {
		return rep
	}
	route := s.runnersRoute
	if idSeg == registrationTokenSeg {
		// Same rights as the scope's runners.
		route = func(r *http.Request, _ string, _ func(*Runner) bool) reply {
			return s.mintRegistrationToken(r, registrationScope(scope, acct))
		}
	}
	switch scope[0] {
	case "admin":
		if !acct.admin {
			return s.errorReply(http.StatusForbidden, "user should be the site admin")
		}
		return route(r, idSeg, func(*Runner) bool { return true })
	case "orgs":
		o := s.owners[scope[1]]
		if o == nil || !o.isOrg {
			return s.orgNotFound(scope[1])
		}
		if !acct.admin && !slices.Contains(o.org.Owners, acct.user) {
			return s.errorReply(http.StatusForbidden, "Must be an organization owner")
		}
		return route(r, idSeg, func(rn *Runner) bool { return rn.Owner == scope[1] && rn.Repo == "" })
	case "repos":
		if s.findRepo(scope[1], scope[2]) == nil {
			return s.notFoundReply("", nil)
		}
		o := s.owners[scope[1]]
		if !acct.admin && acct.user != scope[1] && !(o.isOrg && slices.Contains(o.org.Owners, acct.user)) {
			return s.errorReply(http.StatusForbidden, "user should be the owner of the repo")
		}
		return route(r, idSeg, func(rn *Runner) bool { return rn.Owner == scope[1] && rn.Repo == scope[2] })
	default: // user
		return route(r, idSeg, func(rn *Runner) bool { return rn.Owner == acct.user && rn.Repo == "" })
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

// listInstanceJobs answers the instance's listing. Gitea renders each job
// there with its run's repository, and a job whose repository is gone
// fails every page that holds it with 500.
func (s *Server) listInstanceJobs(r *http.Request) reply {
	return s.jobsPage(r, func(*Job) bool { return true }, true)
}

// listJobs answers an org's, a user's or a repository's listing. Gitea
// keeps an owner's listing to the owner's existing repositories, so a job
// whose repository is gone is not in it.
func (s *Server) listJobs(r *http.Request, inScope func(*Job) bool) reply {
	return s.jobsPage(r, func(j *Job) bool {
		_, gone := s.goneRepos[j.Owner+"/"+j.Repo]
		return inScope(j) && !gone
	}, false)
}

func (s *Server) jobsPage(r *http.Request, inScope func(*Job) bool, instance bool) reply {
	var filters []func(*Job) bool
	for _, v := range r.URL.Query()["status"] {
		f, ok := statusFilter(v)
		if !ok {
			return s.errorReply(http.StatusBadRequest, s.invalidStatus(v))
		}
		filters = append(filters, f)
	}
	var all []*Job
	for _, j := range s.jobs {
		if !inScope(j) {
			continue
		}
		j = s.stored(j)
		if len(filters) > 0 && !slices.ContainsFunc(filters, func(f func(*Job) bool) bool { return f(j) }) {
			continue
		}
		all = append(all, j)
	}
	slices.SortFunc(all, func(a, b *Job) int { return cmp.Compare(a.ID, b.ID) })
	all, rep, ok := s.orderJobs(r, all)
	if !ok {
		return rep
	}

	page, size := pageParams(r)
	items := make([]jobJSON, 0)
	for _, j := range pageOf(all, page, size) {
		if id, gone := s.goneRepos[j.Owner+"/"+j.Repo]; gone && instance {
			return s.errorReply(http.StatusInternalServerError, s.missingRepo(j, id))
		}
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
