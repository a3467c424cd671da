package gitea

import (
	"context"
	"fmt"
	"strconv"

	sdk "code.gitea.io/sdk/gitea"
)

// maxPages stops a listing that never ends (a broken server or proxy that
// keeps naming a next page). At the default page size that is 50,000 items,
// far beyond what one scaler pass should see.
const maxPages = 1000

// pageFunc fetches one page (1-based) and reports how many items it held.
type pageFunc func(ctx context.Context, page int) (n int, resp *sdk.Response, err error)

// paginate calls fetch for page 1, 2, ... until the listing ends.
//
// Gitea's Link header decides: the listing goes on while it names a
// rel="next" page (the SDK parses that into Response.NextPage; we use only
// the page number, never the URL, whose origin is Gitea's ROOT_URL and may
// not be reachable from here). With stopOnEmpty an empty page ends the
// listing even if a next page is named. When a response has no Link header
// at all (a proxy may strip it), X-Total-Count decides: go on while a
// non-empty page leaves items unseen.
//
// uri names a page in errors.
func paginate(ctx context.Context, stopOnEmpty bool, uri func(page int) string, fetch pageFunc) error {
	seen := 0
	for page := 1; ; {
		n, resp, err := fetch(ctx, page)
		if err != nil {
			return err
		}
		seen += n
		if n == 0 && stopOnEmpty {
			return nil
		}
		next := nextPage(resp, page, n, seen)
		switch {
		case next == 0:
			return nil
		case next <= page:
			// Following it would loop; ending here would silently drop jobs.
			return &APIError{Kind: ErrBadResponse, URL: uri(page), Status: statusOf(resp),
				Message: fmt.Sprintf("Link header names page %d as next after page %d", next, page)}
		case next > maxPages:
			return &APIError{Kind: ErrBadResponse, URL: uri(page), Status: statusOf(resp),
				Message: fmt.Sprintf("more than %d pages", maxPages)}
		}
		page = next
	}
}

// nextPage is the page to fetch after page, or 0 when the listing ended.
func nextPage(resp *sdk.Response, page, n, seen int) int {
	if resp == nil || resp.Response == nil {
		return 0
	}
	if resp.Header.Get("Link") != "" {
		return resp.NextPage
	}
	total, err := strconv.Atoi(resp.Header.Get("X-Total-Count"))
	if err == nil && n > 0 && seen < total {
		return page + 1
	}
	return 0
}

func statusOf(resp *sdk.Response) int {
	if resp == nil || resp.Response == nil {
		return 0
	}
	return resp.StatusCode
}
