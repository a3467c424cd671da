package giteatest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Gitea's defaults for DEFAULT_PAGING_NUM and MAX_RESPONSE_ITEMS.
const (
	DefaultPageSize = 30
	MaxPageSize     = 50
)

// pageParams reads page and limit like Gitea: page at least 1, limit
// DefaultPageSize when missing or not positive, at most MaxPageSize.
func pageParams(r *http.Request) (page, size int) {
	q := r.URL.Query()
	page, _ = strconv.Atoi(q.Get("page"))
	size, _ = strconv.Atoi(q.Get("limit"))
	page = max(page, 1)
	switch {
	case size <= 0:
		size = DefaultPageSize
	case size > MaxPageSize:
		size = MaxPageSize
	}
	return page, size
}

func pageOf[T any](all []T, page, size int) []T {
	start := (page - 1) * size
	if start >= len(all) {
		return nil
	}
	return all[start:min(start+size, len(all))]
}

// pageHeaders are Gitea's Link and X-Total-Count. Link follows Gitea's
// paginator: the current page is clamped to the last one, rel="next" while
// current*size < total, rel="last" unless on the last page, rel="first" and
// rel="prev" unless on the first; each link is the request URL with page
// replaced (query keys sorted).
func (s *Server) pageHeaders(r *http.Request, total, size int) map[string]string {
	h := map[string]string{"X-Total-Count": strconv.Itoa(total)}
	asked, _ := strconv.Atoi(r.URL.Query().Get("page"))
	pages := (total + size - 1) / size
	cur := max(min(asked, pages), 1)
	hasNext := cur*size < total
	link := func(page int, rel string) string {
		u := *r.URL
		q := u.Query()
		q.Set("page", strconv.Itoa(page))
		u.RawQuery = q.Encode()
		return fmt.Sprintf("<%s%s>; rel=%q", s.URL, u.RequestURI(), rel)
	}
	var links []string
	if hasNext {
		links = append(links, link(cur+1, "next"))
		links = append(links, link(pages, "last"))
	}
	if cur > 1 {
		links = append(links, link(1, "first"))
		links = append(links, link(cur-1, "prev"))
	}
	if len(links) > 0 {
		h["Link"] = strings.Join(links, ",")
	}
	return h
}
