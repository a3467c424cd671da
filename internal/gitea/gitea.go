// Package gitea is the scaler's view of Gitea Actions demand: for one
// RunnerGroup target it lists the jobs that wait for a runner (queued), the
// jobs that cannot run yet (blocked) and the jobs that run now (running).
//
// The status sets follow what Gitea v1.26.0 really does, which differs from a
// naive reading of the API docs:
//
//   - Demand is status=queued only. Gitea reports its internal state
//     "Waiting" (ready, waiting for a runner) as "queued"
//     (services/convert/convert.go, ToActionsStatus).
//   - Blocked is status=waiting: jobs whose needs: have not finished or that
//     wait for approval (internal state "Blocked"). The filter values
//     "pending", "waiting", "requested" and "action_required" all map to the
//     same single internal state StatusBlocked
//     (routers/api/v1/shared/action.go, convertToInternal; the states are in
//     models/actions/status.go). So "pending" is the same set as "waiting";
//     asking for both would only return every blocked job twice. We ask for
//     "waiting" alone.
//   - Running is status=in_progress (internal "Running"); status=running is
//     rejected with 400 "Invalid status running".
//
// Label matching is not done here: jobs carry their raw runs-on labels and
// the scaler decides which group serves them.
package gitea

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// Scope says which Gitea listing covers a target: the RunnerGroup's
// spec.scope, so the scope names are defined once, in the API.
type Scope = v1alpha1.Scope

// The scopes a RunnerGroup can have.
const (
	ScopeGlobal = v1alpha1.ScopeGlobal
	ScopeOrg    = v1alpha1.ScopeOrg
	ScopeUser   = v1alpha1.ScopeUser
	ScopeRepo   = v1alpha1.ScopeRepo
)

type targetKey struct{}

// WithTarget marks the requests made with ctx as made for t, the target
// a group's spec names: whatever paths its listing leads to (a user
// scope lists each of the user's repositories), they count for t.
func WithTarget(ctx context.Context, t scope.Place) context.Context {
	return context.WithValue(ctx, targetKey{}, t)
}

// RequestTarget is the target a request's context was marked with by
// WithTarget; every call of the client marks its requests.
func RequestTarget(ctx context.Context) (scope.Place, bool) {
	t, ok := ctx.Value(targetKey{}).(scope.Place)
	return t, ok
}

// validate rejects targets that would make us list the wrong thing, such as
// an org target without an org (which would otherwise hit a different URL).
func validate(t scope.Place) error {
	if err := t.Check(); err != nil {
		return fmt.Errorf("gitea: %w", err)
	}
	return nil
}

// Job is one Gitea Actions job as the scaler needs it. Which list of a
// Snapshot it is in says its status.
type Job struct {
	ID int64
	// Labels are the job's runs-on labels, unchanged.
	Labels []string
	// RunnerName is the name the runner registered with; set once a runner
	// has taken the job.
	RunnerName string
	// Created is when Gitea created the job (created_at): the start of
	// the time from queued to runner that the metrics report.
	Created time.Time
	// Started is when a runner took the job (started_at); zero until one
	// has.
	Started time.Time
	// Repo is "owner/name", parsed from the job's html_url or url. Empty when
	// neither can be parsed and the listing did not cover a single repository.
	//
	// The pass does not read it yet. It is what lets a job seen in a global
	// or org listing go to the one group whose scope most closely contains
	// its repository, when several groups could run it.
	Repo string
}

// Stamp is a job's timestamp as Gitea sends it, or zero for the Unix
// epoch Gitea sends for a time not yet reached (a queued job's start).
func Stamp(t time.Time) time.Time {
	if t.Unix() <= 0 {
		return time.Time{}
	}
	return t
}

// Snapshot is the demand of one target at one moment. A job ID appears in at
// most one of the three lists (see Client.Snapshot for how a job that moves
// between listings is placed). Each list is sorted by ID.
type Snapshot struct {
	// Queued jobs are ready and wait for a runner: the demand.
	Queued []Job
	// Blocked jobs wait for their needs: or for approval; a runner started
	// for them would have nothing to do yet.
	Blocked []Job
	// Running jobs have been taken by a runner.
	Running []Job
	// Unlisted counts the jobs Gitea could not list: their page answered
	// 500 until it was read around them, as it does for a job whose
	// repository is gone (readaround.go). No runner is started for them.
	Unlisted int
}

// Factory returns a Client for one Gitea instance and API token.
type Factory func(baseURL, token string) (Client, error)

// Client reads Gitea Actions demand. Implementations are safe for
// concurrent use.
type Client interface {
	// Snapshot lists the queued, blocked and running jobs of the target,
	// reading every page. It fails as a whole: a partial view is never
	// returned, because acting on it could start too many or too few
	// runners.
	Snapshot(ctx context.Context, t scope.Place) (Snapshot, error)
}

// Options tune a Client. The zero value is usable.
type Options struct {
	// Timeout bounds each HTTP request (not the whole Snapshot, which makes
	// several). Default 10s.
	Timeout time.Duration
	// PageSize is the limit asked for per page. Default 50, which is also
	// Gitea's default MAX_RESPONSE_ITEMS: Gitea caps larger values.
	PageSize int
	// HTTPClient sends the requests. Default: a plain http.Client using
	// http.DefaultTransport.
	HTTPClient *http.Client
	// UserAgent is sent with every request. Default "gitea-runner-operator".
	UserAgent string
	// MaxResponseBytes bounds each answer's body. A larger one fails its
	// request (ErrBadResponse, or the error status's kind) instead of
	// being read whole, so a runaway listing or a proxy's endless page
	// cannot take the scaler's memory. Default DefaultMaxResponseBytes.
	MaxResponseBytes int64
}

// Defaults for Options.
const (
	DefaultTimeout   = 10 * time.Second
	DefaultPageSize  = 50
	DefaultUserAgent = "gitea-runner-operator"
	// DefaultMaxResponseBytes is 2 MiB. A full page of 50 jobs or 50
	// repositories is about 100-300 KiB, so real answers have several times
	// the room they need. Reading up to the limit costs a few times the
	// limit while the body grows: with the default 4 workers all refusing
	// oversized answers at once (3 listings each) the heap peaked at about
	// 25 MiB (53 MiB at 4 MiB), inside the listener's default 128 MiB.
	DefaultMaxResponseBytes = 2 << 20
)

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	return o
}
