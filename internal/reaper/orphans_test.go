package reaper

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// An orphan registration (ephemeral, offline, its runner Job gone) is
// removed only once the confirmation and the API server agree: a runner
// that runs a job, whose Job exists after all, or whose Job a pass is
// creating, is kept, and a dry run only says what it would remove.
func TestAnOrphanIsRemovedOnlyOnceConfirmed(t *testing.T) {
	rg := &v1alpha1.RunnerGroup{ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: "team", UID: "uid-1"}}
	const job = "ci-abcde"
	runner := runnerjob.RunnerName(rg, job)
	orphan := gitea.Runner{ID: 4, Name: runner, Ephemeral: true}
	tests := []struct {
		name      string
		api       runners
		jobExists bool
		coming    bool
		comingErr error
		dryRun    bool
		wantDel   []int64
		wantOut   string
		wantErr   bool
	}{
		{name: "its Job is gone and it runs no job: removed", api: runners{regs: []gitea.Runner{orphan}}, wantDel: []int64{4}},
		{name: "it runs a job after all", api: runners{regs: []gitea.Runner{orphan}, running: []gitea.Job{{ID: 9, RunnerName: runner}}}},
		{name: "its Job exists now", api: runners{regs: []gitea.Runner{orphan}}, jobExists: true},
		{name: "a pass is creating its Job", api: runners{regs: []gitea.Runner{orphan}}, coming: true},
		{name: "whether a pass is creating its Job cannot be read", api: runners{regs: []gitea.Runner{orphan}}, comingErr: errors.New("state unreadable"), wantErr: true},
		{name: "the confirmation cannot be read", api: runners{runErr: gitea.ErrForbidden}, wantErr: true},
		{name: "a dry run says so", api: runners{regs: []gitea.Runner{orphan}}, dryRun: true,
			wantOut: "  would remove runner " + runner + " (ID 4) from Gitea: its runner Job is gone\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube := fake.NewClientset()
			if tt.jobExists {
				_, _ = kube.BatchV1().Jobs("team").Create(context.Background(), &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: job, Namespace: "team"}}, metav1.CreateOptions{})
			}
			var out bytes.Buffer
			var events []string
			tally := &Tally{}
			g := Group{RG: rg, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Tally: tally,
				Event:  func(_ context.Context, _, reason, _ string) { events = append(events, reason) },
				Coming: func(context.Context) (map[string]bool, error) { return map[string]bool{job: tt.coming}, tt.comingErr }}
			r := Reaper{Runners: &tt.api, Kube: kube, DryRun: tt.dryRun, Out: &out}
			errs := r.RemoveOrphans(context.Background(), g, acme, []gitea.Runner{orphan}, map[string]bool{}, map[string]bool{})
			assert.Equal(t, tt.wantErr, len(errs) > 0, "errors: %v", errs)
			assert.Equal(t, tt.wantDel, tt.api.deleted, "registrations removed")
			assert.Equal(t, tt.wantOut, out.String())
			assert.Equal(t, len(tt.wantDel), tally.Orphans)
			assert.Equal(t, len(tt.wantDel), len(events), "one event per removal")
		})
	}
}
