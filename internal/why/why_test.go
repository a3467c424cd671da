package why

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/giteaurl"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

const (
	ns = "ci"
	// token is distinctive so the tests can prove it never shows.
	token = "why-s3cr3t-t0ken-4711"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func group(name string, max int32, labels []string, status v1alpha1.RunnerGroupStatus, giteaURL string) *v1alpha1.RunnerGroup {
	return &v1alpha1.RunnerGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Generation: 2},
		Spec: v1alpha1.RunnerGroupSpec{
			Scope: v1alpha1.ScopeOrg, Org: "acme", MaxActiveRunners: max, Labels: labels,
			Gitea:             v1alpha1.GiteaSpec{URL: giteaURL},
			AuthToken:         v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "tokens", Key: "api"}},
			RegistrationToken: &v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "tokens", Key: "reg"}},
		},
		Status: status,
	}
}

// world is the scene every case shares: org acme (repositories app and
// web) and user alice (tool) on a fake Gitea, and four groups of acme in
// namespace ci: plain (default labels, room), gpu (at capacity), arm
// (paused) and big (its Secret is missing).
type world struct {
	srv    *giteatest.Server
	deps   Deps
	groups map[string]*v1alpha1.RunnerGroup
	// cfg is the listener's configuration why is given: the fake Gitea's
	// URL allowed, the scaler's ServiceAccount named.
	cfg Config
	// notEnabled are namespaces where the scaler lacks its rights.
	notEnabled map[string]bool
	// tokens are the tokens Gitea clients were made with.
	tokens []string
}

// scalerSA is the scaler's ServiceAccount, as the chart names it in the
// listener's environment (SCALER_SERVICE_ACCOUNT).
const scalerSA = "gitea-runner:gitea-runner-operator"

func newWorld(t *testing.T) *world {
	t.Helper()
	srv := giteatest.New()
	t.Cleanup(srv.Close)
	srv.AddToken(token, "bot", false)
	w := &world{srv: srv, groups: map[string]*v1alpha1.RunnerGroup{}, notEnabled: map[string]bool{}}
	allowed, err := giteaurl.Parse([]string{srv.URL})
	require.NoError(t, err)
	w.cfg = Config{Namespaces: []string{ns}, AllowedGiteaURLs: allowed,
		Tenancy: tenancy.Names{TenantClusterRole: "gitea-runner-operator-tenant", ServiceAccount: scalerSA}}
	lastPass := metav1.NewTime(now.Add(-42 * time.Second))
	plain := group("plain", 3, nil, v1alpha1.RunnerGroupStatus{LastCheckTime: &lastPass, ObservedGeneration: 2}, srv.URL)
	// The verdicts their last passes recorded, as record.go words them.
	gpu := group("gpu", 1, []string{"gpu"}, v1alpha1.RunnerGroupStatus{ActiveRunners: 1, QueuedJobs: 1, LastCheckTime: &lastPass, ObservedGeneration: 2, Conditions: []metav1.Condition{{
		Type: v1alpha1.ConditionScalingActive, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonAtCapacity, Message: "1 of 1 runners active; queued jobs wait for a free slot",
	}}}, srv.URL)
	arm := group("arm", 0, []string{"arm"}, v1alpha1.RunnerGroupStatus{ObservedGeneration: 2, Conditions: []metav1.Condition{{
		Type: v1alpha1.ConditionScalingActive, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonPaused, Message: "maxActiveRunners is 0: the group starts no runners",
	}}}, srv.URL)
	big := group("big", 2, []string{"big"}, v1alpha1.RunnerGroupStatus{ObservedGeneration: 2, Conditions: []metav1.Condition{{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonSecretNotFound, Message: "spec.registrationToken: Secret ci/big-tokens not found",
	}}}, srv.URL)
	var objs []runtime.Object
	for _, rg := range []*v1alpha1.RunnerGroup{plain, gpu, arm, big} {
		w.groups[rg.Name] = rg
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rg)
		require.NoError(t, err)
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource: "RunnerGroupList"}, objs...)

	// Job 107 has its runner Job, whose pod cannot pull its image.
	rj, err := runnerjob.Build(plain, "plain-pull1", 107, runnerjob.DefaultOptions())
	require.NoError(t, err)
	rj.UID = "uid-plain-pull1"
	rj.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain-pull1-x7k2p", Labels: map[string]string{batchv1.ControllerUidLabel: string(rj.UID)}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "runner", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "act_runner:nope"`}},
		}}},
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tokens", Labels: runnerTokenLabel, Annotations: runnerTokenKeys}, Data: map[string][]byte{"api": []byte(token + "\n"), "reg": []byte("r")}}
	kube := fake.NewSimpleClientset(secret, rj, pod, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	// The scaler holds its rights wherever notEnabled does not say
	// otherwise; why asks as its user (a LocalSubjectAccessReview).
	kube.PrependReactor("create", "localsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.LocalSubjectAccessReview).DeepCopy()
		r.Status.Allowed = r.Spec.User == "system:serviceaccount:gitea-runner:gitea-runner-operator" && !w.notEnabled[a.GetNamespace()]
		return true, r, nil
	})

	require.NoError(t, srv.Load(giteatest.Scene{
		Orgs:  []giteatest.Org{{Name: "acme", Members: []string{"bot"}}},
		Users: []string{"bot", "alice"},
		Repos: []giteatest.Repo{{Owner: "acme", Name: "app"}, {Owner: "acme", Name: "web"}, {Owner: "alice", Name: "tool"}},
		Jobs: []giteatest.Job{
			{ID: 101, Owner: "acme", Repo: "app", RunID: 1, Labels: []string{"ubuntu-latest"}, Status: giteatest.StatusQueued},
			{ID: 102, Owner: "acme", Repo: "app", RunID: 1, Labels: []string{"gpu"}, Status: giteatest.StatusQueued},
			{ID: 103, Owner: "acme", Repo: "app", RunID: 1, Labels: []string{"ubuntu-latest"}, Status: giteatest.StatusBlocked},
			{ID: 104, Owner: "acme", Repo: "app", RunID: 1, Labels: []string{"ubuntu-latest"}, Status: giteatest.StatusInProgress,
				RunnerID: 9, RunnerName: runnerjob.RunnerName(plain, "plain-run01")},
			{ID: 105, Owner: "acme", Repo: "app", RunID: 1, Labels: []string{"ubuntu-latest", "windows"}, Status: giteatest.StatusQueued},
			{ID: 106, Owner: "alice", Repo: "tool", RunID: 2, Labels: []string{"ubuntu-latest"}, Status: giteatest.StatusQueued},
			{ID: 107, Owner: "acme", Repo: "web", RunID: 3, Labels: []string{"ubuntu-latest"}, Status: giteatest.StatusQueued},
			{ID: 108, Owner: "acme", Repo: "web", RunID: 3, Labels: []string{"arm"}, Status: giteatest.StatusQueued},
			{ID: 109, Owner: "acme", Repo: "web", RunID: 3, Labels: []string{"big"}, Status: giteatest.StatusQueued},
			{ID: 110, Owner: "acme", Repo: "web", RunID: 3, Labels: []string{"ubuntu-latest"}, Status: giteatest.StatusCompleted, Conclusion: "success"},
			{ID: 111, Owner: "acme", Repo: "web", RunID: 3, Labels: []string{"windows"}, Status: giteatest.StatusBlocked},
			{ID: 112, Owner: "acme", Repo: "web", RunID: 3, Labels: []string{"ubuntu-latest"}, Status: giteatest.StatusInProgress, RunnerID: 3, RunnerName: "somebodys-laptop"},
		},
	}))
	w.deps = Deps{
		Kube:   kube,
		Groups: runnergroups.Client{Dynamic: dyn},
		Gitea: func(base, tok string) (gitea.Client, error) {
			w.tokens = append(w.tokens, tok)
			return gitea.NewClient(base, tok, gitea.Options{})
		},
		Now: func() time.Time { return now },
	}
	return w
}

func (w *world) explain(t *testing.T, arg string) *Report {
	t.Helper()
	ref, err := ParseRef(arg)
	require.NoError(t, err)
	rep, err := Explain(context.Background(), w.deps, w.cfg, ref)
	require.NoError(t, err)
	return rep
}

func TestExplainSaysWhyAJobHasOrHasNotGotARunner(t *testing.T) {
	w := newWorld(t)
	jobURL := func(repo string, run, id int) string {
		return fmt.Sprintf("%s/acme/%s/actions/runs/%d/jobs/%d", w.srv.URL, repo, run, id)
	}
	tests := []struct {
		name       string
		arg        string
		verdict    string
		status     string
		assigned   string
		couldServe []string
		says       []string
	}{
		{name: "a queued job its group has room for waits for the next pass", arg: jobURL("app", 1, 101),
			verdict: VerdictWaitingForPass, status: StatusQueued, assigned: "ci/plain", couldServe: []string{"ci/plain", "ci/gpu", "ci/arm", "ci/big"},
			says: []string{"Gitea job 101 in acme/app (runs-on: ubuntu-latest) is queued.",
				"Groups that can run it: ci/plain, ci/gpu, ci/arm, ci/big; the assignment rule gives it to ci/plain",
				"ci/arm: can run it; cannot serve now (paused or failing)", "ci/plain has room (0 of 3 runners active)", "last pass 42s ago"}},
		{name: "a bare job ID is found in the groups' own scopes", arg: "101",
			verdict: VerdictWaitingForPass, status: StatusQueued, assigned: "ci/plain"},
		{name: "the only group with the label is at capacity", arg: jobURL("app", 1, 102),
			verdict: VerdictAtCapacity, status: StatusQueued, assigned: "ci/gpu", couldServe: []string{"ci/gpu"},
			says: []string{"Group ci/gpu can run it and is assigned it.", "ci/gpu is at capacity: 1 of 1 runners active."}},
		{name: "a job blocked by needs: gets no runner until it is queued", arg: jobURL("app", 1, 103),
			verdict: VerdictBlocked, status: StatusBlocked, assigned: "ci/plain",
			says: []string{"is blocked.", "It waits for the jobs it needs (needs:) or for approval"}},
		{name: "a running job names its runner and runner Job", arg: "104",
			verdict: VerdictRunning, status: StatusRunning,
			says: []string{"It already runs on runner plain-run01-", "started by runner Job ci/plain-run01 of group ci/plain."}},
		{name: "a running job on a runner no group started", arg: jobURL("web", 3, 112),
			verdict: VerdictRunning, status: StatusRunning,
			says: []string{"It already runs on runner somebodys-laptop, which no RunnerGroup started"}},
		{name: "labels no group offers, and the nearest group's labels", arg: jobURL("app", 1, 105),
			verdict: VerdictLabelsNotOffered, status: StatusQueued,
			says: []string{"No RunnerGroup whose scope contains acme/app offers the label(s) windows.",
				"The nearest group, ci/plain, lacks windows; it offers: ubuntu-22.04, ubuntu-24.04, ubuntu-latest."}},
		{name: "a blocked job that no group would run even once queued", arg: jobURL("web", 3, 111),
			verdict: VerdictLabelsNotOffered, status: StatusBlocked,
			says: []string{"but even once it is queued, no group will run it", "offers the label(s) windows."}},
		{name: "a repository no group contains: nobody can ask Gitea, and nobody serves it",
			arg: w.srv.URL + "/alice/tool/actions/runs/2/jobs/106", verdict: VerdictNoGroupInScope, status: StatusNotFound,
			says: []string{"No selected RunnerGroup on " + w.srv.URL + " contains repository alice/tool"}},
		{name: "a bare ID outside every group's scope is not found", arg: "106",
			verdict: VerdictNotFound, status: StatusNotFound,
			says: []string{"Gitea lists job 106 as neither queued, blocked nor running in org acme (with group ci/"}},
		{name: "a finished job is not found", arg: jobURL("web", 3, 110),
			verdict: VerdictNotFound, status: StatusNotFound, says: []string{"in repo acme/web (with group ci/"}},
		{name: "its runner Job's pod cannot pull its image", arg: jobURL("web", 3, 107),
			verdict: VerdictRunnerPending, status: StatusQueued, assigned: "ci/plain",
			says: []string{`Runner Job ci/plain-pull1 was started for it, but its pod has not started: ImagePullBackOff: Back-off pulling image "act_runner:nope".`}},
		{name: "the only group with the label is paused", arg: jobURL("web", 3, 108),
			verdict: VerdictGroupPaused, status: StatusQueued, assigned: "ci/arm",
			says: []string{"ci/arm is paused (maxActiveRunners: 0)"}},
		{name: "the only group with the label cannot read its Secret", arg: jobURL("web", 3, 109),
			verdict: VerdictGroupFailing, status: StatusQueued, assigned: "ci/big",
			says: []string{"ci/big's last pass failed: SecretNotFound: spec.registrationToken: Secret ci/big-tokens not found."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := w.explain(t, tt.arg)
			assert.Equal(t, tt.verdict, rep.Verdict, "%q", rep.Explanation)
			assert.Equal(t, tt.status, rep.Job.Status)
			assert.Equal(t, tt.assigned, rep.Assigned)
			if tt.couldServe != nil {
				assert.Equal(t, tt.couldServe, rep.CouldServe)
			}
			var text, js bytes.Buffer
			require.NoError(t, Write(&text, rep, "text"))
			require.NoError(t, Write(&js, rep, "json"))
			for _, s := range tt.says {
				assert.Contains(t, text.String(), s)
			}
			assert.Contains(t, text.String(), "verdict: "+tt.verdict)
			assert.NotContains(t, text.String()+js.String(), token, "the API token must never show")
		})
	}
}

// why tells what the group's last pass recorded, and says so when the
// spec has changed since: a group just unpaused is still paused by its
// record until a pass serves it.
func TestExplainReadsTheRecordedVerdictAndSaysWhenTheSpecChangedSince(t *testing.T) {
	w := newWorld(t)
	arm := w.groups["arm"].DeepCopy()
	arm.Generation, arm.Spec.MaxActiveRunners = 3, 2
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(arm)
	require.NoError(t, err)
	_, err = w.deps.Groups.(runnergroups.Client).Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Update(context.Background(), &unstructured.Unstructured{Object: m}, metav1.UpdateOptions{})
	require.NoError(t, err)

	rep := w.explain(t, fmt.Sprintf("%s/acme/web/actions/runs/3/jobs/108", w.srv.URL))
	assert.Equal(t, VerdictGroupPaused, rep.Verdict, "the record's verdict until a pass reads the new spec")
	assert.Equal(t, "ci/arm", rep.Assigned)
	assert.Contains(t, rep.Explanation, "ci/arm was paused when its last pass (at generation 2) recorded it (maxActiveRunners is 0: the group starts no runners); its spec has changed since (generation 3), so its next pass serves it by the new spec: not paused, maxActiveRunners: 2.")
}

func TestExplainPrefersTheRuleOverOtherGroupsThatCanRunIt(t *testing.T) {
	w := newWorld(t)
	// A second group that offers gpu too, with room: the rule still gives
	// gpu jobs to the group with fewer labels, which is at capacity.
	rg := group("gpu-big", 5, []string{"gpu", "big-mem"}, v1alpha1.RunnerGroupStatus{}, w.srv.URL)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rg)
	require.NoError(t, err)
	_, err = w.deps.Groups.(runnergroups.Client).Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Create(context.Background(), &unstructured.Unstructured{Object: m}, metav1.CreateOptions{})
	require.NoError(t, err)

	rep := w.explain(t, "102")
	assert.Equal(t, VerdictAtCapacity, rep.Verdict)
	assert.Contains(t, rep.Explanation, "Its last pass (42s ago, at generation 2) recorded it.", "why names the pass that recorded the verdict")
	assert.Equal(t, "ci/gpu", rep.Assigned)
	assert.Equal(t, []string{"ci/gpu", "ci/gpu-big"}, rep.CouldServe)
	assert.Contains(t, rep.Explanation[1], "Groups that can run it: ci/gpu, ci/gpu-big; the assignment rule gives it to ci/gpu")
	var js bytes.Buffer
	require.NoError(t, Write(&js, rep, "json"))
	var back struct {
		Groups []GroupVerdict `json:"groups"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	assert.NotEmpty(t, back.Groups)
}

func TestExplainFailsWhenNoGroupTokenCanAskGitea(t *testing.T) {
	w := newWorld(t)
	require.NoError(t, w.deps.Kube.CoreV1().Secrets(ns).Delete(context.Background(), "tokens", metav1.DeleteOptions{}))
	ref, err := ParseRef("101")
	require.NoError(t, err)
	_, err = Explain(context.Background(), w.deps, w.cfg, ref)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "could not ask Gitea about job 101")
	assert.Contains(t, err.Error(), "Secret ci/tokens not found")
}

func TestExplainUsesAnotherGroupsTokenWhenOneFails(t *testing.T) {
	w := newWorld(t)
	// A paused group listed first, whose token Gitea refuses.
	rg := group("aaa-broken", 0, nil, v1alpha1.RunnerGroupStatus{}, w.srv.URL)
	rg.Spec.AuthToken.SecretRef.Name = "bad-tokens"
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rg)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = w.deps.Groups.(runnergroups.Client).Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: m}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = w.deps.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-tokens", Labels: runnerTokenLabel, Annotations: runnerTokenKeys},
		Data: map[string][]byte{"api": []byte("revoked-token")}}, metav1.CreateOptions{})
	require.NoError(t, err)

	rep := w.explain(t, "103")
	assert.Equal(t, VerdictBlocked, rep.Verdict)
	assert.Equal(t, "ci/plain", rep.Assigned, "a paused group comes after one that can serve")
	require.Len(t, rep.Notes, 1)
	assert.Contains(t, rep.Notes[0], "group ci/aaa-broken: cannot list the jobs of org acme")
	assert.NotContains(t, rep.Notes[0], "revoked-token")
}

func TestParseRef(t *testing.T) {
	tests := []struct {
		in   string
		want Ref
		err  string
	}{
		{in: "42", want: Ref{JobID: 42}},
		{in: " 42\n", want: Ref{JobID: 42}},
		{in: "https://gitea.example.com/acme/app/actions/runs/12/jobs/34", want: Ref{Base: "https://gitea.example.com", Owner: "acme", Repo: "app", JobID: 34}},
		{in: "https://example.com/git/acme/app/actions/runs/12/jobs/34/?x=1#l", want: Ref{Base: "https://example.com/git", Owner: "acme", Repo: "app", JobID: 34}},
		{in: "http://127.0.0.1:3000/alice/my%20tool/actions/runs/1/jobs/7", want: Ref{Base: "http://127.0.0.1:3000", Owner: "alice", Repo: "my tool", JobID: 7}},
		{in: "0", err: "must be positive"},
		{in: "-3", err: "must be positive"},
		{in: "https://gitea.example.com/acme/app/actions/runs/12", err: "should end in /OWNER/REPO/actions/runs/RUN/jobs/JOB"},
		{in: "https://gitea.example.com/acme/app/actions/runs/12/jobs/x", err: `the job part "x" is not a job ID`},
		{in: "https://gitea.example.com/actions/runs/12/jobs/3", err: "should end in"},
		{in: "ftp://gitea.example.com/acme/app/actions/runs/12/jobs/3", err: "neither a job ID nor a Gitea job URL"},
		{in: "build", err: "neither a job ID nor a Gitea job URL"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRef(tt.in)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// Gitea gives a queued job to any idle runner that fits: the runner Job
// started for job 101 may run job 104, and 101 then waits like any other.
func TestExplainSeesARunnerJobWhoseRunnerTookAnotherJob(t *testing.T) {
	w := newWorld(t)
	rj, err := runnerjob.Build(w.groups["plain"], "plain-run01", 101, runnerjob.DefaultOptions())
	require.NoError(t, err)
	rj.Annotations = map[string]string{v1alpha1.AnnotationRunnerName: runnerjob.RunnerName(w.groups["plain"], "plain-run01")}
	_, err = w.deps.Kube.BatchV1().Jobs(ns).Create(context.Background(), rj, metav1.CreateOptions{})
	require.NoError(t, err)

	rep := w.explain(t, "101")
	assert.Equal(t, VerdictWaitingForPass, rep.Verdict)
	assert.Nil(t, rep.Runner)
	assert.Contains(t, rep.Explanation, "Runner Job ci/plain-run01 was started for it, but its runner took job 104 instead (Gitea gives a queued job to any idle runner whose labels fit), so this one waits for another runner.")
}

// Groups often reach Gitea by an in-cluster URL while people copy the
// public one from their browser.
func TestExplainFindsAJobByItsPublicURLWhenGroupsUseAnotherOne(t *testing.T) {
	w := newWorld(t)
	rep := w.explain(t, "https://gitea.example.com/acme/app/actions/runs/1/jobs/102")
	assert.Equal(t, VerdictAtCapacity, rep.Verdict, "%q", rep.Explanation)
	assert.Equal(t, "ci/gpu", rep.Assigned)
	assert.Equal(t, w.srv.URL, rep.Job.Gitea, "the group's own URL")
	assert.Contains(t, rep.Notes, "no selected group uses https://gitea.example.com; asked the groups whose scope contains acme/app, each at its own Gitea URL")

	rep = w.explain(t, "https://gitea.example.com/alice/tool/actions/runs/2/jobs/106")
	assert.Equal(t, VerdictNoGroupInScope, rep.Verdict)
	assert.Empty(t, rep.Notes)
}

// A job URL names the repository: why asks Gitea for that repository's
// listing only, once, however many groups contain it; a bare ID asks each
// distinct scope (and token) once until one lists the job. Both are
// compared with what one Snapshot costs, whatever the client's requests.
func TestExplainAsksGiteaAsLittleAsItCan(t *testing.T) {
	w := newWorld(t)
	client, err := gitea.NewClient(w.srv.URL, token, gitea.Options{})
	require.NoError(t, err)
	w.srv.ResetRequests()
	_, err = client.Snapshot(context.Background(), scope.New("", gitea.ScopeOrg, "acme", ""))
	require.NoError(t, err)
	oneSnapshot := len(w.srv.Requests())

	w.srv.ResetRequests()
	w.explain(t, w.srv.URL+"/acme/app/actions/runs/1/jobs/102")
	reqs := w.srv.Requests()
	t.Logf("by URL: %d requests: %q", len(reqs), reqs)
	assert.Len(t, reqs, oneSnapshot, "one snapshot of the repository")
	for _, r := range reqs {
		assert.Contains(t, r, "/api/v1/repos/acme/app/actions/jobs", "only the repository's listing")
	}

	w.srv.ResetRequests()
	w.explain(t, "102")
	reqs = w.srv.Requests()
	t.Logf("by ID: %d requests: %q", len(reqs), reqs)
	assert.Len(t, reqs, oneSnapshot, "one snapshot for the four groups sharing a scope and token")
	for _, r := range reqs {
		assert.Contains(t, r, "/api/v1/orgs/acme/actions/jobs", "the groups' own scope")
	}
}

// A warm pool's idle runner takes a queued job without a new runner.
func TestExplainPointsAtTheWarmPoolsIdleRunners(t *testing.T) {
	w := newWorld(t)
	rg := w.groups["gpu"].DeepCopy()
	rg.Spec.MaxActiveRunners, rg.Spec.MinIdleRunners = 3, 1
	rg.Status.IdleRunners, rg.Status.WarmRunners = 1, 1
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rg)
	require.NoError(t, err)
	_, err = w.deps.Groups.(runnergroups.Client).Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Update(context.Background(), &unstructured.Unstructured{Object: m}, metav1.UpdateOptions{})
	require.NoError(t, err)

	rep := w.explain(t, "102")
	assert.Equal(t, VerdictIdleRunner, rep.Verdict)
	assert.Contains(t, rep.Explanation, "At its last pass ci/gpu had 1 idle runner(s) (1 kept by its warm pool): Gitea gives a queued job to an idle runner whose labels fit when that runner next asks, so this job needs no new runner.")
}

// runnerTokenLabel lets the scaler's rules use a token Secret (see
// tenancy.SecretLabel); why reads tokens by the same rules.
var runnerTokenLabel = map[string]string{tenancy.SecretLabel: "true"}

// runnerTokenKeys declare what the token Secrets' keys hold
// (tenancy.TokenKeyRefusal): why sends only a declared API key to Gitea.
var runnerTokenKeys = map[string]string{tenancy.AnnotationAPIKeys: "api", tenancy.AnnotationRegistrationKeys: "reg"}

// Issue 25.3 and 25.4: why judges a group as the passes do. A repo-scope
// group that no listener has ever served (no status) keeps no job from the
// org group that is served, in why's answer as in the passes'.
func TestExplainGivesTheAnswerOfThePassesForAGroupNoListenerServes(t *testing.T) {
	w := newWorld(t)
	rg := group("web-repo", 5, nil, v1alpha1.RunnerGroupStatus{}, w.srv.URL)
	rg.Spec.Scope, rg.Spec.Repo = v1alpha1.ScopeRepo, "web"
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rg)
	require.NoError(t, err)
	_, err = w.deps.Groups.(runnergroups.Client).Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Create(context.Background(), &unstructured.Unstructured{Object: m}, metav1.CreateOptions{})
	require.NoError(t, err)

	rep := w.explain(t, "107")
	assert.Equal(t, "ci/plain", rep.Assigned)
	assert.Equal(t, []string{"ci/plain", "ci/gpu", "ci/web-repo", "ci/arm", "ci/big"}, rep.CouldServe, "the group never served comes after those that are, before those that cannot serve and are less specific")
	for _, v := range rep.Groups {
		if v.Group == "ci/web-repo" {
			assert.False(t, v.Eligible)
		}
	}
}
