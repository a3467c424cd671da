package gitea

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

const mib = 1 << 20

// TestSnapshotRefusesLargeResponses fails a request whose answer is larger
// than MaxResponseBytes instead of reading it whole, whether or not the
// answer says its length up front.
func TestSnapshotRefusesLargeResponses(t *testing.T) {
	const limit = 64 << 10
	org := scope.New("", ScopeOrg, "acme", "")
	tests := []struct {
		name       string
		fault      giteatest.Fault
		wantKind   error
		wantStatus int
		wantMsg    string
	}{
		{name: "64 MiB listing, chunked", fault: giteatest.Fault{LargeBody: 64 * mib},
			wantKind: ErrBadResponse, wantStatus: 200, wantMsg: fmt.Sprintf("response larger than %d bytes", limit)},
		{name: "64 MiB listing with Content-Length", fault: giteatest.Fault{LargeBody: 64 * mib, DeclareLength: true},
			wantKind: ErrBadResponse, wantStatus: 200, wantMsg: fmt.Sprintf("response larger than %d bytes", limit)},
		{name: "one byte too many", fault: giteatest.Fault{LargeBody: limit + 1},
			wantKind: ErrBadResponse, wantStatus: 200, wantMsg: fmt.Sprintf("response larger than %d bytes", limit)},
		{name: "a large error page keeps the status's kind", fault: giteatest.Fault{LargeBody: 64 * mib, Status: 502},
			wantKind: ErrServer, wantStatus: 502, wantMsg: fmt.Sprintf("response larger than %d bytes", limit)},
		{name: "a large error page with Content-Length", fault: giteatest.Fault{LargeBody: 64 * mib, Status: 401, DeclareLength: true},
			wantKind: ErrUnauthorized, wantStatus: 401, wantMsg: fmt.Sprintf("response larger than %d bytes", limit)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, fixtureScene())
			f.InjectFault(maxConcurrentListings, tt.fault)
			c := newTestClient(t, f.URL, adminToken, Options{MaxResponseBytes: limit})

			_, err := c.Snapshot(t.Context(), org)

			require.ErrorIs(t, err, tt.wantKind)
			var apiErr *APIError
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, tt.wantStatus, apiErr.Status)
			assert.Equal(t, tt.wantMsg, apiErr.Message)
			assert.True(t, strings.HasPrefix(apiErr.URL, "/api/v1/orgs/acme/actions/jobs?"), apiErr.URL)
		})
	}
}

// TestSnapshotAcceptsAResponseOfExactlyTheLimit: the limit is a size that is
// still read, not one past it.
func TestSnapshotAcceptsAResponseOfExactlyTheLimit(t *testing.T) {
	const limit = 64 << 10
	for _, declare := range []bool{false, true} {
		t.Run(fmt.Sprintf("Content-Length=%v", declare), func(t *testing.T) {
			f := newFake(t, fixtureScene())
			f.InjectFault(maxConcurrentListings, giteatest.Fault{LargeBody: limit, DeclareLength: declare})
			c := newTestClient(t, f.URL, adminToken, Options{MaxResponseBytes: limit})

			_, err := c.Snapshot(t.Context(), scope.New("", ScopeOrg, "acme", ""))
			require.NoError(t, err)
		})
	}
}

// TestLargeResponseAllocatesLittle measures what the client allocates while
// it refuses a 64 MiB answer that gives no Content-Length (the case where
// the body has to be read to learn its size). The fake writes it from a
// shared buffer, so the process's allocations are the client's.
func TestLargeResponseAllocatesLittle(t *testing.T) {
	const (
		body  = 64 * mib
		limit = mib / 4
	)
	f := newFake(t, fixtureScene())
	c := newTestClient(t, f.URL, adminToken, Options{MaxResponseBytes: limit})
	org := scope.New("", ScopeOrg, "acme", "")
	// Warm up connections and lazily built state, so they are not counted.
	_, err := c.Snapshot(t.Context(), org)
	require.NoError(t, err)

	f.InjectFault(maxConcurrentListings, giteatest.Fault{LargeBody: body})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = c.Snapshot(t.Context(), org)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, ErrBadResponse)

	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("refusing a %d MiB answer with a %d KiB limit allocated %.2f MiB (%.1f%% of the answer)",
		body/mib, limit>>10, float64(allocated)/mib, 100*float64(allocated)/body)
	// Up to three listings run at once and each may read to the limit,
	// growing its buffer as it goes: about 2 MiB, 4 with -race.
	assert.Less(t, allocated, uint64(body/10), "allocations stay far below the answer's size")
}

// TestRefusingLargeAnswersEverywhereKeepsTheHeapSmall is the worst case of
// a broken Gitea or proxy: every listing of the default 4 workers gets a
// 64 MiB answer at once. The heap, sampled while they run, stays below the
// size of one answer; its peak is the figure the default limit is chosen by.
func TestRefusingLargeAnswersEverywhereKeepsTheHeapSmall(t *testing.T) {
	const (
		body    = 64 * mib
		workers = 4
	)
	f := newFake(t, fixtureScene())
	// Twelve listings of 64 MiB at once are slow to stream on a loaded
	// machine: the refusal by size, not the clock, is under test.
	c := newTestClient(t, f.URL, adminToken, Options{Timeout: time.Minute})
	org := scope.New("", ScopeOrg, "acme", "")
	_, err := c.Snapshot(t.Context(), org)
	require.NoError(t, err)
	f.InjectFault(workers*maxConcurrentListings*3, giteatest.Fault{LargeBody: body})

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	peak := sampleHeapPeak(t, func() {
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range 3 {
					_, err := c.Snapshot(t.Context(), org)
					assert.ErrorIs(t, err, ErrBadResponse)
				}
			})
		}
		wg.Wait()
	})

	t.Logf("%d workers refusing %d MiB answers with the default %d MiB limit: heap peaked at %.1f MiB (%.1f MiB before)",
		workers, body/mib, DefaultMaxResponseBytes/mib, float64(peak)/mib, float64(base.HeapAlloc)/mib)
	assert.Less(t, peak, uint64(body), "no answer was read whole")
}

// sampleHeapPeak runs f and returns the largest heap seen while it ran.
func sampleHeapPeak(t *testing.T, f func()) uint64 {
	t.Helper()
	done := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var (
			m       runtime.MemStats
			highest uint64
		)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&m)
			highest = max(highest, m.HeapAlloc)
			select {
			case <-done:
				peak <- highest
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(done)
	return <-peak
}

// TestErrorMessagesEchoOnlyGiteasOwn: a status, condition or event shows
// Gitea's own {"message": ...} (shortened), never another body: a proxy's
// page says nothing the status code does not, and may say much.
func TestErrorMessagesEchoOnlyGiteasOwn(t *testing.T) {
	long := strings.Repeat("é", 500)
	tests := []struct {
		name    string
		fault   giteatest.Fault
		wantMsg string
	}{
		{name: "Gitea's JSON message", fault: giteatest.Fault{Status: 403, Body: `{"message":"user should be the site admin","url":"x"}`},
			wantMsg: "user should be the site admin"},
		{name: "a long JSON message is cut on a rune boundary", fault: giteatest.Fault{Status: 500, Body: `{"message":"` + long + `"}`},
			wantMsg: strings.Repeat("é", maxMessageRunes) + "…"},
		{name: "plain text", fault: giteatest.Fault{Status: 502, Body: "502 Bad Gateway\n", ContentType: "text/plain"}},
		{name: "HTML", fault: giteatest.Fault{Status: 503, Body: "<html><body>maintenance " + long + "</body></html>", ContentType: "text/html"}},
		{name: "JSON without a message", fault: giteatest.Fault{Status: 500, Body: `{"error":"internal","detail":"` + long + `"}`}},
		{name: "a message that is not a string", fault: giteatest.Fault{Status: 500, Body: `{"message":{"nested":"` + long + `"}}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, fixtureScene())
			f.InjectFault(faultCount(tt.fault), tt.fault)
			c := newTestClient(t, f.URL, adminToken, Options{})

			_, err := c.Snapshot(t.Context(), scope.New("", ScopeOrg, "acme", ""))

			var apiErr *APIError
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, tt.fault.Status, apiErr.Status)
			assert.Equal(t, tt.wantMsg, apiErr.Message)
			// Which listing meets the fault varies, and with it the length of
			// the URL the error names; the rest is bounded.
			assert.LessOrEqual(t, utf8.RuneCountInString(err.Error()), maxMessageRunes+utf8.RuneCountInString(apiErr.URL)+60, "the whole error stays short")
		})
	}
}
