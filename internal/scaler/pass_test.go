package scaler

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/passreport"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

func TestPassServesQueuedMatchingJobsOnly(t *testing.T) {
	rg := newGroup("ci", 5)
	e := newEnv(t, rg)
	e.gitea.snap = gitea.Snapshot{
		Queued:  []gitea.Job{queued(1, "ubuntu-latest"), queued(2, "self-hosted", "gpu")},
		Blocked: []gitea.Job{{ID: 3, Labels: []string{"ubuntu-latest"}}, {ID: 5, Labels: []string{"gpu"}}},
		Running: []gitea.Job{
			{ID: 4, RunnerName: runnerjob.RunnerName(rg, "ci-x2v7k")},
			{ID: 6, RunnerName: runnerjob.RunnerName(newGroup("ci-gpu", 1), "ci-gpu-x2v7k")},
			{ID: 7, RunnerName: runnerjob.RunnerName(newGroup("ci", 1, func(o *v1alpha1.RunnerGroup) { o.Namespace, o.UID = "other", "uid-other" }), "ci-x2v7k")},
			{ID: 8, RunnerName: "ci-x2v7k"},
		},
	}

	sum := e.pass()

	assert.Equal(t, passreport.Summary{Groups: 1, Created: 1, GroupStats: []passreport.GroupStats{{
		Namespace: ns, Name: "ci", Queued: 1, Blocked: 1, Running: 1, Active: 1, Max: 5, Created: 1,
	}}}, sum, "no queued-to-Job time: the fake's jobs have no creation time")
	assert.Equal(t, map[int64]int{1: 1}, e.giteaJobsServed(), "one runner for the matching queued job; none for gpu or blocked jobs")
	assert.Equal(t, []scope.Place{scope.New("https://gitea.example.com", gitea.ScopeOrg, "acme", "")}, e.gitea.seen)
	assert.Equal(t, []string{secretToken}, e.tokens, "Gitea is asked with the authToken")

	st := e.group("ci").Status
	assert.EqualValues(t, 1, st.ActiveRunners)
	assert.EqualValues(t, 1, st.QueuedJobs)
	assert.EqualValues(t, 1, st.BlockedJobs, "only blocked jobs the group could serve")
	assert.EqualValues(t, 1, st.RunningJobs, "only jobs on this group's runners: not ci-gpu's, not those of ci in another namespace, not a runner without the group's tag")
	assert.EqualValues(t, 3, st.ObservedGeneration)
	require.NotNil(t, st.LastCheckTime)
	ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Equal(t, v1alpha1.ReasonReconciled, ready.Reason)

	claims := e.claims("ci")
	require.Contains(t, claims, int64(1))
	assert.Equal(t, e.jobs()[0].Name, claims[1].JobName)

	evs := e.events()
	require.Len(t, evs, 1)
	assert.Equal(t, v1alpha1.ReasonRunnerCreated, evs[0].Reason)
	assert.Equal(t, "ci", evs[0].InvolvedObject.Name)
}

func TestSecondPassDoesNotDuplicate(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5))
	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest"), queued(2, "ubuntu-latest")}}

	e.pass()
	e.pass()
	e.pass()

	assert.Equal(t, map[int64]int{1: 1, 2: 1}, e.giteaJobsServed())
}

func TestOneBrokenGroupDoesNotStopTheOthers(t *testing.T) {
	tests := []struct {
		name       string
		broken     *v1alpha1.RunnerGroup
		giteaErr   error
		cfg        func(*Config)
		before     func(*env)
		wantReason string
		wantMsg    string
	}{
		{
			name:       "missing auth Secret",
			broken:     newGroup("bad", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.AuthToken.SecretRef.Name = "nope" }),
			wantReason: v1alpha1.ReasonSecretNotFound, wantMsg: "spec.authToken: Secret runners/nope not found",
		},
		{
			name:       "a key the registration Secret does not declare",
			broken:     newGroup("bad", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.RegistrationToken.SecretRef.Key = "other" }),
			wantReason: v1alpha1.ReasonSecretKeyNotDeclared, wantMsg: `spec.registrationToken: key "other" of Secret runners/reg is not listed`,
		},
		{
			name:   "a declared key missing from the registration Secret",
			broken: newGroup("bad", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.RegistrationToken.SecretRef.Key = "other" }),
			before: func(e *env) {
				sec, err := e.kube.CoreV1().Secrets(ns).Get(context.Background(), "reg", metav1.GetOptions{})
				require.NoError(e.t, err)
				sec.Annotations[tenancy.AnnotationRegistrationKeys] = "token,other"
				_, err = e.kube.CoreV1().Secrets(ns).Update(context.Background(), sec, metav1.UpdateOptions{})
				require.NoError(e.t, err)
			},
			wantReason: v1alpha1.ReasonSecretKeyMissing, wantMsg: `spec.registrationToken: Secret runners/reg has no key "other"`,
		},
		{
			name:       "invalid spec admitted before the CRD had a rule",
			broken:     newGroup("bad", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "" }),
			wantReason: v1alpha1.ReasonInvalidSpec, wantMsg: "spec.org is required for scope org",
		},
		{
			name: "a template that mounts a volume over the runner's state",
			broken: newGroup("bad", 5, func(rg *v1alpha1.RunnerGroup) {
				rg.Spec.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "runner", VolumeMounts: []corev1.VolumeMount{{Name: "keep", MountPath: "/data"}},
				}}}}
			}),
			wantReason: v1alpha1.ReasonInvalidTemplate, wantMsg: `spec.template: the runner container mounts volume "keep" at /data`,
		},
		{
			name: "a template with a ServiceAccount, admitted before the CRD had the rule",
			broken: newGroup("bad", 5, func(rg *v1alpha1.RunnerGroup) {
				rg.Spec.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{ServiceAccountName: "deployer"}}
			}),
			wantReason: v1alpha1.ReasonInvalidTemplate, wantMsg: "spec.serviceAccountName is not allowed",
		},
		{
			name: "a template that sets a field the platform pinned",
			broken: newGroup("bad", 5, func(rg *v1alpha1.RunnerGroup) {
				rg.Spec.Template = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{RuntimeClassName: ptr.To("runc")}}
			}),
			cfg:        func(c *Config) { c.Runner.Pinned = []string{"spec.runtimeClassName"} },
			wantReason: v1alpha1.ReasonInvalidTemplate, wantMsg: "spec.runtimeClassName is pinned by the platform team",
		},
		{
			name:       "Gitea refuses the token",
			broken:     newGroup("bad", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "other" }),
			giteaErr:   &gitea.APIError{Kind: gitea.ErrUnauthorized, URL: "/api/v1/orgs/other/actions/jobs", Status: 401, Message: "invalid username, password or token"},
			wantReason: v1alpha1.ReasonGiteaUnauthorized, wantMsg: "cannot list Gitea jobs of org other at https://gitea.example.com",
		},
		{
			name:   "Gitea is older than the scaler reads",
			broken: newGroup("bad", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "other" }),
			giteaErr: &gitea.APIError{Kind: gitea.ErrUnsupportedVersion, URL: "/api/v1/orgs/other/actions/jobs", Status: 404,
				Message: "Gitea 1.25 is older than 1.26, the oldest release whose Actions jobs and runners API the scaler reads; upgrade Gitea"},
			wantReason: v1alpha1.ReasonGiteaVersionUnsupported, wantMsg: "Gitea 1.25 is older than 1.26",
		},
		{
			name:   "the server is Forgejo",
			broken: newGroup("bad", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.Org = "other" }),
			giteaErr: &gitea.APIError{Kind: gitea.ErrUnsupportedServer, URL: "/api/v1/orgs/other/actions/jobs", Status: 404,
				Message: "the server is Forgejo 11.0.3 (compatible with Gitea 1.22.0), which the scaler does not support yet"},
			wantReason: v1alpha1.ReasonForgejoNotSupported, wantMsg: "the server is Forgejo 11.0.3",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.broken, newGroup("good", 5))
			if tt.before != nil {
				tt.before(e)
			}
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
			if tt.giteaErr != nil {
				ok := e.gitea
				e.gitea = &fakeGitea{err: tt.giteaErr}
				defer func() { e.gitea = ok }()
			}
			bad := e.gitea
			sum, err := e.scaler(func(d *Deps, c *Config) {
				if tt.cfg != nil {
					tt.cfg(c)
				}
				d.Gitea = func(url, token string) (gitea.Client, error) {
					return perOrg{"other": bad, "acme": &fakeGitea{snap: gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}}}, nil
				}
			}).Pass(context.Background())
			require.NoError(t, err)

			assert.Equal(t, []string{"runners/bad"}, sum.Failed)
			assert.ErrorContains(t, sum.Err(), "1 of 2 RunnerGroups failed: runners/bad")
			assert.Equal(t, 1, sum.Created, "the good group is served")
			for _, j := range e.jobs() {
				assert.Equal(t, "good", j.Labels[v1alpha1.LabelRunnerGroupName])
			}

			ready := meta.FindStatusCondition(e.group("bad").Status.Conditions, v1alpha1.ConditionReady)
			require.NotNil(t, ready)
			assert.Equal(t, metav1.ConditionFalse, ready.Status)
			assert.Equal(t, tt.wantReason, ready.Reason)
			assert.Contains(t, ready.Message, tt.wantMsg)
			assert.NotContains(t, ready.Message, secretToken)

			var warned bool
			for _, ev := range e.events() {
				assert.NotContains(t, ev.Message, secretToken)
				warned = warned || (ev.InvolvedObject.Name == "bad" && ev.Type == "Warning" && ev.Reason == tt.wantReason)
			}
			assert.True(t, warned, "a Warning event explains the failure")
			assert.NotContains(t, e.logs.String(), secretToken)
		})
	}
}

// perOrg routes Snapshot calls by org, so one pass can see one failing and
// one healthy Gitea target.
type perOrg map[string]*fakeGitea

func (p perOrg) Snapshot(ctx context.Context, t scope.Place) (gitea.Snapshot, error) {
	return p[t.Owner()].Snapshot(ctx, t)
}

func TestSelectorsPickGroups(t *testing.T) {
	label := func(k, v string) func(*v1alpha1.RunnerGroup) {
		return func(rg *v1alpha1.RunnerGroup) { rg.Labels = map[string]string{k: v} }
	}
	tests := []struct {
		name       string
		namespaces []string
		selector   string
		excludes   []string
		want       []string
	}{
		{name: "all", want: []string{"a", "b", "c", "d"}},
		{name: "served namespaces", namespaces: []string{ns}, want: []string{"a", "b", "c"}},
		{name: "served namespaces and a selector", namespaces: []string{ns, "nowhere"}, selector: "pool=gpu", want: []string{"b"}},
		{name: "another namespace only", namespaces: []string{otherNS}, excludes: []string{"pool=arm"}, want: []string{"d"}},
		{name: "selector", selector: "pool=gpu", want: []string{"b", "d"}},
		{name: "excluded by an additional listener", excludes: []string{"pool=gpu"}, want: []string{"a", "c"}},
		{name: "several excludes", excludes: []string{"pool=gpu", "pool in (arm)"}, want: []string{"a"}},
		{name: "JSON selector", selector: `{"matchExpressions":[{"key":"pool","operator":"Exists"}]}`, want: []string{"b", "c", "d"}},
		{name: "JSON exclude", excludes: []string{`{"matchLabels":{"pool":"arm"}}`}, want: []string{"a", "b", "d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, newGroup("a", 1), newGroup("b", 1, label("pool", "gpu")), newGroup("c", 1, label("pool", "arm")),
				newGroup("d", 1, label("pool", "gpu"), inNamespace(otherNS)))
			for _, s := range []*corev1.Secret{secret("api", secretToken), secret("reg", "reg-"+secretToken)} {
				s.Namespace = otherNS
				require.NoError(t, e.kube.Tracker().Add(s))
			}
			e.pass(func(_ *Deps, c *Config) {
				c.Namespaces, c.Selector, c.ExcludeSelectors = tt.namespaces, tt.selector, tt.excludes
			})
			var served []string
			for _, g := range []struct{ namespace, name string }{{ns, "a"}, {ns, "b"}, {ns, "c"}, {otherNS, "d"}} {
				if e.groupIn(g.namespace, g.name).Status.LastCheckTime != nil {
					served = append(served, g.name)
				}
			}
			assert.Equal(t, tt.want, served)
		})
	}
}

// A warm pool of 2 with no demand starts 2 runners, labelled as started for
// no Gitea job, and the next passes start no more; a queued job is then
// left to them (no new runner for it) and the pool is topped up.
func TestWarmPoolStartsItsRunnersOnce(t *testing.T) {
	e := newEnv(t, newGroup("ci", 5, func(rg *v1alpha1.RunnerGroup) { rg.Spec.MinIdleRunners = 2 }))

	e.pass()
	e.pass()

	jobs := e.jobs()
	require.Len(t, jobs, 2, "the pool, once")
	for _, j := range jobs {
		assert.Equal(t, "0", j.Labels[v1alpha1.LabelGiteaJobID], "a warm runner was started for no Gitea job")
	}
	var warmEvents int
	for _, ev := range e.events() {
		if strings.Contains(ev.Message, "for the warm pool") {
			warmEvents++
		}
	}
	assert.Equal(t, 2, warmEvents)

	e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(1, "ubuntu-latest")}}
	e.pass()
	assert.Len(t, e.jobs(), 3, "the job is left to a warm runner; the pool is topped up by one, so 2 stay idle once it takes the job")
}
