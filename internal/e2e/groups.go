//go:build e2e

// RunnerGroups: specs for a scope, creating, reading and patching groups,
// and waiting for the scaler's passes over them.

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// GroupSpec is a RunnerGroup spec for the fixture's scope (its scope, org,
// user and repo) whose tokens are in the Secret made by tokenSecret.
func (b *Testbed) GroupSpec(fx ScopeFixture, secret string, max int32, labels ...string) v1alpha1.RunnerGroupSpec {
	return v1alpha1.RunnerGroupSpec{
		Scope:             fx.Spec.Scope,
		Org:               fx.Spec.Org,
		User:              fx.Spec.User,
		Repo:              fx.Spec.Repo,
		Gitea:             v1alpha1.GiteaSpec{URL: b.Gitea.Admin.URL()},
		Labels:            labels,
		MaxActiveRunners:  max,
		RegistrationToken: &v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: secret, Key: "registration"}},
		AuthToken:         v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: secret, Key: "api"}},
	}
}

// CreateScopedGroup stores the fixture's tokens in the Secret
// groupSecret(name) and creates RunnerGroup name for the fixture's scope,
// capped at max, with the labels.
func (b *Testbed) CreateScopedGroup(ctx context.Context, t *testing.T, ns, name string, fx ScopeFixture, max int32, labels ...string) *v1alpha1.RunnerGroup {
	t.Helper()
	secret := GroupSecret(name)
	b.TokenSecret(ctx, t, ns, secret, fx.RegToken, fx.APIToken)
	return b.CreateGroup(ctx, t, ns, name, nil, b.GroupSpec(fx, secret, max, labels...))
}

// GroupSecret names the Secret with the tokens of the group createScopedGroup
// made.
func GroupSecret(group string) string { return group + "-tokens" }

func (b *Testbed) Groups(ns string) dynamic.ResourceInterface {
	return b.Dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns)
}

func (b *Testbed) CreateGroup(ctx context.Context, t *testing.T, ns, name string, labels map[string]string, spec v1alpha1.RunnerGroupSpec) *v1alpha1.RunnerGroup {
	t.Helper()
	rg := &v1alpha1.RunnerGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       spec,
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rg)
	require.NoError(t, err)
	created, err := b.Groups(ns).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	require.NoError(t, err, "create RunnerGroup %s/%s", ns, name)
	out := &v1alpha1.RunnerGroup{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(created.Object, out))
	return out
}

func (b *Testbed) Group(ctx context.Context, ns, name string) (*v1alpha1.RunnerGroup, error) {
	got, err := b.Groups(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	out := &v1alpha1.RunnerGroup{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, out); err != nil {
		return nil, err
	}
	return out, nil
}

// PatchGroup merge-patches a RunnerGroup (its spec, as a user would).
func (b *Testbed) PatchGroup(ctx context.Context, t *testing.T, ns, name string, patch map[string]any) *v1alpha1.RunnerGroup {
	t.Helper()
	raw, err := json.Marshal(patch)
	require.NoError(t, err)
	got, err := b.Groups(ns).Patch(ctx, name, types.MergePatchType, raw, metav1.PatchOptions{})
	require.NoError(t, err)
	out := &v1alpha1.RunnerGroup{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, out))
	return out
}

func Condition(rg *v1alpha1.RunnerGroup, typ string) *metav1.Condition {
	for i := range rg.Status.Conditions {
		if rg.Status.Conditions[i].Type == typ {
			return &rg.Status.Conditions[i]
		}
	}
	return nil
}

// StatusLine is a RunnerGroup's status in one line, for failure messages.
func StatusLine(rg *v1alpha1.RunnerGroup) string {
	if rg == nil {
		return "<none>"
	}
	s := rg.Status
	line := fmt.Sprintf("%s: gen=%d observed=%d active=%d queued=%d blocked=%d running=%d", rg.Name, rg.Generation, s.ObservedGeneration, s.ActiveRunners, s.QueuedJobs, s.BlockedJobs, s.RunningJobs)
	if s.LastCheckTime != nil {
		line += " lastCheck=" + s.LastCheckTime.UTC().Format(time.RFC3339)
	}
	for _, c := range s.Conditions {
		line += fmt.Sprintf(" %s=%s/%s(%q)", c.Type, c.Status, c.Reason, c.Message)
	}
	return line
}

// WaitPasses waits until n more passes than now have served the group, so
// that a test can say "for several passes, this did not happen"; n = 0
// waits for the group's first recorded pass. A pass that changes nothing
// writes no status (lastCheckTime moves only with a change or every
// scaler.StatusHeartbeat), so passes are counted by the listeners' own
// "group recorded" log line, which every pass writes for every group it
// served at debug level (the e2e listeners log at debug).
func (b *Testbed) WaitPasses(ctx context.Context, t *testing.T, ns, name string, n int, dump func() string, check func(ctx context.Context) error) {
	t.Helper()
	start := -1
	WaitUntil(ctx, t, StepWait, fmt.Sprintf("%d more passes over RunnerGroup %s/%s", n, ns, name), dump, func(ctx context.Context) (bool, string, error) {
		if check != nil {
			if err := check(ctx); err != nil {
				return false, "", err
			}
		}
		rg, err := b.Group(ctx, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		if rg.Status.LastCheckTime == nil || n == 0 {
			return rg.Status.LastCheckTime != nil, StatusLine(rg), nil
		}
		seen := b.passesLogged(ns, name)
		if start < 0 {
			start = seen
		}
		return seen-start >= n, fmt.Sprintf("%d of %d passes; %s", seen-start, n, StatusLine(rg)), nil
	})
}

// passesLogged counts the "group recorded" lines for ns/name in every
// listener's log on the bed (the agent appends each container's output to
// TESTBED_DIR/logs/pods/<namespace>_<pod>_<container>.log as it comes).
func (b *Testbed) passesLogged(ns, name string) int {
	files, _ := filepath.Glob(filepath.Join(b.Dir, "logs", "pods", "*_listener.log"))
	group := "runnergroup=" + ns + "/" + name + " "
	count := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.Contains(line, `msg="group recorded"`) && strings.Contains(line, group) {
				count++
			}
		}
	}
	return count
}
