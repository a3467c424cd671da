// Package reaper removes runners: it deletes runner Jobs and removes their
// registrations from Gitea, each only after the confirmation says the
// runner runs no job. A Reaper talks to one Gitea runners client (a
// group's API token, or the platform's for the sweep of deleted
// namespaces); a dry run only says what it would delete.
//
// The files (TestEveryFileMapNamesEveryFile keeps this map whole):
//
//	reaper.go     the Reaper, the group it works for and its tally, a runner
//	              Job's deletion and a runner's disable
//	confirm.go    the confirmation every deletion of a runner goes through
//	idle.go       idle surplus runners, and runners that can take no work
//	orphans.go    registrations whose runner Job is gone
//	unused.go     registrations runners left when their Job completed
//	              without a job
//	former.go     the group's runners in a place that no longer serves it
//	deletedns.go  whether a recorded namespace is gone, and the
//	              registrations a gone namespace's groups left
//	leftbehind.go the registrations deleted groups or namespaces left
//	              behind, removed once confirmed
package reaper

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/plan"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// Reaper deletes runner Jobs (Kube) and registrations (Runners). With
// DryRun it deletes nothing and writes what it would remove to Out.
type Reaper struct {
	Runners gitea.Runners
	Kube    kubernetes.Interface
	DryRun  bool
	Out     io.Writer
}

// Group is the RunnerGroup whose runners a reap removes: where it logs,
// says so in events, and counts what it removed.
type Group struct {
	RG  *v1alpha1.RunnerGroup
	Log *slog.Logger
	// Event records an event on the group; a dry run records none.
	Event func(ctx context.Context, typ, reason, message string)
	// Where is where a runner Job's runner registers and its registrations
	// there, as the pass's listings say.
	Where func(ctx context.Context, j *batchv1.Job) (scope.Place, []gitea.Runner)
	// Coming names, from the group's state read afresh, the runner Jobs
	// that claims still in flight name: a pass registers a runner after
	// saving its claim and before creating its Job, so a registration
	// seen before its Job exists is not yet an orphan.
	Coming func(ctx context.Context) (map[string]bool, error)
	Tally  *Tally
}

// Tally is what the group's lifecycle step saw and did, for its status and
// the pass's summary.
type Tally struct {
	// Idle and Starting count the active runner Jobs whose runner runs no
	// job, by whether their pod has run, less those this step deleted.
	Idle, Starting int
	// Stuck are the runner Jobs deleted (or, in a dry run, that would be)
	// because their pod did not start in time.
	Stuck []plan.Stuck
	// Unused are the runner Jobs that completed without their runner
	// taking a job (RemoveUnused).
	Unused []string
	// Reaped counts idle runner Jobs deleted and orphan registrations
	// removed; Orphans counts the latter alone.
	Reaped, Orphans int
	// DeletedJobs counts the runner Jobs this step deleted, which the
	// listing still showed as active.
	DeletedJobs int
}

// DeleteJob deletes one runner Job, only if it is still the one listed
// (same UID), with its pods. gone says it was not there to delete: a
// racing pass deleted it first, and that pass counts it, says so in an
// event and removes its registration, so this one does none of that.
func (r Reaper) DeleteJob(ctx context.Context, j *batchv1.Job) (gone bool, err error) {
	bg := metav1.DeletePropagationBackground
	err = r.Kube.BatchV1().Jobs(j.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &j.UID},
		PropagationPolicy: &bg,
	})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

// Disable makes every registration of one runner take no more work. A
// Gitea without the disable endpoint (405) gets the registration deleted
// instead; one that is gone already is fine.
func (r Reaper) Disable(ctx context.Context, t scope.Place, regs []gitea.Runner) error {
	for _, reg := range regs {
		err := r.Runners.DisableRunner(ctx, t, reg.ID)
		var ae *gitea.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusMethodNotAllowed {
			err = r.Runners.DeleteRunner(ctx, t, reg.ID)
		}
		if err != nil && !errors.Is(err, gitea.ErrNotFound) {
			return err
		}
	}
	return nil
}
