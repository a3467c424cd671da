package why

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Ref is the job the user asks about: a Gitea job URL or a bare job ID.
type Ref struct {
	// Base is the Gitea base URL the job URL was under; empty for a bare ID.
	Base string
	// Owner and Repo are the job's repository; empty for a bare ID.
	Owner, Repo string
	// JobID is the job's ID, the one the API's listings carry.
	JobID int64
}

// Repository is "owner/repo", or "" for a bare ID.
func (r Ref) Repository() string {
	if r.Owner == "" {
		return ""
	}
	return r.Owner + "/" + r.Repo
}

// ParseRef reads a job URL, as Gitea shows it
// (https://gitea.example.com/acme/app/actions/runs/12/jobs/34, also under
// a sub-path, with a trailing slash, query or fragment), or a bare job ID.
//
// Gitea 1.26 puts the run's and the job's IDs in these URLs, not their
// numbers within the repository: a job's html_url in the API is
// .../actions/runs/{run_id}/jobs/{id} (see the recordings in
// internal/gitea/testdata, where job 5 of alice/tool is runs/2/jobs/5). So
// the last number is the ID the job listings carry. An older Gitea whose
// URLs count jobs within a run would name another job: give the ID then.
func ParseRef(s string) (Ref, error) {
	s = strings.TrimSpace(s)
	if id, err := strconv.ParseInt(s, 10, 64); err == nil {
		if id <= 0 {
			return Ref{}, fmt.Errorf("job ID must be positive, got %d", id)
		}
		return Ref{JobID: id}, nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Ref{}, fmt.Errorf("%q is neither a job ID nor a Gitea job URL (https://gitea.example.com/OWNER/REPO/actions/runs/RUN/jobs/JOB)", s)
	}
	segs := strings.Split(strings.Trim(u.EscapedPath(), "/"), "/")
	// .../{owner}/{repo}/actions/runs/{run}/jobs/{job}
	n := len(segs)
	if n < 7 || segs[n-5] != "actions" || segs[n-4] != "runs" || segs[n-2] != "jobs" {
		return Ref{}, fmt.Errorf("%q is not a Gitea job URL: it should end in /OWNER/REPO/actions/runs/RUN/jobs/JOB", s)
	}
	id, err := strconv.ParseInt(segs[n-1], 10, 64)
	if err != nil || id <= 0 {
		return Ref{}, fmt.Errorf("%q: the job part %q is not a job ID", s, segs[n-1])
	}
	if _, err := strconv.ParseInt(segs[n-3], 10, 64); err != nil {
		return Ref{}, fmt.Errorf("%q: the run part %q is not a run ID", s, segs[n-3])
	}
	owner, err1 := url.PathUnescape(segs[n-7])
	repo, err2 := url.PathUnescape(segs[n-6])
	if err1 != nil || err2 != nil || owner == "" || repo == "" {
		return Ref{}, fmt.Errorf("%q: no OWNER/REPO before /actions/", s)
	}
	base := u.Scheme + "://" + u.Host
	if prefix := segs[:n-7]; len(prefix) > 0 {
		base += "/" + strings.Join(prefix, "/")
	}
	return Ref{Base: base, Owner: owner, Repo: repo, JobID: id}, nil
}
