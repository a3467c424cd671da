package scaler

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/reason"
)

// crdMessageLimit is the maxLength the CRD gives a condition's message
// (metav1.Condition's own); the API server refuses a longer one.
const crdMessageLimit = 32768

// refuseLongConditionMessages makes the fake refuse a status patch as the
// API server does when a condition's message is over the CRD's limit.
func refuseLongConditionMessages(e *env) {
	e.dyn.PrependReactor("patch", "runnergroups", func(a k8stesting.Action) (bool, runtime.Object, error) {
		var body struct {
			Status struct {
				Conditions []metav1.Condition `json:"conditions"`
			} `json:"status"`
		}
		if err := json.Unmarshal(a.(k8stesting.PatchAction).GetPatch(), &body); err != nil {
			return true, nil, err
		}
		for _, c := range body.Status.Conditions {
			if utf8.RuneCountInString(c.Message) > crdMessageLimit {
				return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "gitea.bpg.pw", Kind: "RunnerGroup"}, a.(k8stesting.PatchAction).GetName(), nil)
			}
		}
		return false, nil, nil
	})
}

// Forty runner Jobs refused with the long message a quota gives used to
// make a Ready message past the CRD's limit; the patch was refused and the
// group kept its old Ready=True.
func TestManyCreateFailuresStillReachTheStatus(t *testing.T) {
	e := newEnv(t, newGroup("ci", 50))
	for id := range int64(40) {
		e.gitea.snap.Queued = append(e.gitea.snap.Queued, queued(id+1, "ubuntu-latest"))
	}
	refuseLongConditionMessages(e)
	quota := "exceeded quota: compute-resources, requested: limits.cpu=2, used: limits.cpu=8, limited: limits.cpu=8; " + strings.Repeat("details ", 100)
	e.kube.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "x", errors.New(quota))
	})

	sum := e.pass()

	assert.Equal(t, []string{"runners/ci"}, sum.Failed)
	ready := readyOf(t, e, "ci")
	assert.Equal(t, metav1.ConditionFalse, ready.Status, "the status patch landed")
	assert.Equal(t, v1alpha1.ReasonJobCreateFailed, ready.Reason)
	assert.LessOrEqual(t, utf8.RuneCountInString(ready.Message), maxMessageRunes)
	assert.Contains(t, ready.Message, "exceeded quota", "the first causes are shown")
	for _, ev := range e.events() {
		assert.LessOrEqual(t, utf8.RuneCountInString(ev.Message), maxMessageRunes)
	}
}

// manyCauses is an error with n causes, as a step that fails for several
// runner Jobs makes it.
func manyCauses(n int, cause func(i int) string) error {
	var causes []any
	for i := range n {
		causes = append(causes, errors.New(cause(i)))
	}
	format := "cannot create %d runner Job(s): " + strings.TrimSuffix(strings.Repeat("%w; ", n), "; ")
	return fmt.Errorf(format, append([]any{n}, causes...)...)
}

func TestBoundMessage(t *testing.T) {
	short := func(i int) string { return fmt.Sprintf("Job ci-%d: forbidden", i) }
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "one cause", err: errors.New("spec.org is required"), want: "spec.org is required"},
		{name: "three causes are all shown", err: manyCauses(3, short),
			want: "cannot create 3 runner Job(s): Job ci-0: forbidden; Job ci-1: forbidden; Job ci-2: forbidden"},
		{name: "more are counted", err: manyCauses(40, short),
			want: "cannot create 40 runner Job(s): Job ci-0: forbidden; Job ci-1: forbidden; Job ci-2: forbidden; and 37 more"},
		{name: "wrapped in a group error", err: reason.Errorf(v1alpha1.ReasonJobCreateFailed, "%w", manyCauses(5, short)),
			want: "cannot create 5 runner Job(s): Job ci-0: forbidden; Job ci-1: forbidden; Job ci-2: forbidden; and 2 more"},
		{name: "joined", err: errors.Join(errors.New("a"), errors.New("b"), errors.New("c"), errors.New("d")),
			want: "a\nb\nc; and 1 more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, boundMessage(tt.err))
		})
	}
}

func TestBoundMessageCutsLongTextOnARuneBoundary(t *testing.T) {
	long := strings.Repeat("ü", 3000)
	tests := []struct {
		name string
		err  error
	}{
		{name: "one long cause", err: errors.New(long)},
		{name: "long causes", err: manyCauses(10, func(int) string { return long })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := boundMessage(tt.err)
			assert.True(t, utf8.ValidString(got))
			assert.LessOrEqual(t, utf8.RuneCountInString(got), maxMessageRunes)
			assert.Contains(t, got, "…", "a cut says so")
		})
	}
	assert.True(t, strings.HasSuffix(boundMessage(manyCauses(10, func(int) string { return long })), "; and 7 more"),
		"long causes are cut each, so the count survives")
}

func warnings(e *env) []string {
	var out []string
	for _, ev := range e.events() {
		if ev.Type == "Warning" {
			out = append(out, ev.Reason+": "+ev.Message)
		}
	}
	return out
}

// A failure that repeats writes one Warning event, not one per pass; a
// different failure, or the same one after a recovery, writes another.
func TestWarningEventsOnChangeOnly(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	unauthorized := &gitea.APIError{Kind: gitea.ErrUnauthorized, URL: "/api/v1/orgs/acme/actions/jobs", Status: 401, Message: "token revoked"}
	forbidden := &gitea.APIError{Kind: gitea.ErrForbidden, URL: "/api/v1/orgs/acme/actions/jobs", Status: 403, Message: "not a member"}

	e.gitea.err = unauthorized
	for range 5 {
		e.pass()
	}
	assert.Len(t, warnings(e), 1, "five identical failing passes write one event")

	e.gitea.err = forbidden
	e.pass()
	e.pass()
	assert.Len(t, warnings(e), 2, "a changed failure writes another")

	e.gitea.err = nil
	e.pass()
	e.gitea.err = forbidden
	e.pass()
	assert.Len(t, warnings(e), 3, "the same failure after a recovery is news again")
	assert.Contains(t, e.logs.String(), "token revoked", "every failing pass is still logged")
}

// The event check compares with what the group's status says, which a
// dry run does not write: it writes no events either.
func TestDryRunWritesNoWarning(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	e.gitea.err = errors.New("refused")
	e.pass(func(_ *Deps, c *Config) { c.DryRun = true })
	assert.Empty(t, warnings(e))
	assert.Nil(t, readyOrNil(e, "ci"))
}

func readyOrNil(e *env, group string) *metav1.Condition {
	for _, c := range e.group(group).Status.Conditions {
		if c.Type == v1alpha1.ConditionReady {
			return &c
		}
	}
	return nil
}
