package gitea

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	sdk "code.gitea.io/sdk/gitea"
)

// Gitea renders each job of the instance's listing with its run's
// repository, and answers the whole page 500 when one job's repository is
// gone (an owner's listing keeps to the owner's existing repositories and
// leaves such a job out). Gitea leaves such jobs when a push's workflow is
// queued just as its repository is deleted: the deletion removes the
// repository's jobs, then the notifier inserts the run (1.26 answers
// "repository does not exist [id: …]", 1.27 "job N is missing its run or
// repository"). Failing the listing would leave every instance-wide group
// without runners until an admin deletes the job in Gitea's database, so
// the page is read again in smaller aligned pieces, and a piece of one job
// that still fails is left out and counted (Snapshot.Unlisted).
//
// Only the instance's and an org's listings are read around (an org's
// 500 costs nothing extra to read around, should a Gitea not filter it),
// never a repository's, whose jobs Gitea renders with the repository it
// was asked for; and only exactly 500: a 502, 503 or 504 comes from in
// front of Gitea.

// A job left out is told apart from a Gitea that fails everything by the
// 500's message, which names the broken job (JobWithoutRepository). More
// than maxUnexplained left out with other words (a locked database, a
// panic) means Gitea fails everything, and the listing fails with the
// page's own error, as it would without reading around. maxUnlisted bounds
// the cost, a few requests per job left out: past it the listing fails and
// says why.
const (
	maxUnexplained = 4
	maxUnlisted    = 64
)

// JobWithoutRepository says whether a 500's message is Gitea's for a job
// whose repository is gone, in 1.26's words or 1.27's (both proven on the
// bed by the e2e fault test).
func JobWithoutRepository(message string) bool {
	return strings.HasPrefix(message, "repository does not exist [") ||
		strings.HasSuffix(message, " is missing its run or repository")
}

// readAroundable says whether a listing's failed page may be read around.
func readAroundable(l listing, err error) bool {
	var apiErr *APIError
	return l.src.repo == "" && errors.As(err, &apiErr) && apiErr.Status == http.StatusInternalServerError
}

// piece is a run of the listing's items, offset first, that one request
// reads: page offset/size+1 with limit size, so offset is a multiple of
// size.
type piece struct{ offset, size int }

// alignedPieces covers [start, end) with the largest pieces that a page
// and limit can ask for, in order.
func alignedPieces(start, end int) []piece {
	var out []piece
	for start < end {
		size := 1
		for start%(size*2) == 0 && start+size*2 <= end {
			size *= 2
		}
		out = append(out, piece{start, size})
		start += size
	}
	return out
}

// readAround reads the failed page of l in pieces, halving each piece that
// fails with 500 down to single jobs, which are left out. It appends what
// it read to out and answers as paginate's page function: how many of
// the page's places it covered, and a response whose X-Total-Count (the
// pieces' own) tells paginate whether the listing goes on.
func (c *client) readAround(ctx context.Context, l listing, page int, pageErr error, out *listed) (int, *sdk.Response, error) {
	size := c.opts.PageSize
	start := (page - 1) * size
	todo := alignedPieces(start, start+size)
	covered, total := 0, -1
	for len(todo) > 0 {
		p := todo[0]
		todo = todo[1:]
		if total >= 0 && p.offset >= total {
			break
		}
		jobs, pieceTotal, err := c.readPiece(ctx, l, p)
		switch {
		case err == nil:
			total = pieceTotal
			out.jobs = append(out.jobs, jobs...)
			covered = p.offset + len(jobs) - start
			if len(jobs) < p.size {
				todo = nil // the listing ends in this piece
			}
		case !readAroundable(l, err):
			return 0, nil, err
		case p.size > 1:
			half := p.size / 2
			todo = append([]piece{{p.offset, half}, {p.offset + half, half}}, todo...)
		default:
			if err := out.leaveOut(err, pageErr); err != nil {
				return 0, nil, err
			}
			covered = p.offset + 1 - start
		}
	}
	out.pages++
	return covered, pageAnswer(page, total), nil
}

// leaveOut counts a job whose single-job piece failed with err, or fails
// the listing: with pageErr when Gitea seems to fail everything, with an
// error that says what to do when too many jobs are broken.
func (out *listed) leaveOut(err, pageErr error) error {
	out.unlisted++
	var apiErr *APIError
	errors.As(err, &apiErr) // readAroundable checked its type
	if !JobWithoutRepository(apiErr.Message) {
		if out.unexplained++; out.unexplained > maxUnexplained {
			return pageErr
		}
	}
	if out.unlisted > maxUnlisted {
		e := *apiErr
		e.Message = fmt.Sprintf("more than %d jobs of this listing fail to render (Gitea's 500 for the last: %q); "+
			"Gitea keeps jobs whose repository is gone: delete them in Gitea's database", maxUnlisted, apiErr.Message)
		return &e
	}
	return nil
}

// pageAnswer stands in for the failed page's answer: the pieces' total
// decides whether the listing goes on, and without one (every piece read
// was left out) the next page is asked for, since an empty page ends a job
// listing.
func pageAnswer(page, total int) *sdk.Response {
	r := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}}
	if total < 0 {
		r.Header.Set("Link", `<>; rel="next"`)
		return &sdk.Response{Response: r, NextPage: page + 1}
	}
	r.Header.Set("X-Total-Count", strconv.Itoa(total))
	return &sdk.Response{Response: r}
}

// readPiece reads one piece, and the listing's total as Gitea counts it.
func (c *client) readPiece(ctx context.Context, l listing, p piece) ([]*sdk.ActionWorkflowJob, int, error) {
	q := url.Values{}
	q.Set("page", strconv.Itoa(p.offset/p.size+1))
	q.Set("limit", strconv.Itoa(p.size))
	for _, st := range l.statuses {
		q.Add("status", st)
	}
	res := new(sdk.ActionWorkflowJobsResponse)
	resp, err := c.getJSON(ctx, l.src.apiPath, q, res)
	if err != nil {
		return nil, 0, err
	}
	if err := checkStatuses(l, c.requestURI(l.src.apiPath, q), resp, res.Jobs); err != nil {
		return nil, 0, err
	}
	return res.Jobs, int(res.TotalCount), nil
}
