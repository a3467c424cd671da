// Package reaper removes runners: it deletes runner Jobs and removes their
// registrations from Gitea, each only after the confirmation says the
// runner runs no job. A Reaper talks to one Gitea runners client (a
// group's API token, or the platform's for the sweep of deleted
// namespaces); a dry run only says what it would delete.
//
// The files (TestTheFileMapNamesEveryFile keeps this map whole):
//
//	reaper.go     the Reaper, a runner Job's deletion and a runner's disable
//	confirm.go    the confirmation every deletion of a runner goes through
//	leftbehind.go the registrations deleted groups or namespaces left
//	              behind, removed once confirmed
package reaper

import (
	"context"
	"errors"
	"io"
	"net/http"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
)

// Reaper deletes runner Jobs (Kube) and registrations (Runners). With
// DryRun it deletes nothing and writes what it would remove to Out.
type Reaper struct {
	Runners gitea.Runners
	Kube    kubernetes.Interface
	DryRun  bool
	Out     io.Writer
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
func (r Reaper) Disable(ctx context.Context, t gitea.Target, regs []gitea.Runner) error {
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
