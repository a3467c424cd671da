//go:build e2e

// Issue 19 on the real API server and a real Gitea: no tenant can take
// another tenant's jobs away through the assignment rule, and what a
// namespace's groups may serve is the platform's decision (the namespace's
// grant annotations).

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// starveHold is the assignment hold of the starvation scene: short, so the
// test does not wait the default ten minutes for A's turn, and long beside
// a pass (2s) and a runner's start on the bed.
const starveHold = "45s"

// TestAnotherTenantCannotStarveAJob is issue 19's scene. Team A serves its
// organisation from its namespace (an org-scope group). Team B, in another
// namespace with a listener of its own, creates a repo-scope group on A's
// public repository, with a read-only token of its own user (enough to
// list that repository's jobs) and the registration token of its own user,
// so its runners can never take A's job. The rule prefers B's more
// specific group, which starts a runner for the job; after one assignment
// hold the job's turn goes to A's group, whose runner takes and runs it.
// Then the platform grants B's namespace only B's own user: B's group gets
// NotGranted, and A's next job is A's alone.
func TestAnotherTenantCannotStarveAJob(t *testing.T) {
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 8*time.Minute)
	values := deploymentValues()
	values["scaler"].(map[string]any)["assignmentHold"] = starveHold
	a := b.servedGroup(ctx, t, sceneOpts{name: "starve-a", max: 2, values: values})

	nsB := b.namespace(ctx, t, "e2e-starve-b", nil)
	valuesB := deploymentValues(nsB)
	valuesB["scaler"].(map[string]any)["assignmentHold"] = starveHold
	b.helmInstall(ctx, t, nsB, "gro", valuesB)
	userB := uniq("e2e-starve-b")
	fxB := b.newUserScope(ctx, t, userB, "read:repository")
	const groupB = "rg-web"
	secretB := groupSecret(groupB)
	b.tokenSecret(ctx, t, nsB, secretB, fxB.regToken, fxB.apiToken)
	specB := b.groupSpec(fxB, secretB, 2, a.label)
	specB.Scope, specB.User, specB.Org, specB.Repo = v1alpha1.ScopeRepo, "", a.fx.repo.Owner, a.fx.repo.Name
	b.createGroup(ctx, t, nsB, groupB, nil, specB)
	dump := func() string { return a.dump() + b.dumpNamespaces(nsB) }

	// Both groups served, so both count in the rule: B's group can list
	// A's repository's jobs with its read-only token. (It shows
	// RunnerReapFailed, as its token may not list that repository's
	// runners; a failure a retry may fix does not make it ineligible.)
	b.waitServed(ctx, t, a.ns, a.group, dump)
	b.waitServed(ctx, t, nsB, groupB, dump)

	keys, wf := numberedJobs("starve", 1, a.label)
	pushJobs(ctx, t, b, a.fx, "ci.yml", nil, wf...)
	ids := idsOf(b.gitea.waitJobs(ctx, t, a.fx.repo, len(keys)), keys...)
	done := b.expectCompleted(ctx, t, a.ns, a.group, a.fx.repo, ids, dump)
	require.Len(t, done, 1, "A's job ran on A's runner")
	runnersB, err := b.runnerJobs(ctx, nsB, groupB)
	require.NoError(t, err)
	assert.Len(t, byGiteaJob(runnersB)[ids[keys[0]]], 1,
		"the rule gave the job to B's more specific group first (the scene), whose runner could not take it: %v", jobNames(runnersB))

	// The platform grants B's namespace its own user only.
	nsObj, err := b.kube.CoreV1().Namespaces().Get(ctx, nsB, metav1.GetOptions{})
	require.NoError(t, err)
	nsObj.Annotations = map[string]string{tenancy.AnnotationGrantedRepositories: userB}
	_, err = b.kube.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitUntil(ctx, t, stepWait, "B's group outside its grant", dump, func(ctx context.Context) (bool, string, error) {
		rg, err := b.group(ctx, nsB, groupB)
		if err != nil {
			return false, err.Error(), nil
		}
		c := condition(rg, "Ready")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "NotGranted", statusLine(rg), nil
	})

	keys2, wf2 := numberedJobs("starve-granted", 1, a.label)
	pushJobs(ctx, t, b, a.fx, "ci2.yml", nil, wf2...)
	ids2 := idsOf(b.gitea.waitJobs(ctx, t, a.fx.repo, len(keys)+len(keys2)), keys2...)
	done2 := b.expectCompleted(ctx, t, a.ns, a.group, a.fx.repo, ids2, dump)
	require.Len(t, done2, 1)
	runnersB, err = b.runnerJobs(ctx, nsB, groupB)
	require.NoError(t, err)
	assert.Empty(t, byGiteaJob(runnersB)[ids2[keys2[0]]], "a group outside its grant takes no part in the rule")
}

// TestTwoGrantedTeamsOnOneRepository: the platform grants two namespaces
// the same repository (one team's org, the other team that repository
// alone), each served by a listener of its own, both with tokens that can
// serve it. Every job gets exactly one runner Job across both namespaces,
// and runs; within the hold the more specific group has them.
func TestTwoGrantedTeamsOnOneRepository(t *testing.T) {
	t.Parallel()
	b := getBed(t)
	ctx := testContext(t, 6*time.Minute)
	a := b.servedGroup(ctx, t, sceneOpts{name: "granted-a", max: 3})
	nsC := b.namespace(ctx, t, "e2e-granted-c", nil)
	for ns, grant := range map[string]string{a.ns: a.fx.repo.Owner, nsC: a.fx.repo.Owner + "/" + a.fx.repo.Name} {
		nsObj, err := b.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.NoError(t, err)
		nsObj.Annotations = map[string]string{tenancy.AnnotationGrantedRepositories: grant, tenancy.AnnotationGrantedGiteaURLs: bedGiteaURL}
		_, err = b.kube.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	b.helmInstall(ctx, t, nsC, "gro", deploymentValues(nsC))
	const groupC = "rg-app"
	secretC := groupSecret(groupC)
	b.tokenSecret(ctx, t, nsC, secretC, a.fx.regToken, a.fx.apiToken)
	specC := b.groupSpec(a.fx, secretC, 3, a.label)
	specC.Scope, specC.Repo = v1alpha1.ScopeRepo, a.fx.repo.Name
	b.createGroup(ctx, t, nsC, groupC, nil, specC)
	dump := func() string { return a.dump() + b.dumpNamespaces(nsC) }
	b.waitServed(ctx, t, a.ns, a.group, dump)
	b.waitServed(ctx, t, nsC, groupC, dump)

	keys, wf := numberedJobs("granted", 3, a.label)
	pushJobs(ctx, t, b, a.fx, "ci.yml", nil, wf...)
	ids := idsOf(b.gitea.waitJobs(ctx, t, a.fx.repo, len(keys)), keys...)
	done := b.expectCompleted(ctx, t, nsC, groupC, a.fx.repo, ids, dump)
	require.Len(t, done, len(keys), "the repository's own group ran every job")
	runnersA, err := b.runnerJobs(ctx, a.ns, a.group)
	require.NoError(t, err)
	assert.Empty(t, runnersA, "the org group left the jobs to the more specific group: %v", jobNames(runnersA))
}

// waitServed waits until a pass has served the group (it asked Gitea for
// the group's jobs: status.lastCheckTime): only then does the assignment
// rule count it as able to serve (a group no listener has served keeps no
// job), so a test of which group gets a job pushes the job after this.
func (b *bed) waitServed(ctx context.Context, t *testing.T, ns, name string, dump func() string) {
	t.Helper()
	waitUntil(ctx, t, stepWait, fmt.Sprintf("group %s/%s served", ns, name), dump, func(ctx context.Context) (bool, string, error) {
		rg, err := b.group(ctx, ns, name)
		if err != nil {
			return false, err.Error(), nil
		}
		return rg.Status.LastCheckTime != nil, statusLine(rg), nil
	})
}
