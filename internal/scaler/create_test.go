package scaler

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
)

var jobsResource = schema.GroupResource{Group: "batch", Resource: "jobs"}

func TestARefusedJobCreationReleasesTheClaim(t *testing.T) {
	refusals := map[string]error{
		"quota":     apierrors.NewForbidden(jobsResource, "ci-n0001", errors.New("exceeded quota: jobs, requested: count/jobs.batch=1")),
		"admission": apierrors.NewForbidden(jobsResource, "ci-n0001", errors.New("admission webhook denied the request")),
		"invalid":   apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "ci-n0001", nil),
	}
	for name, refusal := range refusals {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, newGroup("ci", 5))
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
			e.kube.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, refusal
			})

			sum := e.pass()

			assert.Equal(t, []string{"runners/ci"}, sum.Failed)
			assert.Empty(t, e.claims("ci"), "the next pass retries at once instead of after the TTL")
			ready := meta.FindStatusCondition(e.group("ci").Status.Conditions, v1alpha1.ConditionReady)
			assert.Equal(t, v1alpha1.ReasonJobCreateFailed, ready.Reason)
			assert.Contains(t, ready.Message, "runner Job for Gitea job 1: "+strings.ReplaceAll(refusal.Error(), "ci-n0001", "<runner Job>"),
				"the message names the Gitea job, not the random Job name, so a repeated refusal reads the same")
		})
	}
}

// A create whose answer is lost may have written the Job. The claim stays
// (the next pass lists the Job, or the claim expires after the TTL), so a
// second runner is never started for it by the very next pass.
func TestACreateWithAnUnknownOutcomeKeepsTheClaim(t *testing.T) {
	for _, written := range []bool{false, true} {
		t.Run(map[bool]string{false: "the Job was not written", true: "the Job was written"}[written], func(t *testing.T) {
			e := newEnv(t, newGroup("ci", 5))
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
			lost := true
			e.kube.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if !lost {
					return false, nil, nil
				}
				lost = false
				if written {
					obj := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job)
					require.NoError(t, e.kube.Tracker().Create(batchv1.SchemeGroupVersion.WithResource("jobs"), obj, obj.Namespace))
				}
				return true, nil, apierrors.NewTimeoutError("the request timed out", 1)
			})

			sum := e.pass()
			if written {
				assert.NoError(t, sum.Err(), "the Job is there: the create worked")
				assert.Equal(t, 1, sum.Created)
			} else {
				assert.Equal(t, []string{"runners/ci"}, sum.Failed)
				assert.Contains(t, e.claims("ci"), int64(1), "the claim stays: the Job may yet appear")
			}

			sum = e.pass()
			assert.Zero(t, sum.Created, "the next pass does not start a second runner while the claim or its Job stands")
			assert.LessOrEqual(t, len(e.jobs()), 1)
		})
	}
}

// A pass cancelled by SIGTERM or its deadline still releases refused claims
// and records its status, on a short context of its own.
func TestACancelledPassStillReleasesAndRecords(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
	ctx, cancel := context.WithCancel(context.Background())
	e.kube.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		cancel()
		return true, nil, apierrors.NewForbidden(jobsResource, "ci-n0001", errors.New("exceeded quota"))
	})

	sum, err := e.scaler().Pass(ctx)
	require.NoError(t, err)

	assert.Equal(t, []string{"runners/ci"}, sum.Failed)
	assert.Empty(t, e.claims("ci"), "released though the pass was cancelled")
	ready := meta.FindStatusCondition(e.group("ci").Status.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, ready, "recorded though the pass was cancelled")
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
}

// The same refusal pass after pass is one Warning event, not one a pass:
// its message names the Gitea job, not each pass's new random Job name.
func TestARepeatedRefusalIsOneEvent(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
	e.kube.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job).Name
		return true, nil, apierrors.NewForbidden(jobsResource, name, errors.New("exceeded quota: jobs"))
	})
	for range 5 {
		e.pass()
	}
	warnings := 0
	for _, ev := range e.events() {
		if ev.Reason == v1alpha1.ReasonJobCreateFailed {
			warnings++
		}
	}
	assert.Equal(t, 1, warnings)
}

// Claims whose creates were never sent because the pass was cancelled go,
// so they do not hold slots for the spawn TTL.
func TestClaimsNeverSentAreReleasedOnCancel(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest"), queued(2, "ubuntu-latest"), queued(3, "ubuntu-latest")}}
	ctx, cancel := context.WithCancel(context.Background())
	e.kube.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		cancel() // the first create is written, then SIGTERM
		return false, nil, nil
	})

	_, err := e.scaler().Pass(ctx)
	require.NoError(t, err)

	require.Len(t, e.jobs(), 1)
	assert.Len(t, e.claims("ci"), 1, "only the claim of the Job that was sent stays")
}
