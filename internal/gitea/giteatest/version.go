package giteatest

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
)

// Version is the Gitea release whose answers the fake gives where releases
// differ in what the scaler reads.
type Version string

// The releases the fake can answer as.
const (
	// Gitea126 is the default. It is what the bed runs and what
	// internal/gitea/testdata recorded; the fake is checked against those
	// recordings.
	Gitea126 Version = "1.26"
	// Gitea127 follows the source of code.gitea.io/gitea v1.27.3, read and
	// not run (it cannot be built here); internal/gitea/testdata/README.md
	// lists the differences with the files and functions they come from.
	Gitea127 Version = "1.27"
)

// Versions lists the releases the fake answers as, oldest first, for tests
// that run once per release.
func Versions() []Version { return []Version{Gitea126, Gitea127} }

// StatusCancelling is Gitea 1.27's state of a running job whose run was
// cancelled while its runner, which declared the "cancelling" capability,
// finishes its cleanup steps (models/actions/task.go, StopTask). Gitea
// 1.26 has no such state: there a cancel ends the job at once, so the fake
// answering as 1.26 reports such a job as completed and cancelled.
const StatusCancelling = "cancelling"

// AnswerAs makes the fake answer as the given release from the next
// request on.
func (s *Server) AnswerAs(v Version) error {
	if !slices.Contains(Versions(), v) {
		return fmt.Errorf("giteatest: unknown Gitea version %q", v)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers = v
	return nil
}

// is127 says whether the fake answers as Gitea 1.27. The caller holds mu.
func (s *Server) is127() bool { return s.answers == Gitea127 }

// stored is a job as the release keeps it: Gitea 1.26 has no cancelling
// state, so a cancelling job is already cancelled there. Filters and
// answers read this view.
func (s *Server) stored(j *Job) *Job {
	if j.Status != StatusCancelling || s.is127() {
		return j
	}
	c := *j
	c.Status, c.Conclusion = StatusCompleted, "cancelled"
	return &c
}

// apiStatus is the status field the jobs API and webhooks show:
// Gitea 1.27 reports a cancelling job as in_progress
// (services/convert/convert.go, ToActionsStatus), while no status filter
// selects it: "in_progress" selects only the running state
// (routers/api/v1/shared/action.go, convertToInternal).
func apiStatus(j *Job) string {
	if j.Status == StatusCancelling {
		return StatusInProgress
	}
	return j.Status
}

// apiConclusion is the conclusion field: none while a job is cancelling.
func apiConclusion(j *Job) string {
	if j.Status == StatusCancelling {
		return ""
	}
	return j.Conclusion
}

// invalidStatus is the message of the 400 for an unknown status filter:
// Gitea 1.26 wraps "Invalid status X" in an error, 1.27 answers the
// InvalidArgument error's own text (shared.ListJobs).
func (s *Server) invalidStatus(v string) string {
	if s.is127() {
		return "invalid status " + v
	}
	return "Invalid status " + v
}

// orgNotFound is the 404 for an unknown org: Gitea 1.26's orgAssignment
// names the lookup and its error; 1.27's answers a bare "not found"
// (routers/api/v1/api.go, orgAssignment).
func (s *Server) orgNotFound(org string) reply {
	if s.is127() {
		return s.notFoundReply("", nil)
	}
	return s.notFoundReply("GetOrgByName", []string{fmt.Sprintf("org does not exist [id: 0, name: %s]", org)})
}

// runnerNotFound is the 404 for a runner ID that does not exist: Gitea
// 1.27 answers the lookup error's text through APIErrorAuto
// (routers/api/v1/shared/runners.go, getRunnerByID; models/actions/runner.go,
// GetRunnerByID).
func (s *Server) runnerNotFound(id int64) reply {
	if s.is127() {
		return s.errorReply(http.StatusNotFound, fmt.Sprintf("runner with id %d: resource does not exist", id))
	}
	return s.notFoundReply("Runner not found", nil)
}

// notFoundBody is Gitea's APIErrorNotFound body. 1.26 adds the "errors"
// list (null when empty); 1.27 has only message and url
// (services/context/api.go, APIErrorNotFound).
func (s *Server) notFoundBody(msg string, errs []string) map[string]any {
	body := map[string]any{"message": cmp.Or(msg, "not found"), "url": s.URL + "/api/swagger"}
	if !s.is127() {
		body["errors"] = errs
	}
	return body
}

// orderJobs applies Gitea 1.27's sort and order parameters of the jobs
// listings (only sort=id, order asc or desc; 422 for anything else;
// routers/api/v1/utils/sort.go, ResolveSortOrder). Gitea 1.26 ignores them.
// all is sorted by ID ascending, the order both releases list in by
// default (1.27 says so in its query, 1.26's database returned it so).
func (s *Server) orderJobs(r *http.Request, all []*Job) ([]*Job, reply, bool) {
	q := r.URL.Query()
	mode := q.Get("sort")
	if !s.is127() || mode == "" {
		return all, reply{}, true
	}
	order := cmp.Or(q.Get("order"), "asc")
	if order != "asc" && order != "desc" {
		return nil, s.errorReply(http.StatusUnprocessableEntity, fmt.Sprintf("Invalid sort order: %q", order)), false
	}
	if mode != "id" {
		return nil, s.errorReply(http.StatusUnprocessableEntity, fmt.Sprintf("Invalid sort mode: %q", mode)), false
	}
	if order == "desc" {
		all = slices.Clone(all)
		slices.Reverse(all)
	}
	return all, reply{}, true
}

// reorderRunners puts a listing in Gitea 1.27's default order
// (models/actions/runner.go, FindRunnerOptions.ToOrders): active runners,
// then idle, then offline; within each, enabled before disabled, then the
// most recently online (the fake keeps no times, so it skips this), then
// by ID. The caller sorted it the 1.26 way; as 1.26 it stays so.
func (s *Server) reorderRunners(all []*Runner) {
	if !s.is127() {
		return
	}
	rank := func(r *Runner) int {
		switch {
		case !r.Online:
			return 2
		case r.Active:
			return 0
		}
		return 1
	}
	slices.SortStableFunc(all, func(a, b *Runner) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		if a.Disabled != b.Disabled {
			if b.Disabled {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// Rerun reruns a finished job, as the rerun button does, and returns the ID
// the job is queued under. Gitea 1.26 resets the job in place: same ID,
// next attempt. Gitea 1.27 keeps the finished job and inserts a copy for
// the new attempt under a new ID (services/actions/rerun.go,
// execRerunPlan and cloneRunJobForAttempt), so the rerun is a job the
// scaler has never seen.
func (s *Server) Rerun(id int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	switch {
	case j == nil:
		return 0, fmt.Errorf("giteatest: no job %d", id)
	case j.Status != StatusCompleted:
		// Gitea answers "this workflow run is not done" (validateRerun).
		return 0, fmt.Errorf("giteatest: job %d is %s, not done", id, j.Status)
	}
	next := *j
	next.Labels = slices.Clone(j.Labels)
	next.Status, next.Conclusion, next.RunnerID, next.RunnerName = StatusQueued, "", 0, ""
	next.RunAttempt = max(j.RunAttempt, 1) + 1
	if s.is127() {
		for other := range s.jobs {
			next.ID = max(next.ID, other)
		}
		next.ID++
	}
	s.jobs[next.ID] = &next
	return next.ID, nil
}

// missingRepo is the message of the 500 a listing page answers when one of
// its jobs' repository is gone: 1.26's LoadAttributes fails on the
// repository (recorded on the bed: "repository does not exist [id: 56,
// uid: 0, owner_name: , name: ]"); 1.27 checks the run's repository itself
// (routers/api/v1/shared/action.go, ListJobs).
func (s *Server) missingRepo(j *Job, repoID int64) string {
	if s.is127() {
		return fmt.Sprintf("job %d is missing its run or repository", j.ID)
	}
	return fmt.Sprintf("repository does not exist [id: %d, uid: 0, owner_name: , name: ]", repoID)
}
