package scaler

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// refuseListIn makes listing RunnerGroups in namespace fail as it does when
// the namespace's Role was deleted ("" is the cluster-wide list).
func refuseListIn(e *env, namespace string) {
	e.dyn.PrependReactor("list", "runnergroups", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() != namespace {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(v1alpha1.GroupVersionResource.GroupResource(), "", errors.New("no Role in this namespace"))
	})
}

// TestNamespaceThatCannotBeListedDoesNotStopTheOthers: a pass over served
// namespaces reads every RunnerGroup with one cluster-wide list (which the
// assignment rule needs anyway), so a namespace's own Role is not what
// lists its groups. Where that list is refused (a read-only command's
// user), each namespace is listed, and one that cannot be does not stop
// the others.
func TestNamespaceThatCannotBeListedDoesNotStopTheOthers(t *testing.T) {
	groupLists := func(e *env) int {
		n := 0
		for _, a := range e.dyn.Actions() {
			if a.GetVerb() == "list" && a.GetResource().Resource == "runnergroups" {
				n++
			}
		}
		return n
	}
	t.Run("one cluster-wide list", func(t *testing.T) {
		e := newEnv(t, newGroup("ci", 5), newGroup("other", 5, inNamespace("unserved")))
		e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
		refuseListIn(e, "locked")
		e.dyn.ClearActions()

		sum, err := e.scaler(func(_ *Deps, c *Config) { c.Namespaces = []string{"locked", ns} }).Pass(context.Background())

		require.NoError(t, err)
		require.NoError(t, sum.Err())
		assert.Equal(t, 1, sum.Groups, "only the served namespaces' groups")
		assert.Equal(t, 1, sum.Created)
		assert.Equal(t, 1, groupLists(e), "one list for the pass and the assignment rule, not one per namespace")
	})
	t.Run("the cluster-wide list refused", func(t *testing.T) {
		e := newEnv(t, newGroup("ci", 5))
		e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
		refuseListIn(e, "")
		refuseListIn(e, "locked")

		sum, err := e.scaler(func(_ *Deps, c *Config) { c.Namespaces = []string{"locked", ns} }).Pass(context.Background())

		require.NoError(t, err, "the pass runs")
		assert.Equal(t, []string{"locked"}, sum.FailedNamespaces)
		assert.Empty(t, sum.Failed)
		assert.Equal(t, 1, sum.Created, "the listable namespace is served")
		require.Error(t, sum.Err(), "the pass still fails visibly")
		assert.Contains(t, sum.Err().Error(), "cannot list the RunnerGroups of namespace(s) locked")
		assert.Contains(t, e.logs.String(), "cannot list RunnerGroups in namespace locked")
	})
}

func TestClusterWideListFailureFailsThePass(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	refuseListIn(e, "")

	_, err := e.scaler().Pass(context.Background())

	require.Error(t, err, "with every namespace unlisted there is nothing to serve")
	assert.True(t, apierrors.IsForbidden(err), "the cause is kept: %v", err)
	assert.Empty(t, e.jobs())
}

// liveContextGroups refuses a call on a context that is already done, as
// client-go does, so a test can see that a step used a live context.
type liveContextGroups struct{ GroupClient }

func (g liveContextGroups) PatchStatus(ctx context.Context, rg *v1alpha1.RunnerGroup) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("patch on a done context: %w", err)
	}
	return g.GroupClient.PatchStatus(ctx, rg)
}

// giteaFake starts the HTTP fake with one org and queued job per group and
// points the scaler at it through the real client.
func giteaFake(t *testing.T, orgs ...string) (*giteatest.Server, setup) {
	t.Helper()
	srv := giteatest.New()
	t.Cleanup(srv.Close)
	srv.AddToken(secretToken, "admin", true)
	var scene giteatest.Scene
	for i, org := range orgs {
		scene.Orgs = append(scene.Orgs, giteatest.Org{Name: org})
		scene.Repos = append(scene.Repos, giteatest.Repo{Owner: org, Name: "app"})
		scene.Jobs = append(scene.Jobs, giteatest.Job{ID: int64(i + 1), Owner: org, Repo: "app", RunID: 1, Name: "build",
			Labels: []string{"ubuntu-latest"}, Status: giteatest.StatusQueued})
	}
	require.NoError(t, srv.Load(scene))
	scopeTokens(srv, scene)
	return srv, func(d *Deps, _ *Config) {
		d.Gitea = func(_, token string) (gitea.Client, error) {
			return gitea.NewClient(srv.URL, token, gitea.Options{Timeout: 20 * time.Second})
		}
	}
}

// scopeTokens makes the tests' registration token ("reg-" + secretToken,
// in the Secret "reg") the active one of every org and repository of the
// scene, so the scaler's check of it (regcheck.go) passes.
func scopeTokens(srv *giteatest.Server, scene giteatest.Scene) {
	for _, o := range scene.Orgs {
		srv.SetRegistrationToken(o.Name, "reg-"+secretToken)
	}
	for _, r := range scene.Repos {
		srv.SetRegistrationToken(r.Owner+"/"+r.Name, "reg-"+secretToken)
	}
}

// inOrg makes a group serve org, on the given Gitea.
func inOrg(org string) func(*v1alpha1.RunnerGroup) {
	return func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = org }
}

func readyOf(t *testing.T, e *env, group string) *metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(e.group(group).Status.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, c, "group %s has a Ready condition", group)
	return c
}

// A group that runs out of its deadline fails alone, says so, and the
// groups behind it on the same worker are served.
func TestGroupDeadline(t *testing.T) {
	// Long enough for the healthy groups to finish on a loaded machine
	// (at 200 ms they timed out too under a parallel e2e run).
	const groupTimeout = time.Second
	tests := []struct {
		name       string
		slow       func(e *env, srv *giteatest.Server)
		wantReason string
		wantMsg    string
	}{
		{
			name: "Gitea is slow",
			slow: func(_ *env, srv *giteatest.Server) {
				srv.InjectFault(100, giteatest.Fault{Path: "/api/v1/orgs/slow/", Delay: time.Minute})
			},
			wantReason: v1alpha1.ReasonGiteaTimeout, wantMsg: "no complete answer before the caller's deadline",
		},
		{
			name: "Kubernetes is slow",
			slow: func(e *env, _ *giteatest.Server) {
				e.kube.PrependReactor("get", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
					if a.(k8stesting.GetAction).GetName() != "api-slow" {
						return false, nil, nil
					}
					// The fake does not see the context; a real client would
					// give up at the deadline with this error.
					time.Sleep(2 * groupTimeout)
					return true, nil, fmt.Errorf("Get \"https://api/secrets/api-slow\": %w", context.DeadlineExceeded)
				})
			},
			wantReason: v1alpha1.ReasonGroupTimeout, wantMsg: "not done within the group timeout of 1s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, newGroup("a-slow", 5, inOrg("slow"), func(rg *v1alpha1.RunnerGroup) {
				rg.Spec.AuthToken.SecretRef.Name = "api-slow"
			}), newGroup("b-ok", 5, inOrg("acme")), newGroup("c-ok", 5, inOrg("other")))
			_, err := e.kube.CoreV1().Secrets(ns).Create(context.Background(), secret("api-slow", secretToken), metav1.CreateOptions{})
			require.NoError(t, err)
			srv, useFake := giteaFake(t, "slow", "acme", "other")
			tt.slow(e, srv)

			start := time.Now()
			sum, err := e.scaler(useFake, func(d *Deps, c *Config) {
				c.GroupTimeout, c.Workers = groupTimeout, 1
				d.Groups = liveContextGroups{d.Groups}
			}).Pass(context.Background())

			require.NoError(t, err)
			assert.Less(t, time.Since(start), 20*time.Second, "the slow group did not hold the pass")
			assert.Equal(t, []string{"runners/a-slow"}, sum.Failed)
			assert.Equal(t, 2, sum.Created, "the other groups on the same worker are served")
			ready := readyOf(t, e, "a-slow")
			assert.Equal(t, metav1.ConditionFalse, ready.Status, "recorded although the group's context was over")
			assert.Equal(t, tt.wantReason, ready.Reason)
			assert.Contains(t, ready.Message, tt.wantMsg)
			assert.Equal(t, v1alpha1.ReasonReconciled, readyOf(t, e, "b-ok").Reason)
		})
	}
}

// A 64 MiB answer for one group fails that group with a clear reason; the
// others are served.
func TestLargeGiteaAnswerFailsOnlyItsGroup(t *testing.T) {
	e := newEnv(t, newGroup("big", 5, inOrg("big")), newGroup("ok", 5, inOrg("acme")))
	srv, useFake := giteaFake(t, "big", "acme")
	srv.InjectFault(3, giteatest.Fault{Path: "/api/v1/orgs/big/", LargeBody: 64 << 20})

	sum := e.pass(useFake)

	assert.Equal(t, []string{"runners/big"}, sum.Failed)
	assert.Equal(t, 1, sum.Created, "the other group is served")
	ready := readyOf(t, e, "big")
	assert.Equal(t, v1alpha1.ReasonGiteaBadResponse, ready.Reason)
	assert.Contains(t, ready.Message, fmt.Sprintf("response larger than %d bytes", gitea.DefaultMaxResponseBytes))
	assert.Equal(t, v1alpha1.ReasonReconciled, readyOf(t, e, "ok").Reason)
}

// cancellingGitea cancels the pass while Gitea is being asked, as a SIGTERM
// would, and fails the way the real client does then.
type cancellingGitea struct{ cancel context.CancelFunc }

func (g cancellingGitea) Snapshot(ctx context.Context, _ scope.Place) (gitea.Snapshot, error) {
	g.cancel()
	<-ctx.Done()
	return gitea.Snapshot{}, fmt.Errorf("gitea: GET /api/v1/orgs/acme/actions/jobs: %w", ctx.Err())
}

func TestCancelledPassStillRecords(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	sum, err := e.scaler(func(d *Deps, _ *Config) {
		d.Gitea = func(string, string) (gitea.Client, error) { return cancellingGitea{cancel}, nil }
		d.Groups = liveContextGroups{d.Groups}
	}).Pass(ctx)

	require.NoError(t, err)
	assert.Equal(t, []string{"runners/ci"}, sum.Failed)
	ready := readyOf(t, e, "ci")
	assert.Equal(t, metav1.ConditionFalse, ready.Status, "the status was written after the cancel")
	assert.Contains(t, ready.Message, "context canceled")
	assert.NotContains(t, e.logs.String(), "cannot update RunnerGroup status")
}

// TestPassesRotateWhichGroupGoesFirst: slow groups that sort first cannot
// starve the same tail every pass, because each pass starts one group
// further on. A CronJob makes a new scaler every minute; a loop keeps one.
func TestPassesRotateWhichGroupGoesFirst(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	var groups []*v1alpha1.RunnerGroup
	for _, n := range names {
		groups = append(groups, newGroup(n, 0, inOrg("org-"+n)))
	}
	rotations := func(t *testing.T, orders [][]string) {
		t.Helper()
		firsts := map[string]int{}
		for _, order := range orders {
			require.Len(t, order, len(names))
			firsts[order[0]]++
			i := indexOf(names, order[0])
			assert.Equal(t, append(names[i:i:i], append(names[i:], names[:i]...)...), order,
				"the order is the sorted order, started further on")
		}
		assert.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}, firsts, "over %d passes each group goes first once", len(names))
	}

	t.Run("a new scaler every minute", func(t *testing.T) {
		e := newEnv(t, groups...)
		var orders [][]string
		for minute := range len(names) {
			at := t0.Add(time.Duration(minute)*time.Minute + 17*time.Second)
			e.gitea.seen = nil
			e.pass(func(d *Deps, c *Config) {
				d.Now = func() time.Time { return at }
				// One at a time, so the order of the listings is the
				// order of the groups.
				c.Workers, c.GiteaConcurrency = 1, 1
			})
			orders = append(orders, servedOrgs(e.gitea.seen))
		}
		rotations(t, orders)
	})
	t.Run("one looping scaler, several passes a minute", func(t *testing.T) {
		e := newEnv(t, groups...)
		sc := e.scaler(func(d *Deps, c *Config) {
			d.Now = func() time.Time { return t0 }
			c.Workers, c.GiteaConcurrency = 1, 1
		})
		var orders [][]string
		for range names {
			e.gitea.seen = nil
			_, err := sc.Pass(context.Background())
			require.NoError(t, err)
			orders = append(orders, servedOrgs(e.gitea.seen))
		}
		rotations(t, orders)
	})
}

func servedOrgs(seen []scope.Place) []string {
	var out []string
	for _, t := range seen {
		out = append(out, t.Owner()[len("org-"):])
	}
	return out
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// The order a pass serves its groups in is the sorted order, turned by an
// offset; the offset walks through every position.
func TestRotate(t *testing.T) {
	groups := []v1alpha1.RunnerGroup{{}, {}, {}}
	for i := range groups {
		groups[i].Name = string(rune('a' + i))
	}
	namesOf := func(gs []*v1alpha1.RunnerGroup) string {
		var s string
		for _, g := range gs {
			s += g.Name
		}
		return s
	}
	tests := []struct {
		turn int64
		want string
	}{
		{0, "abc"}, {1, "bca"}, {2, "cab"}, {3, "abc"}, {-1, "cab"}, {3*1_000_000 + 1, "bca"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, namesOf(rotate(pointers(groups), tt.turn)), "turn %d", tt.turn)
	}
	assert.Empty(t, rotate(nil, 5))
}

func secret(name, token string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{tenancy.SecretLabel: "true"}, Annotations: tokenKeys(name)}, Data: map[string][]byte{"token": []byte(token)}}
}

// TestABrokenGroupIsReportedOnlyByTheListenerThatServesIt: a group the
// types cannot hold is a failure of the pass whose namespaces and
// selectors take it (by its labels), and of no other listener's.
func TestABrokenGroupIsReportedOnlyByTheListenerThatServesIt(t *testing.T) {
	tests := []struct {
		name       string
		namespaces []string
		excludes   []string
		reported   bool
	}{
		{name: "served", reported: true},
		{name: "its namespace served", namespaces: []string{ns}, reported: true},
		{name: "another listener's by its labels", namespaces: []string{ns}, excludes: []string{"pool=gpu"}},
		{name: "its namespace not served", namespaces: []string{otherNS}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, newGroup("ci", 5))
			bad := newGroup("bad", 5, func(rg *v1alpha1.RunnerGroup) { rg.Labels = map[string]string{"pool": "gpu"} })
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(bad)
			require.NoError(t, err)
			u := &unstructured.Unstructured{Object: obj}
			require.NoError(t, unstructured.SetNestedField(u.Object, "many", "spec", "maxActiveRunners"))
			_, err = e.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
			require.NoError(t, err)

			sum := e.pass(func(_ *Deps, c *Config) { c.Namespaces, c.ExcludeSelectors = tt.namespaces, tt.excludes })

			if tt.reported {
				assert.Equal(t, []string{ns + "/bad"}, sum.Failed)
			} else {
				assert.Empty(t, sum.Failed)
			}
		})
	}
}

// A listing that left jobs out (a job whose repository is gone fails its
// page in Gitea, gitea.Snapshot.Unlisted) still serves the jobs it read,
// and the log names the scope, so an admin can delete the stray job.
func TestJobsLeftOutOfAListingStrandNoOthers(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}, Unlisted: 1}

	sum, err := e.scaler().Pass(context.Background())

	require.NoError(t, err)
	require.NoError(t, sum.Err())
	assert.Equal(t, 1, sum.Created)
	assert.Contains(t, e.logs.String(), `"msg":"Gitea could not list some jobs of the scope`)
	assert.Contains(t, e.logs.String(), `"unlisted":1`)
}
