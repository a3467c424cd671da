//go:build e2e

// A fault-injecting reverse proxy in front of the bed's Gitea, on loopback.
// A RunnerGroup whose spec.gitea.url points at it meets Gitea failing the
// way the test says, on the requests the test picks; a group that points
// at Gitea itself is untouched.

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// giteaFault is how the proxy answers a request it faults.
type giteaFault string

const (
	faultNone giteaFault = ""
	// Gitea's own error answers, with a JSON message as Gitea writes them.
	fault401 giteaFault = "401"
	fault403 giteaFault = "403"
	fault404 giteaFault = "404"
	fault500 giteaFault = "500"
	// faultHang answers nothing until the client gives up.
	faultHang giteaFault = "hang"
	// faultSlowBody sends 200 and the start of a JSON body at once, then a
	// byte now and then, so the answer is never complete in time.
	faultSlowBody giteaFault = "slow-body"
	// faultReset closes the connection without an answer.
	faultReset giteaFault = "reset"
	// faultTruncated sends Gitea's real 200 answer cut in half (with a
	// Content-Length that matches the cut body).
	faultTruncated giteaFault = "truncated"
	// faultGarbage sends 200 with bytes that are not JSON.
	faultGarbage giteaFault = "garbage"
	// faultWrongShape sends 200 with JSON of the wrong shape.
	faultWrongShape giteaFault = "wrong-shape"
	// faultHugeBody sends 200 with a well-formed JSON listing of no jobs
	// padded to hugeBodySize.
	faultHugeBody giteaFault = "huge-body"
)

const (
	// hugeBodySize is the size of faultHugeBody's answer.
	hugeBodySize = 64 << 20
	// hangAtMost bounds faultHang and faultSlowBody should a client never
	// give up (that client has a bug the test then shows).
	hangAtMost = 30 * time.Second
)

// pageShift is how a paged job listing changes between its pages.
type pageShift string

const (
	// shiftNone: every page cut from the same list.
	shiftNone pageShift = ""
	// shiftDrop: from page 2 on, the first job is gone (taken by a runner
	// between the two requests), so every later job moves up by one and the
	// one that moves onto page 1 is never read.
	shiftDrop pageShift = "drop"
	// shiftInsert: page 1 is cut from the list without its first job (not
	// there yet), later pages from the whole list, so the last job of page 1
	// comes again on page 2 and the new one is never read.
	shiftInsert pageShift = "insert"
)

// giteaProxy is the fault-injecting proxy.
type giteaProxy struct {
	t    *testing.T
	rp   *httputil.ReverseProxy
	up   *url.URL
	addr string // host:port, fixed after the first start

	mu     sync.Mutex
	srv    *http.Server
	fault  giteaFault
	only   func(*http.Request) bool
	hits   int
	pageBy int       // > 0: queued job listings are served pageBy jobs a page
	shift  pageShift // how they change between pages
	served []int64   // job IDs the paged queued listings served
}

// newGiteaProxy starts a proxy to the Gitea at upstream, healthy, and stops
// it when the test ends.
func newGiteaProxy(t *testing.T, upstream string) *giteaProxy {
	t.Helper()
	up, err := url.Parse(upstream)
	require.NoError(t, err)
	p := &giteaProxy{t: t, up: up, addr: "127.0.0.1:0"}
	p.rp = &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(up) }}
	p.start()
	t.Cleanup(p.stop)
	return p
}

// URL is what a RunnerGroup's spec.gitea.url names to go through the proxy.
func (p *giteaProxy) URL() string { return "http://" + p.addr }

// start listens (again, on the same port after a stop).
func (p *giteaProxy) start() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(p.t, err, "proxy listen on %s", p.addr)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addr = ln.Addr().String()
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func(srv *http.Server) { _ = srv.Serve(ln) }(p.srv)
}

// stop closes the listener and every connection: the port then refuses
// connections, as a Gitea that is down does.
func (p *giteaProxy) stop() {
	p.mu.Lock()
	srv := p.srv
	p.srv = nil
	p.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// set makes the proxy answer the requests only matches (every request when
// only is nil) with fault; faultNone heals it.
func (p *giteaProxy) set(fault giteaFault, only func(*http.Request) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault, p.only, p.hits = fault, only, 0
}

// faulted counts the requests that got the fault since the last set.
func (p *giteaProxy) faulted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits
}

// page serves queued job listings `by` jobs a page, changing between pages
// as shift says, and forgets the IDs served so far.
func (p *giteaProxy) page(by int, shift pageShift) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pageBy, p.shift, p.served = by, shift, nil
}

// servedIDs are the distinct job IDs the paged listings served since page.
func (p *giteaProxy) servedIDs() map[int64]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[int64]bool{}
	for _, id := range p.served {
		out[id] = true
	}
	return out
}

// listingOf matches a job listing with this status filter.
// listingOf matches the job listings that ask for status: since the
// scaler asks for all three statuses in one request per page, a fault on
// the in_progress listing is a fault on that one request.
func listingOf(status string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		return isJobListing(r) && slices.Contains(r.URL.Query()["status"], status)
	}
}

func isJobListing(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/actions/jobs") }

func (p *giteaProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	fault, pageBy, shift := p.fault, p.pageBy, p.shift
	hit := fault != faultNone && (p.only == nil || p.only(r))
	if hit {
		p.hits++
	}
	p.mu.Unlock()
	switch {
	case hit:
		p.inject(w, r, fault)
	case pageBy > 0 && listingOf("queued")(r):
		p.servePage(w, r, pageBy, shift)
	default:
		p.rp.ServeHTTP(w, r)
	}
}

func (p *giteaProxy) inject(w http.ResponseWriter, r *http.Request, fault giteaFault) {
	switch fault {
	case fault401, fault403, fault404, fault500:
		code, _ := strconv.Atoi(string(fault))
		writeJSON(w, code, fmt.Sprintf(`{"message":"fault injected: %s","url":"%s"}`, http.StatusText(code), p.URL()))
	case faultHang:
		select {
		case <-r.Context().Done():
		case <-time.After(hangAtMost):
		}
		hangUp(w)
	case faultSlowBody:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"total_count":1,"jobs":[`)
		deadline := time.After(hangAtMost)
		for {
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-deadline:
				return
			case <-time.After(200 * time.Millisecond):
				_, _ = io.WriteString(w, " ")
			}
		}
	case faultReset:
		hangUp(w)
	case faultTruncated:
		rec := httptest.NewRecorder()
		p.rp.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		writeJSON(w, http.StatusOK, string(body[:len(body)/2]))
	case faultGarbage:
		writeJSON(w, http.StatusOK, "\x00\xff<html><body>Gateway says hello</body>\x1b[0m")
	case faultWrongShape:
		writeJSON(w, http.StatusOK, `{"total_count":"many","jobs":{"id":"seven"}}`)
	case faultHugeBody:
		writeHuge(w)
	default:
		panic("unknown fault " + fault)
	}
}

func writeJSON(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

// hangUp closes the connection without a word.
func hangUp(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// writeHuge streams a JSON listing of no jobs, padded with one string
// field to exactly hugeBodySize bytes, and stops when the client does.
func writeHuge(w http.ResponseWriter) {
	head, foot := `{"total_count":0,"jobs":[],"padding":"`, `"}`
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(hugeBodySize))
	w.WriteHeader(http.StatusOK)
	if _, err := io.WriteString(w, head); err != nil {
		return
	}
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	for left := hugeBodySize - len(head) - len(foot); left > 0; left -= len(chunk) {
		if left < len(chunk) {
			chunk = chunk[:left]
		}
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
	_, _ = io.WriteString(w, foot)
}

// servePage answers one page of a queued job listing from the whole
// listing as Gitea has it now (sorted by ID), `by` jobs a page, with the
// Link and X-Total-Count headers Gitea sends, changed between pages as
// shift says.
func (p *giteaProxy) servePage(w http.ResponseWriter, r *http.Request, by int, shift pageShift) {
	all, err := p.wholeListing(r)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, fmt.Sprintf(`{"message":%q}`, err.Error()))
		return
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	page = max(page, 1)
	if len(all) > 0 && ((shift == shiftDrop && page > 1) || (shift == shiftInsert && page == 1)) {
		all = all[1:]
	}
	from, to := min((page-1)*by, len(all)), min(page*by, len(all))
	jobs := all[from:to]
	raws := make([]json.RawMessage, 0, len(jobs))
	p.mu.Lock()
	for _, j := range jobs {
		raws = append(raws, j.raw)
		p.served = append(p.served, j.id)
	}
	p.mu.Unlock()
	if to < len(all) {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(page+1))
		w.Header().Set("Link", fmt.Sprintf(`<%s%s?%s>; rel="next"`, p.URL(), r.URL.Path, q.Encode()))
	}
	w.Header().Set("X-Total-Count", strconv.Itoa(len(all)))
	body, _ := json.Marshal(map[string]any{"total_count": len(all), "jobs": raws})
	writeJSON(w, http.StatusOK, string(body))
}

type listedJob struct {
	id  int64
	raw json.RawMessage
}

// wholeListing reads every page of the listing r asks for from Gitea, with
// r's credentials.
func (p *giteaProxy) wholeListing(r *http.Request) ([]listedJob, error) {
	const limit = 50 // the most Gitea serves a page
	var all []listedJob
	for page := 1; page <= 100; page++ {
		q := r.URL.Query()
		q.Set("limit", strconv.Itoa(limit))
		q.Set("page", strconv.Itoa(page))
		u := *p.up
		u.Path, u.RawQuery = strings.TrimSuffix(u.Path, "/")+r.URL.Path, q.Encode()
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		var out struct {
			Jobs []json.RawMessage `json:"jobs"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil {
			return nil, errors.Join(fmt.Errorf("upstream %s: HTTP %d", u.Path, resp.StatusCode), err)
		}
		for _, raw := range out.Jobs {
			var j struct {
				ID int64 `json:"id"`
			}
			if err := json.Unmarshal(raw, &j); err != nil {
				return nil, err
			}
			all = append(all, listedJob{id: j.ID, raw: raw})
		}
		if len(out.Jobs) < limit {
			sort.Slice(all, func(i, k int) bool { return all[i].id < all[k].id })
			return all, nil
		}
	}
	return nil, errors.New("upstream listing longer than 100 pages")
}

// freeLoopbackAddr is a loopback host:port that nothing listens on now,
// for a process that binds it later or a client that must find it dead.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
