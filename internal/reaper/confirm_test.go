package reaper

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// runners is a Gitea runners API of one place: its registrations, its
// in_progress jobs, and what was disabled and deleted.
type runners struct {
	regs              []gitea.Runner
	running           []gitea.Job
	listErr, runErr   error
	disableErr        error
	disabled, deleted []int64
}

func (r *runners) ListRunners(context.Context, scope.Place) ([]gitea.Runner, error) {
	return r.regs, r.listErr
}

func (r *runners) InProgress(context.Context, scope.Place) ([]gitea.Job, error) {
	return r.running, r.runErr
}

func (r *runners) DisableRunner(_ context.Context, _ scope.Place, id int64) error {
	if r.disableErr != nil {
		return r.disableErr
	}
	r.disabled = append(r.disabled, id)
	return nil
}

func (r *runners) DeleteRunner(_ context.Context, _ scope.Place, id int64) error {
	r.deleted = append(r.deleted, id)
	return nil
}

var acme = scope.New("", gitea.ScopeOrg, "acme", "")

// Any doubt keeps the runner: one that runs a job, one Gitea calls busy,
// and one to go for having no registration that has one after all.
func TestTheConfirmationKeepsAnyRunnerInDoubt(t *testing.T) {
	tests := []struct {
		name         string
		api          runners
		unregistered bool
		want         string
	}{
		{name: "idle and registered: it may go",
			api: runners{regs: []gitea.Runner{{ID: 1, Name: "r"}}}},
		{name: "runs a job",
			api:  runners{regs: []gitea.Runner{{ID: 1, Name: "r"}}, running: []gitea.Job{{ID: 7, RunnerName: "r"}}},
			want: "it runs a job"},
		{name: "one of its registrations is busy",
			api:  runners{regs: []gitea.Runner{{ID: 1, Name: "r"}, {ID: 2, Name: "r", Busy: true}}},
			want: "Gitea calls it busy (it may be cleaning up after a cancelled job)"},
		{name: "taken for unregistered, but registered after all",
			api: runners{regs: []gitea.Runner{{ID: 1, Name: "r"}}}, unregistered: true,
			want: "it is registered after all"},
		{name: "taken for unregistered, and still not registered: it may go",
			api: runners{regs: []gitea.Runner{{ID: 1, Name: "other"}}}, unregistered: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Reaper{Runners: &tt.api}.Confirm(context.Background(), acme)
			require.NoError(t, err)
			assert.Equal(t, tt.want, c.Keeps("r", tt.unregistered))
		})
	}
}

// A confirmation that cannot be read in full is no confirmation.
func TestAConfirmationNotReadInFullIsAnError(t *testing.T) {
	tests := []struct {
		name string
		api  runners
	}{
		{name: "the running jobs", api: runners{runErr: gitea.ErrForbidden}},
		{name: "the registrations", api: runners{listErr: errors.New("timeout")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Reaper{Runners: &tt.api}.Confirm(context.Background(), acme)
			assert.Error(t, err)
		})
	}
}

// A Gitea without the disable endpoint gets the registration deleted; one
// that is gone already is disabled enough.
func TestDisableFallsBackToDeleting(t *testing.T) {
	regs := []gitea.Runner{{ID: 1, Name: "r"}}
	tests := []struct {
		name                  string
		disableErr            error
		wantErr               bool
		wantDisabled, wantDel []int64
	}{
		{name: "disabled", wantDisabled: []int64{1}},
		{name: "no disable endpoint: deleted", disableErr: &gitea.APIError{Status: http.StatusMethodNotAllowed}, wantDel: []int64{1}},
		{name: "gone already", disableErr: gitea.ErrNotFound},
		{name: "refused", disableErr: gitea.ErrForbidden, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &runners{disableErr: tt.disableErr}
			err := Reaper{Runners: api}.Disable(context.Background(), acme, regs)
			assert.Equal(t, tt.wantErr, err != nil, "error: %v", err)
			assert.Equal(t, tt.wantDisabled, api.disabled)
			assert.Equal(t, tt.wantDel, api.deleted)
		})
	}
}
