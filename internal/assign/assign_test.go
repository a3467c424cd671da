package assign

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

const giteaURL = "https://gitea.example.com"

var ubuntu = []string{
	"ubuntu-latest:docker://docker.gitea.com/runner-images:ubuntu-latest",
	"ubuntu-24.04:docker://docker.gitea.com/runner-images:ubuntu-24.04",
	"ubuntu-22.04:docker://docker.gitea.com/runner-images:ubuntu-22.04",
}

func withLabels(extra ...string) []string { return append(extra, ubuntu...) }

func group(key string, s v1alpha1.Scope, owner, repo string, lbls []string) Group {
	return Group{Key: key, Where: scope.New(giteaURL, s, owner, repo), Labels: lbls, Eligible: true}
}

func TestOwner(t *testing.T) {
	plain := group("ci/plain", v1alpha1.ScopeOrg, "acme", "", withLabels())
	gpu := group("ci/gpu", v1alpha1.ScopeOrg, "acme", "", withLabels("gpu"))
	global := group("platform/all", v1alpha1.ScopeGlobal, "", "", withLabels())
	repo := group("app/app", v1alpha1.ScopeRepo, "acme", "app", withLabels("gpu", "big"))
	alice := group("alice/alice", v1alpha1.ScopeUser, "alice", "", withLabels())
	paused := group("ci/aaa-paused", v1alpha1.ScopeOrg, "acme", "", withLabels())
	paused.Eligible = false
	otherInstance := group("ci/other", v1alpha1.ScopeRepo, "acme", "app", withLabels())
	otherInstance.Where = scope.New("https://other.example.com", v1alpha1.ScopeRepo, "acme", "app")

	tests := []struct {
		name   string
		groups []Group
		url    string
		job    Job
		want   string
	}{
		{"the only group that can run it", []Group{plain}, giteaURL, Job{Repo: "acme/app", Labels: []string{"ubuntu-latest"}}, "ci/plain"},
		{"fewest labels wins: the plain group over the gpu group", []Group{gpu, plain}, giteaURL, Job{Repo: "acme/app", Labels: []string{"ubuntu-latest"}}, "ci/plain"},
		{"a gpu job goes to the only group with gpu", []Group{gpu, plain}, giteaURL, Job{Repo: "acme/app", Labels: []string{"gpu"}}, "ci/gpu"},
		{"org before global", []Group{global, plain}, giteaURL, Job{Repo: "acme/app", Labels: []string{"ubuntu-latest"}}, "ci/plain"},
		{"repo before org, even with more labels", []Group{plain, repo, global}, giteaURL, Job{Repo: "acme/app", Labels: []string{"ubuntu-latest"}}, "app/app"},
		{"repo group does not contain another repo", []Group{repo, global}, giteaURL, Job{Repo: "acme/web", Labels: []string{"ubuntu-latest"}}, "platform/all"},
		{"user scope contains the user's repositories", []Group{alice, global}, giteaURL, Job{Repo: "alice/tool", Labels: []string{"ubuntu-22.04"}}, "alice/alice"},
		{"names compare without regard to case, as Gitea's do", []Group{alice}, giteaURL, Job{Repo: "Alice/Tool", Labels: []string{"ubuntu-latest"}}, "alice/alice"},
		{"org scope does not contain another owner", []Group{plain}, giteaURL, Job{Repo: "alice/tool", Labels: []string{"ubuntu-latest"}}, ""},
		{"labels no group offers", []Group{plain, gpu, global}, giteaURL, Job{Repo: "acme/app", Labels: []string{"windows"}}, ""},
		{"a paused group takes nothing away", []Group{paused, plain}, giteaURL, Job{Repo: "acme/app", Labels: []string{"ubuntu-latest"}}, "ci/plain"},
		{"only a group that cannot serve: it keeps the job, so it has one owner once fixed", []Group{paused}, giteaURL, Job{Repo: "acme/app", Labels: []string{"ubuntu-latest"}}, "ci/aaa-paused"},
		{"an eligible global group before an ineligible repo group", []Group{func() Group { g := repo; g.Eligible = false; return g }(), global}, giteaURL, Job{Repo: "acme/app", Labels: []string{"ubuntu-latest"}}, "platform/all"},
		{"a group on another Gitea never competes", []Group{otherInstance, plain}, giteaURL, Job{Repo: "acme/app", Labels: []string{"ubuntu-latest"}}, "ci/plain"},
		{"the same Gitea spelt differently", []Group{plain}, "HTTPS://Gitea.Example.com:443/", Job{Repo: "acme/app", Labels: []string{"ubuntu-latest"}}, "ci/plain"},
		{"ties go to the smallest namespace/name", []Group{group("b/x", v1alpha1.ScopeOrg, "acme", "", withLabels()), group("a/y", v1alpha1.ScopeOrg, "acme", "", withLabels())}, giteaURL, Job{Repo: "acme/app", Labels: []string{"ubuntu-latest"}}, "a/y"},
		{"a job without a repository only reaches global groups", []Group{plain, global}, giteaURL, Job{Repo: "", Labels: []string{"ubuntu-latest"}}, "platform/all"},
		{"a job without labels matches nothing, as in Gitea", []Group{global}, giteaURL, Job{Repo: "acme/app", Labels: nil}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, New(tt.groups).Owner(tt.url, tt.job))
			// The answer must not depend on the order the groups were listed in.
			reversed := make([]Group, len(tt.groups))
			for i, g := range tt.groups {
				reversed[len(tt.groups)-1-i] = g
			}
			assert.Equal(t, tt.want, New(reversed).Owner(tt.url, tt.job), "reversed listing order")
		})
	}
}

func TestOwnerCachesPerRepoAndLabelsNotPerOrder(t *testing.T) {
	r := New([]Group{group("ci/gpu", v1alpha1.ScopeOrg, "acme", "", withLabels("gpu"))})
	assert.Equal(t, "ci/gpu", r.Owner(giteaURL, Job{Repo: "acme/app", Labels: []string{"gpu", "ubuntu-latest"}}))
	assert.Equal(t, "ci/gpu", r.Owner(giteaURL, Job{Repo: "acme/app", Labels: []string{"ubuntu-latest", "gpu"}}))
	assert.Equal(t, "", r.Owner(giteaURL, Job{Repo: "acme/app", Labels: []string{"ubuntu-latest", "gpu", "arm"}}))
	assert.Len(t, r.cache, 2)
}

func TestOwnerConcurrentUse(t *testing.T) {
	r := New([]Group{group("ci/plain", v1alpha1.ScopeOrg, "acme", "", withLabels())})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				assert.Equal(t, "ci/plain", r.Owner(giteaURL, Job{Repo: fmt.Sprintf("acme/r%d", (i*j)%7), Labels: []string{"ubuntu-latest"}}))
			}
		}()
	}
	wg.Wait()
}

func FuzzOwner(f *testing.F) {
	f.Add("acme/app", "ubuntu-latest", "acme", "app", "gpu")
	f.Add("Alice/x", "gpu,ubuntu-latest", "alice", "", "")
	f.Fuzz(func(t *testing.T, repo, jobLabels, owner, name, extra string) {
		groups := []Group{
			group("ns/global", v1alpha1.ScopeGlobal, "", "", withLabels(extra)),
			group("ns/owner", v1alpha1.ScopeOrg, owner, "", withLabels()),
			group("ns/repo", v1alpha1.ScopeRepo, owner, name, withLabels(extra)),
		}
		job := Job{Repo: repo, Labels: strings.FieldsFunc(jobLabels, func(r rune) bool { return r == ',' })}
		got := New(groups).Owner(giteaURL, job)
		// Whatever it picks must be able to run the job; and when the global
		// group can run it, somebody must be picked.
		for _, g := range groups {
			if g.Key == got {
				assert.True(t, New([]Group{g}).Owner(giteaURL, job) == g.Key, "picked %s, which cannot run %+v", got, job)
			}
		}
		if New(groups[:1]).Owner(giteaURL, job) != "" {
			assert.NotEmpty(t, got)
		}
	})
}

func TestExplainGivesEveryGroupsVerdictInRuleOrder(t *testing.T) {
	plain := group("ci/plain", v1alpha1.ScopeOrg, "acme", "", withLabels())
	gpu := group("ci/gpu", v1alpha1.ScopeOrg, "acme", "", withLabels("gpu"))
	alice := group("alice/alice", v1alpha1.ScopeUser, "alice", "", withLabels("gpu"))
	paused := group("ci/big", v1alpha1.ScopeOrg, "acme", "", withLabels("gpu", "big"))
	paused.Eligible = false
	other := group("ci/other", v1alpha1.ScopeOrg, "acme", "", withLabels("gpu"))
	other.Where = scope.New("https://other.example.com", v1alpha1.ScopeOrg, "acme", "")
	r := New([]Group{plain, gpu, alice, paused, other})

	got := r.Explain(giteaURL, Job{Repo: "acme/app", Labels: []string{"ubuntu-latest", "gpu"}})
	keys := make([]string, len(got))
	for i, v := range got {
		keys[i] = v.Key
	}
	assert.Equal(t, []string{"ci/plain", "alice/alice", "ci/gpu", "ci/other", "ci/big"}, keys, "eligible first, then scope, then fewest labels, then name")
	byKey := map[string]Verdict{}
	for _, v := range got {
		byKey[v.Key] = v
	}
	assert.Equal(t, Verdict{Key: "ci/plain", SameInstance: true, InScope: true, Missing: []string{"gpu"},
		Labels: []string{"ubuntu-22.04", "ubuntu-24.04", "ubuntu-latest"}, Eligible: true}, byKey["ci/plain"])
	assert.True(t, byKey["ci/gpu"].Owner && byKey["ci/gpu"].CanRun)
	assert.Equal(t, []bool{false, true, true}, []bool{byKey["ci/other"].SameInstance, byKey["ci/other"].InScope, byKey["ci/other"].CanRun}, "another Gitea: can run it, never owns it")
	assert.Equal(t, []bool{true, false, true}, []bool{byKey["alice/alice"].SameInstance, byKey["alice/alice"].InScope, byKey["alice/alice"].CanRun})
	assert.False(t, byKey["ci/big"].Eligible)
	owners := 0
	for _, v := range got {
		if v.Owner {
			owners++
			assert.Equal(t, r.Owner(giteaURL, Job{Repo: "acme/app", Labels: []string{"gpu", "ubuntu-latest"}}), v.Key, "Explain and Owner agree")
		}
	}
	assert.Equal(t, 1, owners)

	none := r.Explain(giteaURL, Job{Repo: "acme/app", Labels: []string{"windows"}})
	for _, v := range none {
		assert.False(t, v.Owner, v.Key)
		assert.Equal(t, []string{"windows"}, v.Missing, v.Key)
	}
}

// TestHoldBoundsHowLongOneNamespaceKeepsAJob is issue 19's scene: team B's
// repo-scope group on team A's repository ranks before A's org group, but
// its runners may register where the job can never run. However B's group
// looks, it keeps the job from A for at most one hold; then the job goes
// in turn to the best group of each namespace that can run it. Within one
// namespace the rule never turns: a tenant's own groups keep their order.
func TestHoldBoundsHowLongOneNamespaceKeepsAJob(t *testing.T) {
	const hold = 10 * time.Minute
	created := time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)
	teamA := group("team-a/org", v1alpha1.ScopeOrg, "contoso", "", withLabels())
	teamAGPU := group("team-a/gpu", v1alpha1.ScopeOrg, "contoso", "", withLabels("gpu"))
	teamB := group("team-b/web", v1alpha1.ScopeRepo, "contoso", "web", withLabels())
	platform := group("platform/all", v1alpha1.ScopeGlobal, "", "", withLabels())
	pausedC := group("team-c/web", v1alpha1.ScopeRepo, "contoso", "web", withLabels())
	pausedC.Eligible = false
	job := Job{Repo: "contoso/web", Labels: []string{"ubuntu-latest"}, Created: created}

	tests := []struct {
		name   string
		groups []Group
		job    Job
		waited time.Duration
		want   string
	}{
		{"within the hold the more specific group keeps it", []Group{teamA, teamB}, job, time.Minute, "team-b/web"},
		{"past one hold the next namespace's best group has it", []Group{teamA, teamB}, job, hold + time.Minute, "team-a/org"},
		{"turns come round again", []Group{teamA, teamB}, job, 2*hold + time.Minute, "team-b/web"},
		{"three namespaces take turns in the rule's order", []Group{teamA, teamB, platform}, job, 2*hold + time.Minute, "platform/all"},
		{"a namespace's own groups never turn: its best group keeps it", []Group{teamA, teamAGPU}, job, hold + time.Minute, "team-a/org"},
		{"a namespace's turn goes to its own best group", []Group{teamAGPU, teamA, teamB}, job, hold + time.Minute, "team-a/org"},
		{"a group that cannot serve gets no turn while one that can exists", []Group{teamA, pausedC}, job, hold + time.Minute, "team-a/org"},
		{"a job without a creation time never turns", []Group{teamA, teamB}, Job{Repo: "contoso/web", Labels: []string{"ubuntu-latest"}}, 5 * hold, "team-b/web"},
		{"a clock behind the job's creation is within the hold", []Group{teamA, teamB}, job, -time.Minute, "team-b/web"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := func() time.Time { return created.Add(tt.waited) }
			r := New(tt.groups).Holding(hold, now)
			assert.Equal(t, tt.want, r.Owner(giteaURL, tt.job))
			owners := 0
			for _, v := range r.Explain(giteaURL, tt.job) {
				if v.Owner {
					owners++
					assert.Equal(t, tt.want, v.Key, "Explain and Owner agree")
				}
			}
			assert.Equal(t, 1, owners)
		})
	}

	t.Run("without a hold the rule never turns", func(t *testing.T) {
		r := New([]Group{teamA, teamB}).Holding(0, func() time.Time { return created.Add(100 * hold) })
		assert.Equal(t, "team-b/web", r.Owner(giteaURL, job))
	})
	t.Run("the cached answer follows the turn", func(t *testing.T) {
		now := created.Add(time.Minute)
		r := New([]Group{teamA, teamB}).Holding(hold, func() time.Time { return now })
		assert.Equal(t, "team-b/web", r.Owner(giteaURL, job))
		now = created.Add(hold + time.Minute)
		assert.Equal(t, "team-a/org", r.Owner(giteaURL, job))
	})
}
