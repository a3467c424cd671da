package gitea

import (
	"context"
	"errors"
	"slices"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// maxInProgressReadings bounds how often InProgress reads a listing of
// several pages while it keeps changing under it.
const maxInProgressReadings = 3

// ErrUnsettled is InProgress's answer when no two readings in a row of a
// listing of several pages agreed: it cannot say which jobs run.
var ErrUnsettled = errors.New("gitea: the in_progress listing changed at every reading, so which jobs run is not known")

// InProgress implements Runners.
//
// It is the confirmation a runner is deleted on, so it must never miss a
// job that runs. Gitea pages by offset and a page is one query, so one page
// is a consistent reading, but a listing of several pages is not: a job
// that ends between page 1 and page 2 moves every later job back by one,
// and the job that moved across the page boundary is never read. Gitea
// 1.26 has no per-runner signal of a running task (the runners' busy flag
// stays false while a task runs, testdata/repo-runners-while-running.json),
// and a stable total proves nothing (one job ending and another starting
// between pages keep it). So:
//
//   - Only in_progress is asked for, one status per request: the listing is
//     as short as it can be (most often one page), and a proxy that drops
//     repeated status parameters cannot change what it means.
//   - A reading whose every listing fitted in one page is returned as it is.
//   - A reading of several pages is read again until two readings in a row
//     name the same jobs with the same runners, at most
//     maxInProgressReadings times; else ErrUnsettled. A reading misses a
//     job only if another job it read ended while it paged, and that job is
//     then missing from the next reading, so two equal readings in a row
//     missed nothing that ran throughout the first. The caller disabled the
//     runners it asks about before the first reading, so none of them takes
//     a job after it began.
//
// Any failure (a page that fails, a body over the bound, a job with a
// status not asked for) fails the whole call: callers treat it as "busy".
func (c *client) InProgress(ctx context.Context, t scope.Place) ([]Job, error) {
	if err := validate(t); err != nil {
		return nil, err
	}
	var last []Job
	for reading := 1; reading <= maxInProgressReadings; reading++ {
		jobs, pages, err := c.readInProgress(ctx, t)
		switch {
		case err != nil:
			return nil, err
		case pages <= 1:
			return jobs, nil
		case reading > 1 && sameRunning(last, jobs):
			return jobs, nil
		}
		last = jobs
	}
	return nil, ErrUnsettled
}

// readInProgress reads the target's in_progress jobs once, sorted by ID,
// and says how many pages its longest listing took.
func (c *client) readInProgress(ctx context.Context, t scope.Place) ([]Job, int, error) {
	running := func(src jobSource) []listing { return []listing{{src, []string{statusRunning}}} }
	ls, pages, err := c.targetListings(ctx, t, running)
	if err != nil {
		return nil, 0, err
	}
	results, jobPages, err := c.runListings(ctx, ls)
	if err != nil {
		return nil, 0, err
	}
	return buildSnapshot(ls, results).Running, max(pages, jobPages), nil
}

// sameRunning says whether two readings name the same jobs run by the same
// runners.
func sameRunning(a, b []Job) bool {
	return slices.EqualFunc(a, b, func(x, y Job) bool { return x.ID == y.ID && x.RunnerName == y.RunnerName })
}
