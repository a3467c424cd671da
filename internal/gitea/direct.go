package gitea

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	sdk "code.gitea.io/sdk/gitea"
)

// getJSON sends one GET below /api/v1 and decodes a 2xx JSON body into out,
// with the same timeout, body bound, headers and errors as do.
//
// It goes around the SDK for one reason: the SDK's
// ListRepoActionJobsOptions (v0.25.1) holds a single Status, and its
// request helpers are unexported, so it cannot send the repeated status
// parameters that let Gitea answer queued, blocked and running jobs in one
// request per page instead of three. Everything else still goes through
// the SDK.
func (c *client) getJSON(ctx context.Context, apiPath string, q url.Values, out any) (*sdk.Response, error) {
	uri := c.requestURI(apiPath, q)
	rctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	x := &exchange{max: c.opts.MaxResponseBytes}
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, c.baseURL+"/api/v1"+apiPath+"?"+q.Encode(), nil)
	if err != nil {
		// Not reachable: the base URL was checked by NewClient and the
		// path is escaped.
		return nil, fmt.Errorf("gitea: cannot build request %s: %w", uri, err)
	}
	req.Header.Set("Authorization", "token "+c.token)
	req.Header.Set("User-Agent", c.opts.UserAgent)
	req.Header.Set("Accept", "application/json")
	hr, err := x.httpClient(c.opts.HTTPClient).Do(req)
	if err != nil {
		return nil, c.classify(ctx, uri, nil, x, err)
	}
	defer hr.Body.Close()
	resp := &sdk.Response{Response: hr, NextPage: nextLink(hr.Header.Get("Link"))}
	if hr.StatusCode/100 != 2 {
		_, _ = io.Copy(io.Discard, hr.Body)
		return resp, c.classify(ctx, uri, resp, x, fmt.Errorf("HTTP %d", hr.StatusCode))
	}
	if err := json.NewDecoder(hr.Body).Decode(out); err != nil {
		return resp, c.classify(ctx, uri, resp, x, err)
	}
	return resp, nil
}

// nextLink is the page number of the rel="next" entry of a Link header, 0
// when there is none. Only the page number is used, never the URL, as in
// paginate.
func nextLink(link string) int {
	for part := range strings.SplitSeq(link, ",") {
		target, params, ok := strings.Cut(part, ";")
		if !ok {
			continue
		}
		isNext := false
		for p := range strings.SplitSeq(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if k == "rel" && strings.Trim(v, `"`) == "next" {
				isNext = true
			}
		}
		if !isNext {
			continue
		}
		u, err := url.Parse(strings.Trim(strings.TrimSpace(target), "<>"))
		if err != nil {
			return 0
		}
		n, _ := strconv.Atoi(u.Query().Get("page"))
		return n
	}
	return 0
}
