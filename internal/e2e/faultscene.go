//go:build e2e

// The scene of a fault test: a namespace where runner pods cannot start
// (so the queued Gitea jobs stay queued and every runner Job stays active),
// Gitea jobs queued on labels of the test's own, RunnerGroups that offer
// them, and the count that matters: runner Jobs per Gitea job.

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// QuietNamespace is a namespace whose ResourceQuota admits no pod: runner
// Jobs are created and stay active, but no runner starts, so a queued Gitea
// job stays queued for as many passes as a test needs, and the bed's
// processes stay few.
func (b *Testbed) QuietNamespace(ctx context.Context, t *testing.T, prefix string) string {
	t.Helper()
	ns := b.Namespace(ctx, t, prefix, nil)
	b.Quota(ctx, t, ns, "no-pods", corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")})
	return ns
}

// Quota creates or replaces ResourceQuota name in ns and waits until the
// quota controller has taken it over: admission enforces status.hard.
func (b *Testbed) Quota(ctx context.Context, t *testing.T, ns, name string, hard corev1.ResourceList) {
	t.Helper()
	quotas := b.Kube.CoreV1().ResourceQuotas(ns)
	cur, err := quotas.Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		cur.Spec.Hard = hard
		_, err = quotas.Update(ctx, cur, metav1.UpdateOptions{})
	} else {
		_, err = quotas.Create(ctx, &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.ResourceQuotaSpec{Hard: hard},
		}, metav1.CreateOptions{})
	}
	require.NoError(t, err, "ResourceQuota %s/%s", ns, name)
	Eventually(ctx, t, "ResourceQuota "+ns+"/"+name+" enforced", func(ctx context.Context) (bool, error) {
		q, err := quotas.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for k, want := range hard {
			if got, ok := q.Status.Hard[k]; !ok || got.Cmp(want) != 0 {
				return false, fmt.Errorf("status.hard %v, want %v", q.Status.Hard, hard)
			}
		}
		return true, nil
	})
}

// QueueJobs pushes workflow file (named like "ci.yml") to fx's repository
// with n jobs on each label (runs-on that label alone) and returns the Gitea
// job IDs by label, in ascending order, once they have all been queued. A
// job already past queued counts: where a looping scaler serves the labels,
// its runner may take a job between two of these listings, and a listing
// that waited for all of them queued at once would then wait forever.
func (b *Testbed) QueueJobs(ctx context.Context, t *testing.T, fx ScopeFixture, file string, perLabel map[string]int) map[string][]int64 {
	t.Helper()
	var (
		wf    []WfJob
		label = map[string]string{}
	)
	names := make([]string, 0, len(perLabel))
	for l := range perLabel {
		names = append(names, l)
	}
	sort.Strings(names)
	for li, l := range names {
		for i := range perLabel[l] {
			k := JobKey(strings.TrimSuffix(file, ".yml"), fmt.Sprint(li), fmt.Sprint(i))
			wf = append(wf, WfJob{Key: k, RunsOn: []string{l}})
			label[k] = l
		}
	}
	b.Gitea.PushWorkflow(ctx, t, fx.PushAs, fx.Repo, file, Workflow(wf...))
	out := map[string][]int64{}
	WaitUntil(ctx, t, StepWait, fmt.Sprintf("%d Gitea jobs of %s queued", len(wf), file), nil, func(ctx context.Context) (bool, string, error) {
		jobs, err := b.Gitea.RepoJobs(ctx, fx.Repo)
		if err != nil {
			return false, err.Error(), nil
		}
		out = map[string][]int64{}
		n := 0
		for _, j := range jobs {
			if l, ok := label[j.Name]; ok && beenQueued(j.State()) {
				out[l] = append(out[l], j.ID)
				n++
			}
		}
		return n == len(wf), DescribeGiteaJobs(jobs), nil
	})
	for _, ids := range out {
		sort.Slice(ids, func(i, k int) bool { return ids[i] < ids[k] })
	}
	return out
}

// beenQueued says whether Gitea has queued a job in state, whether or not a
// runner has taken it since ("waiting" jobs wait for others first).
func beenQueued(state string) bool {
	return state == "queued" || state == "in_progress" || strings.HasPrefix(state, "completed/")
}

// FaultGroup creates RunnerGroup name in ns for fx's scope, offering one
// label, asking Gitea at giteaURL, with fx's tokens in a Secret of its own.
func (b *Testbed) FaultGroup(ctx context.Context, t *testing.T, ns, name string, fx ScopeFixture, giteaURL string, max int32, label string) *v1alpha1.RunnerGroup {
	t.Helper()
	b.TokenSecret(ctx, t, ns, GroupSecret(name), fx.RegToken, fx.APIToken)
	spec := b.GroupSpec(fx, GroupSecret(name), max, label)
	spec.Gitea.URL = giteaURL
	return b.CreateGroup(ctx, t, ns, name, nil, spec)
}

// RunnersPerJob counts a group's runner Jobs per Gitea job (by their
// gitea-job-id label) and describes them for a failure message.
func (b *Testbed) RunnersPerJob(ctx context.Context, t *testing.T, ns, group string) (map[int64][]batchv1.Job, string) {
	t.Helper()
	all, err := b.RunnerJobs(ctx, ns, group)
	require.NoError(t, err)
	by := ByGiteaJob(all)
	var parts []string
	for id, js := range by {
		parts = append(parts, fmt.Sprintf("#%d:%v", id, JobNames(js)))
	}
	sort.Strings(parts)
	return by, fmt.Sprintf("runner Jobs of %s/%s by Gitea job: %s", ns, group, strings.Join(parts, " "))
}

// RequireOneRunnerEach requires that the group has exactly one runner Job
// for each of the Gitea jobs and none for any other.
func (b *Testbed) RequireOneRunnerEach(ctx context.Context, t *testing.T, ns, group string, ids []int64, why string) {
	t.Helper()
	by, line := b.RunnersPerJob(ctx, t, ns, group)
	want := map[int64]bool{}
	for _, id := range ids {
		want[id] = true
		require.Equal(t, 1, len(by[id]), "%s: Gitea job #%d must have exactly one runner Job, has %v\n%s", why, id, JobNames(by[id]), line)
	}
	for id, js := range by {
		require.True(t, want[id], "%s: runner Job(s) %v for Gitea job #%d, which the group does not serve\n%s", why, JobNames(js), id, line)
	}
}

// RequireNoRunners requires that the group has no runner Job at all.
func (b *Testbed) RequireNoRunners(ctx context.Context, t *testing.T, ns, group, why string) {
	t.Helper()
	all, err := b.RunnerJobs(ctx, ns, group)
	require.NoError(t, err)
	require.Empty(t, JobNames(all), why)
}

// ReadyOf is the group's Ready condition, failing the test if it has none.
func (b *Testbed) ReadyOf(ctx context.Context, t *testing.T, ns, group string) (*v1alpha1.RunnerGroup, metav1.Condition) {
	t.Helper()
	rg, err := b.Group(ctx, ns, group)
	require.NoError(t, err)
	c := Condition(rg, "Ready")
	require.NotNil(t, c, "RunnerGroup %s/%s has no Ready condition: %s", ns, group, StatusLine(rg))
	return rg, *c
}

// RequireReady requires Ready=True, reason Reconciled.
func (b *Testbed) RequireReady(ctx context.Context, t *testing.T, ns, group, why string) {
	t.Helper()
	rg, c := b.ReadyOf(ctx, t, ns, group)
	require.Equal(t, metav1.ConditionTrue, c.Status, "%s: %s", why, StatusLine(rg))
	require.Equal(t, "Reconciled", c.Reason, "%s: %s", why, StatusLine(rg))
}
