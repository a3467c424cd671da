package giteatest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
)

// Runner is a registered Actions runner. Owner and Repo say its scope as
// Gitea stores it: both empty for a global runner, Owner alone for an org's
// or a user's, both for a repository's.
type Runner struct {
	ID        int64
	Name      string
	Owner     string
	Repo      string
	Online    bool
	Disabled  bool
	Ephemeral bool
	// Active runners reported on a task in the last seconds: Gitea's busy
	// flag (status active), which also orders 1.27's listing.
	Active bool
	// Labels are the label names it declared.
	Labels []string
}

type runnerLabelJSON struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
}

type runnerJSON struct {
	ID        int64             `json:"id"`
	Name      string            `json:"name"`
	Status    string            `json:"status"`
	Busy      bool              `json:"busy"`
	Disabled  bool              `json:"disabled"`
	Ephemeral bool              `json:"ephemeral"`
	Labels    []runnerLabelJSON `json:"labels"`
}

func toRunnerJSON(r *Runner) runnerJSON {
	out := runnerJSON{ID: r.ID, Name: r.Name, Status: "offline", Busy: r.Online && r.Active, Disabled: r.Disabled, Ephemeral: r.Ephemeral, Labels: []runnerLabelJSON{}}
	if r.Online {
		out.Status = "online"
	}
	for i, l := range r.Labels {
		out.Labels = append(out.Labels, runnerLabelJSON{ID: int64(i), Name: l, Type: "custom"})
	}
	return out
}

// AddRunner registers a runner, or replaces the one with the same ID.
func (s *Server) AddRunner(r Runner) error {
	if r.ID <= 0 {
		return fmt.Errorf("giteatest: runner ID %d must be positive", r.ID)
	}
	if r.Repo != "" && r.Owner == "" {
		return fmt.Errorf("giteatest: runner %d: a repository runner needs an owner", r.ID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Labels = slices.Clone(r.Labels)
	s.runners[r.ID] = &r
	return nil
}

// Runners returns the registered runners, by ID.
func (s *Server) Runners() []Runner {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Runner, 0, len(s.runners))
	for _, r := range s.runners {
		c := *r
		c.Labels = slices.Clone(r.Labels)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Runner) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// runnersRoute answers /actions/runners[/{id}] of one scope, which the
// caller resolved and authorised: inScope says which runners the scope
// sees and may change (Gitea's EditableInContext).
func (s *Server) runnersRoute(r *http.Request, idSeg string, inScope func(*Runner) bool) reply {
	if idSeg == "" {
		if r.Method != http.MethodGet {
			return s.errorReply(http.StatusMethodNotAllowed, "method not allowed")
		}
		return s.listRunners(r, inScope)
	}
	id, err := strconv.ParseInt(idSeg, 10, 64)
	if err != nil {
		return s.errorReply(http.StatusBadRequest, "invalid runner id")
	}
	rn := s.runners[id]
	switch {
	case rn == nil:
		return s.runnerNotFound(id)
	case !inScope(rn):
		return s.notFoundReply("No permission to access this runner", nil)
	}
	switch r.Method {
	case http.MethodGet:
		return s.jsonReply(http.StatusOK, toRunnerJSON(rn), nil)
	case http.MethodDelete:
		delete(s.runners, id)
		return reply{status: http.StatusNoContent}
	case http.MethodPatch:
		var body struct {
			Disabled *bool `json:"disabled"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Disabled == nil {
			return s.errorReply(http.StatusUnprocessableEntity, "[Disabled]: Required")
		}
		rn.Disabled = *body.Disabled
		return s.jsonReply(http.StatusOK, toRunnerJSON(rn), nil)
	}
	return s.errorReply(http.StatusMethodNotAllowed, "method not allowed")
}

// listRunners is Gitea 1.26's runners listing: the page in the body with
// total_count, and neither Link nor X-Total-Count headers.
func (s *Server) listRunners(r *http.Request, inScope func(*Runner) bool) reply {
	var all []*Runner
	for _, rn := range s.runners {
		if inScope(rn) {
			all = append(all, rn)
		}
	}
	// Gitea lists the runners seen online last first: online ones, then
	// (in the fake) the newest.
	slices.SortFunc(all, func(a, b *Runner) int {
		if a.Online != b.Online {
			if a.Online {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.ID, a.ID)
	})
	s.reorderRunners(all)
	page, size := pageParams(r)
	items := make([]runnerJSON, 0)
	for _, rn := range pageOf(all, page, size) {
		items = append(items, toRunnerJSON(rn))
	}
	return s.jsonReply(http.StatusOK, map[string]any{"runners": items, "total_count": len(all)}, nil)
}
