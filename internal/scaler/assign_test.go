package scaler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
)

func queuedIn(id int64, repo string, labels ...string) gitea.Job {
	j := queued(id, labels...)
	j.Repo = repo
	return j
}

func withLabels(labels ...string) func(*v1alpha1.RunnerGroup) {
	return func(rg *v1alpha1.RunnerGroup) { rg.Spec.Labels = labels }
}

func global(rg *v1alpha1.RunnerGroup) { rg.Spec.Scope, rg.Spec.Org = v1alpha1.ScopeGlobal, "" }

func failedWith(reason string) func(*v1alpha1.RunnerGroup) {
	return func(rg *v1alpha1.RunnerGroup) {
		rg.Status.ObservedGeneration = rg.Generation
		rg.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason}}
	}
}

// Every queued job is served by one group, whichever listener serves which
// group: each pass computes the same owner from every RunnerGroup.
func TestOverlappingGroupsServeEachJobOnce(t *testing.T) {
	off := false
	tests := []struct {
		name      string
		groups    []*v1alpha1.RunnerGroup
		jobs      []gitea.Job
		want      map[string]int // runner Jobs per group
		wantLeft  map[string]int32
		listeners []string // selectors, one pass each; empty: one pass for all
	}{
		{
			name:     "a gpu group and a plain group in one org: the plain one takes ubuntu jobs, the gpu one gpu jobs",
			groups:   []*v1alpha1.RunnerGroup{newGroup("gpu", 5, withLabels("gpu")), newGroup("plain", 5)},
			jobs:     []gitea.Job{queuedIn(1, "acme/app", "ubuntu-latest"), queuedIn(2, "acme/app", "gpu")},
			want:     map[string]int{"gpu": 1, "plain": 1},
			wantLeft: map[string]int32{"gpu": 1, "plain": 0},
		},
		{
			name:     "a global group and an org group: the org group",
			groups:   []*v1alpha1.RunnerGroup{newGroup("all", 5, global), newGroup("acme", 5)},
			jobs:     []gitea.Job{queuedIn(1, "acme/app", "ubuntu-latest"), queuedIn(2, "other/web", "ubuntu-latest")},
			want:     map[string]int{"acme": 1, "all": 1},
			wantLeft: map[string]int32{"all": 1},
		},
		{
			name:   "a paused org group does not take jobs away from a global group",
			groups: []*v1alpha1.RunnerGroup{newGroup("all", 5, global), newGroup("acme", 0)},
			jobs:   []gitea.Job{queuedIn(1, "acme/app", "ubuntu-latest")},
			want:   map[string]int{"all": 1},
		},
		{
			name:   "a suspended org group does not take jobs away from a global group",
			groups: []*v1alpha1.RunnerGroup{newGroup("all", 5, global), newGroup("acme", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.Suspend = true })},
			jobs:   []gitea.Job{queuedIn(1, "acme/app", "ubuntu-latest")},
			want:   map[string]int{"all": 1},
		},
		{
			name:   "an org group whose Secret is missing does not take jobs away",
			groups: []*v1alpha1.RunnerGroup{newGroup("all", 5, global), newGroup("acme", 5, failedWith(v1alpha1.ReasonSecretNotFound), func(rg *v1alpha1.RunnerGroup) { rg.Spec.AuthToken.SecretRef.Name = "missing" })},
			jobs:   []gitea.Job{queuedIn(1, "acme/app", "ubuntu-latest")},
			want:   map[string]int{"all": 1},
		},
		{
			name:   "a group whose Gitea timed out keeps its jobs: an outage must not move them",
			groups: []*v1alpha1.RunnerGroup{newGroup("all", 5, global), newGroup("acme", 5, failedWith(v1alpha1.ReasonGiteaTimeout))},
			jobs:   []gitea.Job{queuedIn(1, "acme/app", "ubuntu-latest")},
			want:   map[string]int{"acme": 1},
		},
		{
			name:   "a repo-scoped gpu group takes its repository's ubuntu jobs: repo before org",
			groups: []*v1alpha1.RunnerGroup{newGroup("app-gpu", 5, withLabels("gpu"), repoScope("app")), newGroup("plain", 5)},
			jobs:   []gitea.Job{queuedIn(1, "acme/app", "ubuntu-latest")},
			want:   map[string]int{"app-gpu": 1},
		},
		{
			name: "the same group without the default labels leaves them to the plain group",
			groups: []*v1alpha1.RunnerGroup{newGroup("app-gpu", 5, withLabels("gpu"), repoScope("app"), func(rg *v1alpha1.RunnerGroup) { rg.Spec.DefaultLabels = &off }),
				newGroup("plain", 5)},
			jobs: []gitea.Job{queuedIn(1, "acme/app", "ubuntu-latest"), queuedIn(2, "acme/app", "gpu")},
			want: map[string]int{"app-gpu": 1, "plain": 1},
		},
		{
			name:      "two listeners, each serving one of the groups by selector, agree",
			groups:    []*v1alpha1.RunnerGroup{newGroup("gpu", 5, withLabels("gpu"), labelled("pool", "gpu"), servedAt(t0)), newGroup("plain", 5, labelled("pool", "default"), servedAt(t0))},
			jobs:      []gitea.Job{queuedIn(1, "acme/app", "ubuntu-latest"), queuedIn(2, "acme/app", "gpu"), queuedIn(3, "acme/web", "ubuntu-latest")},
			listeners: []string{"pool=gpu", "pool=default"},
			want:      map[string]int{"gpu": 1, "plain": 2},
		},
		{
			// Issue 25.3: until a listener has served the plain group, it
			// keeps no job; and once it is served, the jobs it now owns
			// get no second runner (issue 25.6).
			name:      "a group no listener has served yet keeps nothing",
			groups:    []*v1alpha1.RunnerGroup{newGroup("gpu", 5, withLabels("gpu"), labelled("pool", "gpu")), newGroup("plain", 5, labelled("pool", "default"))},
			jobs:      []gitea.Job{queuedIn(1, "acme/app", "ubuntu-latest"), queuedIn(2, "acme/app", "gpu"), queuedIn(3, "acme/web", "ubuntu-latest")},
			listeners: []string{"pool=gpu", "pool=default"},
			want:      map[string]int{"gpu": 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newServedEnv(t, tt.groups...)
			e.gitea.snap = gitea.Snapshot{Queued: tt.jobs}
			if len(tt.listeners) == 0 {
				e.pass()
			}
			for _, sel := range tt.listeners {
				e.pass(func(_ *Deps, c *Config) { c.Selector = sel })
			}
			for range 2 { // and later passes start nothing more
				e.pass()
			}
			got := map[string]int{}
			for _, j := range e.jobs() {
				got[j.Labels[v1alpha1.LabelRunnerGroupName]]++
			}
			assert.Equal(t, tt.want, got)
			for id, n := range e.giteaJobsServed() {
				assert.Equal(t, 1, n, "Gitea job %d has one runner", id)
			}
			for name, left := range tt.wantLeft {
				assert.Equal(t, left, e.group(name).Status.JobsLeftToOtherGroups, "%s: jobsLeftToOtherGroups", name)
			}
		})
	}
}

func labelled(k, v string) func(*v1alpha1.RunnerGroup) {
	return func(rg *v1alpha1.RunnerGroup) {
		if rg.Labels == nil {
			rg.Labels = map[string]string{}
		}
		rg.Labels[k] = v
	}
}

func repoScope(repo string) func(*v1alpha1.RunnerGroup) {
	return func(rg *v1alpha1.RunnerGroup) { rg.Spec.Scope, rg.Spec.Repo = v1alpha1.ScopeRepo, repo }
}
