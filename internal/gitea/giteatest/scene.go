package giteatest

import (
	"fmt"
	"slices"
	"time"
)

// Job statuses as the API reports them.
const (
	StatusBlocked    = "waiting" // needs: not finished, or awaiting approval
	StatusQueued     = "queued"  // ready, waits for a runner
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed" // see Job.Conclusion
)

// Org is an organization. Members may list its jobs with a non-admin
// token; owners may also manage its runners.
type Org struct {
	Name    string
	Members []string
	Owners  []string
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
	// Started is served as started_at; zero serves the epoch, as Gitea
	// does for a job no runner has taken.
	Started time.Time
}

// Scene is everything the fake serves.
type Scene struct {
	Orgs    []Org
	Users   []string
	Repos   []Repo
	Jobs    []Job
	Runners []Runner
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

// Load replaces the scene (runners included). Repositories get IDs 1, 2, ... in the order given
// (acme/app then alice/tool gives the IDs of the recordings); orgs, then
// users, get their own IDs the same way. Tokens, faults and the request log
// are kept.
func (s *Server) Load(sc Scene) error {
	owners := map[string]*owner{}
	var id int64
	for _, o := range sc.Orgs {
		if owners[o.Name] != nil {
			return fmt.Errorf("giteatest: duplicate owner %q", o.Name)
		}
		id++
		owners[o.Name] = &owner{id: id, isOrg: true, org: Org{Name: o.Name, Members: slices.Clone(o.Members), Owners: slices.Clone(o.Owners)}}
	}
	for _, u := range sc.Users {
		if owners[u] != nil {
			return fmt.Errorf("giteatest: duplicate owner %q", u)
		}
		id++
		owners[u] = &owner{id: id}
	}
	var repos []*repo
	seen := map[string]bool{}
	for i, r := range sc.Repos {
		if owners[r.Owner] == nil {
			return fmt.Errorf("giteatest: repo %s/%s: unknown owner", r.Owner, r.Name)
		}
		if seen[r.Owner+"/"+r.Name] {
			return fmt.Errorf("giteatest: duplicate repo %s/%s", r.Owner, r.Name)
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
			return fmt.Errorf("giteatest: duplicate job %d", j.ID)
		}
		j.Labels = slices.Clone(j.Labels)
		jobs[j.ID] = &j
	}
	runners := map[int64]*Runner{}
	for _, r := range sc.Runners {
		if r.ID <= 0 || runners[r.ID] != nil {
			return fmt.Errorf("giteatest: runner ID %d must be positive and unique", r.ID)
		}
		r.Labels = slices.Clone(r.Labels)
		runners[r.ID] = &r
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owners, s.repos, s.jobs, s.runners = owners, repos, jobs, runners
	s.goneRepos = nil
	return nil
}

func checkJob(j Job, repos map[string]bool) error {
	if j.ID <= 0 {
		return fmt.Errorf("giteatest: job ID %d must be positive", j.ID)
	}
	if !repos[j.Owner+"/"+j.Repo] {
		return fmt.Errorf("giteatest: job %d: unknown repo %s/%s", j.ID, j.Owner, j.Repo)
	}
	switch j.Status {
	case StatusBlocked, StatusQueued, StatusInProgress, StatusCompleted, StatusCancelling:
		return nil
	}
	return fmt.Errorf("giteatest: job %d: unknown status %q", j.ID, j.Status)
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
		return fmt.Errorf("giteatest: no job %d", id)
	}
	c := *j
	c.Labels = slices.Clone(j.Labels)
	change(&c)
	switch c.Status {
	case StatusBlocked, StatusQueued, StatusInProgress, StatusCompleted, StatusCancelling:
	default:
		return fmt.Errorf("giteatest: job %d: unknown status %q", id, c.Status)
	}
	c.ID, c.Owner, c.Repo = j.ID, j.Owner, j.Repo
	*j = c
	return nil
}

// DeleteRepoKeepingJobs deletes a repository but not its jobs: what Gitea
// leaves when a push's workflow is queued just as its repository is
// deleted (the deletion removes the repository's jobs, then the queued
// notifier inserts the run). Such a job fails every page of the instance's
// listing that holds it, and is in no owner's listing (listInstanceJobs,
// listJobs).
func (s *Server) DeleteRepoKeepingJobs(owner, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.repos, func(r *repo) bool { return r.Owner == owner && r.Name == name })
	if i < 0 {
		return fmt.Errorf("giteatest: no repo %s/%s", owner, name)
	}
	if s.goneRepos == nil {
		s.goneRepos = map[string]int64{}
	}
	s.goneRepos[owner+"/"+name] = s.repos[i].id
	s.repos = slices.Delete(s.repos, i, i+1)
	return nil
}

// RemoveJob deletes a job (Gitea deletes jobs with their run).
func (s *Server) RemoveJob(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.jobs, id)
}
