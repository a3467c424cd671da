package giteatest

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"time"
)

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
		Status:      apiStatus(j),
		Conclusion:  apiConclusion(j),
		RunnerID:    j.RunnerID,
		RunnerName:  j.RunnerName,
		Steps:       []any{},
		CreatedAt:   created,
		StartedAt:   cmp.Or(j.Started, epoch),
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
