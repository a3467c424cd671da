//go:build e2e

// A runner Job whose image the bed's registry does not have, on the real
// node: its real kubelet reports the pull failure, the scaler frees the
// runner with that reason, and the Gitea job gets a new runner (Gitea's
// real runner, on the fake nodes) that runs it.

package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// pullFailures are the waiting reasons a kubelet gives a container whose
// image it cannot pull: the first try, then its back-off.
var pullFailures = []string{"ErrImagePull", "ImagePullBackOff"}

// TestRealNodeRunnerWhoseImageCannotBePulledIsFreed: the group's template
// puts its runner on the real node with an image the registry lacks; the
// pass after the start timeout deletes the runner Job and says why on the
// group, in the kubelet's words; once the template is fixed the job's next
// runner runs it.
func TestRealNodeRunnerWhoseImageCannotBePulledIsFreed(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	n := readRealNode(b, t)
	ctx := e2e.TestContext(t, 8*time.Minute)
	const (
		group    = "pull"
		start    = 20 * time.Second
		spawnTTL = 10 * time.Second
	)
	// A missing tag of a repository the registry serves: the kubelet's pull
	// reaches the registry and is told "not found".
	missing := n.registry + "/gitea-runner-scaler:no-such-tag"

	fx := b.NewOrgScope(ctx, t, e2e.Uniq("e2e-pull"))
	label := e2e.Uniq("e2e-pull")
	queued := b.QueueJobs(ctx, t, fx, "pull.yml", map[string]int{label: 1})
	require.Len(t, queued[label], 1)
	giteaJob := queued[label][0]
	ns := b.Namespace(ctx, t, "e2e-pull", nil)
	b.TokenSecret(ctx, t, ns, e2e.GroupSecret(group), fx.RegToken, fx.APIToken)
	spec := b.GroupSpec(fx, e2e.GroupSecret(group), 1, label)
	spec.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		NodeSelector: map[string]string{n.label: "true"},
		Tolerations:  []corev1.Toleration{{Key: n.label, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Containers:   []corev1.Container{{Name: runnerjob.ContainerName, Image: missing}},
	}}
	b.CreateGroup(ctx, t, ns, group, nil, spec)
	dump := func() string { return b.DumpNamespaces(ns) + b.Gitea.JobsLine(fx.Repo) }
	pass := func() {
		t.Helper()
		r := b.Pass(ctx, t, e2e.PassOpts{Namespaces: []string{ns}, Args: []string{
			"--runner-start-timeout", start.String(), "--spawn-ttl", spawnTTL.String(), "--runner-idle-timeout", "10m"}})
		e2e.RequireSanePass(t, r, "pass")
	}

	pass()
	jobs, err := b.RunnerJobs(ctx, ns, group)
	require.NoError(t, err)
	require.Len(t, jobs, 1, "one runner Job for the queued job")
	first := jobs[0]
	require.Equal(t, giteaJob, runnerjob.GiteaJobID(&first))

	var reported string
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the real kubelet reports the runner's pull failure", dump, func(ctx context.Context) (bool, string, error) {
		pods, err := b.JobPods(ctx, ns, first.Name)
		if err != nil || len(pods) != 1 {
			return false, fmt.Sprintf("%d pods, %v", len(pods), err), nil
		}
		p := pods[0]
		if p.Spec.NodeName != n.name {
			return false, fmt.Sprintf("pod %s on node %q", p.Name, p.Spec.NodeName), nil
		}
		for _, c := range p.Status.ContainerStatuses {
			if w := c.State.Waiting; c.Name == runnerjob.ContainerName && w != nil {
				reported = w.Reason
				return slices.Contains(pullFailures, w.Reason), w.Reason + ": " + w.Message, nil
			}
		}
		return false, fmt.Sprintf("pod %s: %s %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses), nil
	})
	t.Logf("the kubelet reported %s for %s", reported, missing)

	time.Sleep(time.Until(first.CreationTimestamp.Add(start + time.Second)))
	pass()
	left, err := b.RunnerJobs(ctx, ns, group)
	require.NoError(t, err)
	require.Empty(t, e2e.JobNames(left), "the runner Job whose image cannot be pulled is deleted after the start timeout")
	rg, err := b.Group(ctx, ns, group)
	require.NoError(t, err)
	sc := meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionScalingActive)
	require.NotNil(t, sc, e2e.StatusLine(rg))
	require.Equal(t, "RunnerStartTimeout", sc.Reason, e2e.StatusLine(rg))
	require.True(t, strings.Contains(sc.Message, pullFailures[0]) || strings.Contains(sc.Message, pullFailures[1]),
		"the group says why the runner never started: %s", e2e.StatusLine(rg))
	require.Contains(t, sc.Message, missing, "and names the image")
	evs, err := b.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=RunnerStartTimeout"})
	require.NoError(t, err)
	require.Len(t, evs.Items, 1)
	require.Contains(t, evs.Items[0].Message, first.Name)

	// The user fixes the image (here: drops the template, so the runner
	// gets the bed's default runner image on the fake nodes) and the job
	// gets its next runner once the back-off has passed.
	b.PatchGroup(ctx, t, ns, group, map[string]any{"spec": map[string]any{"template": nil}})
	var second string
	e2e.WaitEvery(ctx, t, 2*time.Second, e2e.StepWait, "a new runner Job for Gitea job "+fmt.Sprint(giteaJob), dump, func(ctx context.Context) (bool, string, error) {
		pass()
		jobs, err := b.RunnerJobs(ctx, ns, group)
		if err != nil || len(jobs) == 0 {
			return false, fmt.Sprintf("%d runner Jobs, %v", len(jobs), err), nil
		}
		require.Len(t, jobs, 1)
		require.Equal(t, giteaJob, runnerjob.GiteaJobID(&jobs[0]), "the new runner is for the same Gitea job")
		second = runnerjob.RunnerNameOf(&jobs[0])
		return true, "", nil
	})
	require.NotEqual(t, runnerjob.RunnerNameOf(&first), second)
	e2e.WaitUntil(ctx, t, e2e.StepWait, "Gitea job "+fmt.Sprint(giteaJob)+" run by runner "+second, dump, func(ctx context.Context) (bool, string, error) {
		gj, err := b.GiteaJob(ctx, fx.Repo, giteaJob)
		if err != nil {
			return false, err.Error(), nil
		}
		return gj.State() == "completed/success" && gj.RunnerName == second, fmt.Sprintf("%s on %q", gj.State(), gj.RunnerName), nil
	})
}
