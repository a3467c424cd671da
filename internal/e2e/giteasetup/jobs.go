package giteasetup

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Job is an Actions job as Gitea's GitHub-style API reports it.
type Job struct {
	ID         int64    `json:"id"`
	RunID      int64    `json:"run_id"`
	Name       string   `json:"name"`
	Labels     []string `json:"labels"`
	Status     string   `json:"status"`
	Conclusion string   `json:"conclusion"`
	RunnerName string   `json:"runner_name"`
	// HTMLURL is the job's page: .../OWNER/REPO/actions/runs/RUN_ID/jobs/ID.
	HTMLURL     string    `json:"html_url,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	StartedAt   time.Time `json:"started_at"`
	CompletedAt time.Time `json:"completed_at"`
}

// State is "queued", "waiting", "in_progress" or "completed/<conclusion>".
func (j Job) State() string {
	if j.Status == "completed" {
		return "completed/" + j.Conclusion
	}
	return j.Status
}

// jobsPage is the largest page Gitea serves.
const jobsPage = 50

// RepoJobs lists every Actions job of a repository, page by page.
func (c *Client) RepoJobs(ctx context.Context, r Repo) ([]Job, error) {
	var all []Job
	for page := 1; ; page++ {
		var out struct {
			Jobs []Job `json:"jobs"`
		}
		path := fmt.Sprintf("%s?limit=%d&page=%d", r.path("actions", "jobs"), jobsPage, page)
		if err := c.call(ctx, http.MethodGet, path, nil, &out); err != nil {
			return nil, err
		}
		all = append(all, out.Jobs...)
		if len(out.Jobs) < jobsPage {
			return all, nil
		}
	}
}
