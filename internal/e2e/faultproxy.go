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

// GiteaFault is how the proxy answers a request it faults.
type GiteaFault string

const (
	FaultNone GiteaFault = ""
	// Gitea's own error answers, with a JSON message as Gitea writes them.
	Fault401 GiteaFault = "401"
	Fault403 GiteaFault = "403"
	Fault404 GiteaFault = "404"
	Fault500 GiteaFault = "500"
	// FaultHang answers nothing until the client gives up.
	FaultHang GiteaFault = "hang"
	// FaultSlowBody sends 200 and the start of a JSON body at once, then a
	// byte now and then, so the answer is never complete in time.
	FaultSlowBody GiteaFault = "slow-body"
	// FaultReset closes the connection without an answer.
	FaultReset GiteaFault = "reset"
	// FaultTruncated sends Gitea's real 200 answer cut in half (with a
	// Content-Length that matches the cut body).
	FaultTruncated GiteaFault = "truncated"
	// FaultGarbage sends 200 with bytes that are not JSON.
	FaultGarbage GiteaFault = "garbage"
	// FaultWrongShape sends 200 with JSON of the wrong shape.
	FaultWrongShape GiteaFault = "wrong-shape"
	// FaultHugeBody sends 200 with a well-formed JSON listing of no jobs
	// padded to hugeBodySize.
	FaultHugeBody GiteaFault = "huge-body"
)

const (
	// hugeBodySize is the size of faultHugeBody's answer.
	hugeBodySize = 64 << 20
	// hangAtMost bounds faultHang and faultSlowBody should a client never
	// give up (that client has a bug the test then shows).
	hangAtMost = 30 * time.Second
)

// PageShift is how a paged job listing changes between its pages.
type PageShift string

const (
	// ShiftNone: every page cut from the same list.
	ShiftNone PageShift = ""
	// ShiftDrop: from page 2 on, the first job is gone (taken by a runner
	// between the two requests), so every later job moves up by one and the
	// one that moves onto page 1 is never read.
	ShiftDrop PageShift = "drop"
	// ShiftInsert: page 1 is cut from the list without its first job (not
	// there yet), later pages from the whole list, so the last job of page 1
	// comes again on page 2 and the new one is never read.
	ShiftInsert PageShift = "insert"
)

// GiteaProxy is the fault-injecting proxy.
type GiteaProxy struct {
	t    *testing.T
	rp   *httputil.ReverseProxy
	up   *url.URL
	addr string // host:port, fixed after the first start

	mu     sync.Mutex
	srv    *http.Server
	fault  GiteaFault
	only   func(*http.Request) bool
	hits   int
	pageBy int       // > 0: queued job listings are served pageBy jobs a page
	shift  PageShift // how they change between pages
	served []int64   // job IDs the paged queued listings served
}

// NewGiteaProxy starts a proxy to the Gitea at upstream, healthy, and stops
// it when the test ends.
func NewGiteaProxy(t *testing.T, upstream string) *GiteaProxy {
	t.Helper()
	up, err := url.Parse(upstream)
	require.NoError(t, err)
	p := &GiteaProxy{t: t, up: up, addr: "127.0.0.1:0"}
	p.rp = &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(up) }}
	p.Start()
	t.Cleanup(p.Stop)
	return p
}

// URL is what a RunnerGroup's spec.gitea.url names to go through the proxy.
func (p *GiteaProxy) URL() string { return "http://" + p.addr }

// Start listens (again, on the same port after a stop).
func (p *GiteaProxy) Start() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(p.t, err, "proxy listen on %s", p.addr)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.addr = ln.Addr().String()
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func(srv *http.Server) { _ = srv.Serve(ln) }(p.srv)
}

// Stop closes the listener and every connection: the port then refuses
// connections, as a Gitea that is down does.
func (p *GiteaProxy) Stop() {
	p.mu.Lock()
	srv := p.srv
	p.srv = nil
	p.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Set makes the proxy answer the requests only matches (every request when
// only is nil) with fault; faultNone heals it.
func (p *GiteaProxy) Set(fault GiteaFault, only func(*http.Request) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault, p.only, p.hits = fault, only, 0
}

// Faulted counts the requests that got the fault since the last set.
func (p *GiteaProxy) Faulted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits
}

// Page serves queued job listings `by` jobs a page, changing between pages
// as shift says, and forgets the IDs served so far.
func (p *GiteaProxy) Page(by int, shift PageShift) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pageBy, p.shift, p.served = by, shift, nil
}

// ServedIDs are the distinct job IDs the paged listings served since page.
func (p *GiteaProxy) ServedIDs() map[int64]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[int64]bool{}
	for _, id := range p.served {
		out[id] = true
	}
	return out
}

// ListingOf matches a job listing with this status filter.
// listingOf matches the job listings that ask for status: since the
// scaler asks for all three statuses in one request per page, a fault on
// the in_progress listing is a fault on that one request.
func ListingOf(status string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		return isJobListing(r) && slices.Contains(r.URL.Query()["status"], status)
	}
}

func isJobListing(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/actions/jobs") }

func (p *GiteaProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	fault, pageBy, shift := p.fault, p.pageBy, p.shift
	hit := fault != FaultNone && (p.only == nil || p.only(r))
	if hit {
		p.hits++
	}
	p.mu.Unlock()
	switch {
	case hit:
		p.inject(w, r, fault)
	case pageBy > 0 && ListingOf("queued")(r):
		p.servePage(w, r, pageBy, shift)
	default:
		p.rp.ServeHTTP(w, r)
	}
}

func (p *GiteaProxy) inject(w http.ResponseWriter, r *http.Request, fault GiteaFault) {
	switch fault {
	case Fault401, Fault403, Fault404, Fault500:
		code, _ := strconv.Atoi(string(fault))
		WriteJSON(w, code, fmt.Sprintf(`{"message":"fault injected: %s","url":"%s"}`, http.StatusText(code), p.URL()))
	case FaultHang:
		select {
		case <-r.Context().Done():
		case <-time.After(hangAtMost):
		}
		HangUp(w)
	case FaultSlowBody:
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
	case FaultReset:
		HangUp(w)
	case FaultTruncated:
		rec := httptest.NewRecorder()
		p.rp.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		WriteJSON(w, http.StatusOK, string(body[:len(body)/2]))
	case FaultGarbage:
		WriteJSON(w, http.StatusOK, "\x00\xff<html><body>Gateway says hello</body>\x1b[0m")
	case FaultWrongShape:
		WriteJSON(w, http.StatusOK, `{"total_count":"many","jobs":{"id":"seven"}}`)
	case FaultHugeBody:
		writeHuge(w)
	default:
		panic("unknown fault " + fault)
	}
}

func WriteJSON(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

// HangUp closes the connection without a word.
func HangUp(w http.ResponseWriter) {
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
func (p *GiteaProxy) servePage(w http.ResponseWriter, r *http.Request, by int, shift PageShift) {
	all, err := p.wholeListing(r)
	if err != nil {
		WriteJSON(w, http.StatusBadGateway, fmt.Sprintf(`{"message":%q}`, err.Error()))
		return
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	page = max(page, 1)
	if len(all) > 0 && ((shift == ShiftDrop && page > 1) || (shift == ShiftInsert && page == 1)) {
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
	WriteJSON(w, http.StatusOK, string(body))
}

type listedJob struct {
	id  int64
	raw json.RawMessage
}

// wholeListing reads every page of the listing r asks for from Gitea, with
// r's credentials.
func (p *GiteaProxy) wholeListing(r *http.Request) ([]listedJob, error) {
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

// FreeLoopbackAddr is a loopback host:port that nothing listens on now,
// for a process that binds it later or a client that must find it dead.
func FreeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// FreeLoopbackPort is the port of a FreeLoopbackAddr.
func FreeLoopbackPort(t *testing.T) int {
	t.Helper()
	_, port, err := net.SplitHostPort(FreeLoopbackAddr(t))
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	return n
}
