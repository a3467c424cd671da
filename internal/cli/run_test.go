package cli

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scaler"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// A run returns ExitFailed when a group failed, so the CronJob's Job shows
// as failed, and ExitOK when every group was served.
func TestRunExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		giteaErr error
		want     int
	}{
		{name: "all groups served", want: ExitOK},
		{name: "a group failed", giteaErr: &gitea.APIError{Kind: gitea.ErrServer, URL: "/x", Status: 502}, want: ExitFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube, groups := oneGlobalGroup()
			factory := func(string, string) (gitea.Client, error) { return fixedGitea{tc.giteaErr}, nil }
			r, err := parse(t)
			require.NoError(t, err)
			var out bytes.Buffer
			code := r.runWith(scaler.Deps{Kube: kube, Groups: groups, Gitea: factory, Log: slog.New(slog.NewTextHandler(&out, nil)), Out: &out})
			assert.Equal(t, tc.want, code, out.String())
		})
	}
}

type staticGroups []v1alpha1.RunnerGroup

// oneGlobalGroup is a cluster with one valid global RunnerGroup and its Secret.
func oneGlobalGroup() (*fake.Clientset, staticGroups) {
	kube := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{tenancy.LabelEnforce: tenancy.LevelPrivileged}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Labels: map[string]string{tenancy.SecretLabel: "true"},
			Annotations: map[string]string{tenancy.AnnotationRegistrationKeys: "reg", tenancy.AnnotationAPIKeys: "k"}},
			Data: map[string][]byte{"k": []byte("tok"), "reg": []byte("reg-tok")}},
	)
	// The namespace is enabled: the scaler may do anything there.
	kube.PrependReactor("create", "selfsubjectrulesreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		rr := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectRulesReview).DeepCopy()
		rr.Status.ResourceRules = []authorizationv1.ResourceRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}
		return true, rr, nil
	})
	return kube, staticGroups{{
		ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ns", UID: "u"},
		Spec: v1alpha1.RunnerGroupSpec{
			Scope: v1alpha1.ScopeGlobal, Gitea: v1alpha1.GiteaSpec{URL: "http://gitea.test:1"}, MaxActiveRunners: 1,
			RegistrationToken: &v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "s", Key: "reg"}},
			AuthToken:         v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "s", Key: "k"}},
		},
	}}
}

func (s staticGroups) List(context.Context, string, string) ([]v1alpha1.RunnerGroup, []runnergroups.Broken, error) {
	return s, nil, nil
}

func (staticGroups) PatchStatus(context.Context, *v1alpha1.RunnerGroup) error { return nil }

type fixedGitea struct{ err error }

func (f fixedGitea) Snapshot(context.Context, scope.Place) (gitea.Snapshot, error) {
	if f.err != nil {
		return gitea.Snapshot{}, f.err
	}
	return gitea.Snapshot{}, nil
}

// countingGitea sends SIGTERM to the process during the first pass and
// makes that pass outlast the interval, so when it ends both the stop and
// the next tick are due.
type countingGitea struct {
	calls atomic.Int32
}

func (c *countingGitea) Snapshot(context.Context, scope.Place) (gitea.Snapshot, error) {
	if c.calls.Add(1) == 1 {
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		time.Sleep(100 * time.Millisecond)
	}
	return gitea.Snapshot{}, nil
}

// Regression (found end to end): with --loop, a SIGTERM during a pass
// longer than --interval could start one more pass. This runs it with the
// flags and a real signal; internal/scaler's loop tests cover the rest.
func TestLoopStopsAfterThePassInFlight(t *testing.T) {
	for round := range 5 {
		kube, groups := oneGlobalGroup()
		g := &countingGitea{}
		r, err := parse(t, "--loop", "--interval", "10ms")
		require.NoError(t, err)
		var out bytes.Buffer
		code := r.runWith(scaler.Deps{Kube: kube, Groups: groups, Gitea: func(string, string) (gitea.Client, error) { return g, nil },
			Log: slog.New(slog.NewTextHandler(&out, nil)), Out: &out})
		assert.Equal(t, ExitOK, code)
		assert.EqualValues(t, 1, g.calls.Load(), "round %d: a pass started after SIGTERM", round)
	}
}
