//go:build e2e

// The chart under the shipped restricted-pods policy and Pod Security
// Admission "restricted", on the test bed's real kube-apiserver:
//
//   - the default listener (CronJob and Deployment mode) is admitted by
//     `helm install`, and its pods are admitted and run;
//   - a listenerTemplate that breaks a rule makes `helm install` itself fail
//     with the policy's message naming the rule and the container;
//   - runner Jobs run in an unlabelled namespace, as policies/README.md says
//     they must, and the very same Job shape is refused in a restricted one.
//
// The bed, namespaces, waits, helm and Gitea are the framework's
// (internal/e2e: bed.go and the files beside it); what only these tests need
// starts with "pol". Namespaces are e2e-pol-<part>-<random>, releases and Gitea
// organisations pol-<run suffix>[-part]. The restricted-pods policy and its
// binding are applied and left in place (never deleted: see the param-watch
// bug that policies/README.md describes; restricted-pods has no params, but
// the rule for the bed is the same). Run with:
//
//	scripts/testbed up
//	go test -count=1 -tags e2e -run 'TestPolicyChart' -v ./internal/e2e/chart/
package chart

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

const (
	// polPSALabel turns on Pod Security Admission enforcement.
	polPSALabel = "pod-security.kubernetes.io/enforce"
	// polPolicy is the shipped policy (and binding) these tests run under.
	polPolicy = "restricted-pods"
)

// polSetup connects to the bed and server-side applies
// policies/restricted-pods.yaml as shipped (the same as `kubectl apply -f`,
// idempotent), then waits until the API server has type-checked the policy
// without warnings. It never deletes the policy or its binding.
func polSetup(ctx context.Context, t *testing.T) *e2e.Testbed {
	t.Helper()
	b := e2e.Bed(t)
	kinds := map[string]bool{}
	for _, obj := range e2e.ReadObjects(t, filepath.Join(b.Root, "policies", "restricted-pods.yaml")) {
		require.Contains(t, []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}, obj.GetKind(), "a kind in restricted-pods.yaml")
		require.Equal(t, polPolicy, obj.GetName(), "the name of the %s", obj.GetKind())
		kinds[obj.GetKind()] = true
		b.ApplyKept(ctx, t, obj)
	}
	require.Len(t, kinds, 2, "restricted-pods.yaml holds a policy and a binding")
	b.PolicyReady(ctx, t, polPolicy)
	return b
}

// polNamespace creates the namespace e2e-pol-<part>-<random>, restricted or
// not, which goes when the test ends. A restricted namespace carries both
// the policy's label and PSA's enforce=restricted, as policies/README.md
// asks; polNamespace then waits until the policy refuses a probe there, so
// that no later admission can be a policy that has not caught up yet.
func polNamespace(b *e2e.Testbed, ctx context.Context, t *testing.T, part string, restricted bool) string {
	t.Helper()
	if !restricted {
		return b.Namespace(ctx, t, "e2e-pol-"+part, nil)
	}
	ns := b.Namespace(ctx, t, "e2e-pol-"+part, map[string]string{e2e.RestrictedLabel: "true", polPSALabel: "restricted"})
	polWaitPolicyCovers(b, ctx, t, ns)
	return ns
}

// polWaitPolicyCovers waits until restricted-pods refuses, in ns, a pod that
// passes PSA restricted but sets no resources and a writable root. PSA runs
// first and would hide the policy behind its own refusal, hence the shape.
func polWaitPolicyCovers(b *e2e.Testbed, ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pol-probe", Namespace: ns},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   polPtr(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:  "probe",
				Image: "registry.e2e.invalid/pol/probe:1",
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: polPtr(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	e2e.WaitUntil(ctx, t, e2e.StepWait, "restricted-pods refusing a probe pod in "+ns, nil, func(ctx context.Context) (bool, string, error) {
		_, err := b.Kube.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return false, "the probe was admitted", nil
		}
		return strings.Contains(err.Error(), "restricted-pods/resources"), err.Error(), nil
	})
}

func polPtr[T any](v T) *T { return &v }

// polJobState is a Job's counters and true conditions, for messages.
func polJobState(j *batchv1.Job) string {
	var conds []string
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			conds = append(conds, string(c.Type))
		}
	}
	return fmt.Sprintf("active=%d succeeded=%d failed=%d conditions=%v", j.Status.Active, j.Status.Succeeded, j.Status.Failed, conds)
}

// polManualPass starts a scaler pass by hand, as the chart's NOTES.txt says
// (`kubectl create job --from=cronjob/<name> <job>`), with what that command
// sends: the CronJob's job template, its labels and annotations plus
// cronjob.kubernetes.io/instantiate=manual, owned by the CronJob. Done with
// client-go because kubectl is not among the tools the bed builds.
func polManualPass(b *e2e.Testbed, ctx context.Context, t *testing.T, ns, cronJob, job string) *batchv1.Job {
	t.Helper()
	cj, err := b.Kube.BatchV1().CronJobs(ns).Get(ctx, cronJob, metav1.GetOptions{})
	require.NoError(t, err)
	annotations := map[string]string{"cronjob.kubernetes.io/instantiate": "manual"}
	for k, v := range cj.Spec.JobTemplate.Annotations {
		annotations[k] = v
	}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            job,
			Namespace:       ns,
			Labels:          cj.Spec.JobTemplate.Labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))},
		},
		Spec: cj.Spec.JobTemplate.Spec,
	}
	got, err := b.Kube.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{FieldManager: e2e.FieldManager})
	require.NoError(t, err, "a manual pass is admitted in the restricted namespace")
	return got
}

// polWaitJobPod waits until the (only) pod of a Job reaches phase; a pod
// that fails, or a Job whose pods are refused, fails the test at once.
func polWaitJobPod(b *e2e.Testbed, ctx context.Context, t *testing.T, ns, job string, phase corev1.PodPhase, dump func() string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	e2e.WaitUntil(ctx, t, e2e.StepWait, fmt.Sprintf("the pod of Job %s/%s %s", ns, job, phase), dump, func(ctx context.Context) (bool, string, error) {
		pods, err := b.JobPods(ctx, ns, job)
		if err != nil {
			return false, err.Error(), nil
		}
		if len(pods) == 0 {
			// A refused pod leaves the Job podless, with a FailedCreate event.
			evs, err := b.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + job})
			if err == nil {
				for _, ev := range evs.Items {
					if ev.Reason == "FailedCreate" {
						return false, "", fmt.Errorf("the Job's pod was refused: %s", ev.Message)
					}
				}
			}
			return false, "no pod yet", nil
		}
		if len(pods) > 1 {
			return false, "", fmt.Errorf("%d pods, want 1 (a retried pass?)", len(pods))
		}
		pod = pods[0]
		if pod.Status.Phase == corev1.PodFailed && phase != corev1.PodFailed {
			return false, "", fmt.Errorf("pod %s failed: %s", pod.Name, pod.Status.Message)
		}
		return pod.Status.Phase == phase, fmt.Sprintf("pod %s %s", pod.Name, pod.Status.Phase), nil
	})
	return pod
}

// polValues are baseValues with the chart's own scaler settings: these
// tests are about what the chart installs by default. Only the default
// runner labels stay the bed's (bedHostLabel): the chart's default labels
// run jobs in Docker images, which the bed has none of.
func polValues(watch ...string) map[string]any {
	v := e2e.BaseValues(watch...)
	v["scaler"] = map[string]any{"defaultLabels": []string{e2e.HostLabel}}
	return v
}

// polRefusal splits a restricted-pods refusal into its rules: rule name
// ("restricted-pods/resources") to its whole text. The policy joins the
// rules with "; " after "denied request: ".
func polRefusal(msg string) map[string]string {
	out := map[string]string{}
	_, rest, ok := strings.Cut(msg, "ValidatingAdmissionPolicy '"+polPolicy+"'")
	if !ok {
		return out
	}
	_, rest, ok = strings.Cut(rest, "denied request: ")
	if !ok {
		return out
	}
	rest, _, _ = strings.Cut(rest, "\n")
	for part := range strings.SplitSeq(rest, "; ") {
		part = strings.TrimSpace(part)
		if rule, _, ok := strings.Cut(part, ": "); ok && strings.HasPrefix(rule, polPolicy+"/") {
			out[rule] = part
		}
	}
	return out
}

// ---------------------------------------------------------------- tests

// polRules are restricted-pods' rules, as the refusal names them.
var polRules = []string{"resources", "runAsNonRoot", "allowPrivilegeEscalation", "readOnlyRootFilesystem", "capabilities", "seccompProfile"}

// TestPolicyChartCronJobListener installs the chart with its default
// listener (mode cronjob) into a namespace under restricted-pods and PSA
// restricted, runs a manual pass there, lets that listener serve a real
// Gitea job of a RunnerGroup in an unlabelled runner namespace, and then
// shows that the same runner Job is refused in the restricted namespace:
// why policies/README.md says runner namespaces must stay unlabelled.
func TestPolicyChartCronJobListener(t *testing.T) {
	e2e.Parallel(t)
	ctx := e2e.TestContext(t, 5*time.Minute)
	b := polSetup(ctx, t)

	sys := polNamespace(b, ctx, t, "cron", true)
	runners := polNamespace(b, ctx, t, "cron-runners", false)
	dump := func() string { return b.DumpNamespaces(sys, runners) }

	// The Gitea scope and the RunnerGroup. The runner label is unique to the
	// run, so that no other test's runner can take this job.
	key, label := "build", e2e.Uniq("pol", "label")
	fx := b.NewOrgScope(ctx, t, e2e.Uniq("pol"))
	const group = "pol-runners"
	b.CreateScopedGroup(ctx, t, runners, group, fx, 2, label)

	// The default listener, admitted as a CronJob.
	release := e2e.Uniq("pol", "cron")
	workload := release + "-" + e2e.ChartName
	out, err := b.TryHelmInstall(ctx, t, sys, release, e2e.ValuesFile(t, polValues(runners)))
	require.NoError(t, err, "helm install with the default listener must be admitted:\n%s", out)
	assert.NotContains(t, out, "PodSecurity", "PSA warns about nothing in the default listener's pod template")
	cj, err := b.Kube.BatchV1().CronJobs(sys).Get(ctx, workload, metav1.GetOptions{})
	require.NoError(t, err, "the CronJob exists")
	require.NotEmpty(t, cj.Spec.JobTemplate.Spec.Template.Spec.Containers)
	assert.Equal(t, "listener", cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Name)

	// A job for the listener to serve, queued before the manual pass.
	b.Gitea.PushWorkflow(ctx, t, fx.PushAs, fx.Repo, "pol.yaml", e2e.Workflow(e2e.WfJob{Key: key, RunsOn: []string{label}}))
	var gjob giteasetup.Job
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the Gitea job "+key+" queued", dump, func(ctx context.Context) (bool, string, error) {
		jobs, err := b.Gitea.RepoJobs(ctx, fx.Repo)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, j := range jobs {
			if j.Name == key {
				gjob = j
				// A scheduled tick may have served it already: fine too.
				return j.Status != "waiting", j.State(), nil
			}
		}
		return false, fmt.Sprintf("%d jobs, none named %s", len(jobs), key), nil
	})
	require.Contains(t, gjob.Labels, label)

	// A manual pass, admitted, runs to Succeeded (exit 0: the group served).
	manual := e2e.Uniq("pol", "cron", "manual")
	polManualPass(b, ctx, t, sys, workload, manual)
	pass := polWaitJobPod(b, ctx, t, sys, manual, corev1.PodSucceeded, dump)
	t.Logf("manual pass %s: pod %s Succeeded", manual, pass.Name)

	// The runner Job in the unlabelled namespace: one for the Gitea job,
	// its privileged pod admitted, the Job Complete, the Gitea job a success.
	var runner batchv1.Job
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the runner Job of Gitea job #"+strconv.FormatInt(gjob.ID, 10)+" Complete and the job a success", dump, func(ctx context.Context) (bool, string, error) {
		list, err := b.Kube.BatchV1().Jobs(runners).List(ctx, metav1.ListOptions{
			LabelSelector: e2e.LabelGroup + "=" + group + "," + e2e.LabelGiteaJob + "=" + strconv.FormatInt(gjob.ID, 10),
		})
		if err != nil {
			return false, err.Error(), nil
		}
		if len(list.Items) > 1 {
			return false, "", fmt.Errorf("%d runner Jobs for one Gitea job", len(list.Items))
		}
		if len(list.Items) == 0 {
			return false, "no runner Job yet", nil
		}
		runner = list.Items[0]
		if e2e.JobCondition(&runner, batchv1.JobFailed) {
			return false, "", fmt.Errorf("runner Job %s failed: %s", runner.Name, polJobState(&runner))
		}
		jobs, err := b.Gitea.RepoJobs(ctx, fx.Repo)
		if err != nil {
			return false, err.Error(), nil
		}
		state := ""
		for _, j := range jobs {
			if j.ID == gjob.ID {
				gjob = j
				state = j.State()
			}
		}
		if gjob.Status == "completed" && gjob.Conclusion != "success" {
			return false, "", fmt.Errorf("Gitea job #%d ended %s", gjob.ID, state)
		}
		seen := fmt.Sprintf("runner Job %s %s; Gitea job #%d %s on runner %q", runner.Name, polJobState(&runner), gjob.ID, state, gjob.RunnerName)
		return e2e.JobCondition(&runner, batchv1.JobComplete) && state == "completed/success", seen, nil
	})
	assert.Equal(t, runnerjob.RunnerNameOf(&runner), gjob.RunnerName, "the runner Job's runner took the Gitea job")
	rpod := runner.Spec.Template.Spec
	require.Len(t, rpod.Containers, 1)
	sc := rpod.Containers[0].SecurityContext
	require.True(t, sc != nil && sc.Privileged != nil && *sc.Privileged, "the runner container is privileged (dind)")
	pods, err := b.JobPods(ctx, runners, runner.Name)
	require.NoError(t, err)
	require.NotEmpty(t, pods, "the privileged runner pod was admitted")
	assert.Equal(t, corev1.PodSucceeded, pods[len(pods)-1].Status.Phase)

	// The same runner Job, and its pod, in the restricted namespace.
	t.Run("the runner Job is refused by restricted-pods in a restricted namespace", func(t *testing.T) {
		job := polRunnerJobCopy(&runner, sys)
		_, err := b.WarnKube.BatchV1().Jobs(sys).Create(ctx, job, metav1.CreateOptions{FieldManager: e2e.FieldManager})
		require.Error(t, err, "the runner Job must be refused where the namespace is restricted")
		assert.True(t, apierrors.IsForbidden(err), "refused by the policy: %v", err)
		assert.Contains(t, err.Error(), `jobs.batch "`+job.Name+`" is forbidden: ValidatingAdmissionPolicy '`+polPolicy+`' with binding '`+polPolicy+`' denied request`)
		rules := polRefusal(err.Error())
		for _, r := range polRules {
			seg, ok := rules[polPolicy+"/"+r]
			if r == "resources" {
				// The built-in runner pod sets cpu and memory requests and
				// limits (README, "Runner pods"): that rule holds.
				assert.False(t, ok, "the runner container sets requests and limits: %s", seg)
				continue
			}
			if assert.True(t, ok, "rule %s/%s in the refusal: %v", polPolicy, r, err) {
				assert.True(t, strings.HasSuffix(seg, "in: runner)"), "rule %s names the runner container: %s", r, seg)
			}
		}
		// PSA only warns about templates; what it says is why the pod
		// could never run here either.
		assert.NotEmpty(t, b.Warnings.Matching(`would violate PodSecurity "restricted:latest": privileged (container "runner"`),
			"PSA's warning about the privileged runner container")
	})
	t.Run("the runner pod is refused by PSA restricted", func(t *testing.T) {
		tmpl := polRunnerJobCopy(&runner, sys).Spec.Template
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: runner.Name + "-pod", Namespace: sys, Labels: tmpl.Labels, Annotations: tmpl.Annotations},
			Spec:       tmpl.Spec,
		}
		_, err := b.Kube.CoreV1().Pods(sys).Create(ctx, pod, metav1.CreateOptions{FieldManager: e2e.FieldManager})
		require.Error(t, err, "the runner pod must be refused where the namespace is restricted")
		assert.True(t, apierrors.IsForbidden(err), "refused by admission: %v", err)
		// Pod Security Admission runs before the policies and refuses first.
		assert.Contains(t, err.Error(), `violates PodSecurity "restricted:latest": privileged (container "runner" must not set securityContext.privileged=true)`)
	})
}

// polRunnerJobCopy is a runner Job as the scaler made it, ready to be
// created again in ns: without what the API server and the Job controller
// added (selector, controller-uid labels) or the owner in its namespace.
func polRunnerJobCopy(j *batchv1.Job, ns string) *batchv1.Job {
	spec := *j.Spec.DeepCopy()
	spec.Selector = nil
	spec.ManualSelector = nil
	for _, k := range []string{"controller-uid", batchv1.ControllerUidLabel, "job-name", batchv1.JobNameLabel} {
		delete(spec.Template.Labels, k)
	}
	labels := map[string]string{}
	for k, v := range j.Labels {
		labels[k] = v
	}
	for _, k := range []string{"controller-uid", batchv1.ControllerUidLabel, "job-name", batchv1.JobNameLabel} {
		delete(labels, k)
	}
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: ns, Labels: labels}, Spec: spec}
}

// TestPolicyChartDeploymentListener installs the chart in mode deployment
// into a namespace under restricted-pods and PSA restricted: the Deployment
// is admitted, and its pod is admitted, Running and passing.
func TestPolicyChartDeploymentListener(t *testing.T) {
	e2e.Parallel(t)
	ctx := e2e.TestContext(t, 3*time.Minute)
	b := polSetup(ctx, t)

	sys := polNamespace(b, ctx, t, "deploy", true)
	runners := polNamespace(b, ctx, t, "deploy-runners", false)
	dump := func() string { return b.DumpNamespaces(sys) }

	release := e2e.Uniq("pol", "deploy")
	workload := release + "-" + e2e.ChartName
	values := polValues(runners)
	values["mode"] = "deployment"
	out, err := b.TryHelmInstall(ctx, t, sys, release, e2e.ValuesFile(t, values))
	require.NoError(t, err, "helm install in mode deployment must be admitted:\n%s", out)
	assert.NotContains(t, out, "PodSecurity", "PSA warns about nothing in the default listener's pod template")
	_, err = b.Kube.AppsV1().Deployments(sys).Get(ctx, workload, metav1.GetOptions{})
	require.NoError(t, err, "the Deployment exists")

	var pod corev1.Pod
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the Deployment's pod Running and available", dump, func(ctx context.Context) (bool, string, error) {
		evs, err := b.Kube.CoreV1().Events(sys).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
		if err == nil && len(evs.Items) > 0 {
			return false, "", fmt.Errorf("a pod was refused: %s", evs.Items[0].Message)
		}
		pods, err := b.Kube.CoreV1().Pods(sys).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
		if err != nil {
			return false, err.Error(), nil
		}
		d, err := b.Kube.AppsV1().Deployments(sys).Get(ctx, workload, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		var phases []string
		running := 0
		for _, p := range pods.Items {
			phases = append(phases, p.Name+"="+string(p.Status.Phase))
			if p.Status.Phase == corev1.PodRunning {
				pod, running = p, running+1
			}
		}
		seen := fmt.Sprintf("pods %v, available replicas %d", phases, d.Status.AvailableReplicas)
		return running == 1 && d.Status.AvailableReplicas == 1, seen, nil
	})
	assert.Equal(t, "listener", pod.Spec.Containers[0].Name)
	// The pod is the scaler, looping: its first pass has finished (the bed's
	// agent writes each container's output under TESTBED_DIR/logs/pods).
	e2e.WaitUntil(ctx, t, e2e.StepWait, "a finished pass in the listener's log", dump, func(ctx context.Context) (bool, string, error) {
		log := b.PodLog(sys, pod.Name, "listener")
		return strings.Contains(log, "pass finished"), e2e.Tail(log, 3), nil
	})
}

// TestPolicyChartRefusals installs the chart with values that break one rule
// each: `helm install` itself must fail, with the policy's message naming
// exactly that rule and the container, and the workload must not exist.
func TestPolicyChartRefusals(t *testing.T) {
	e2e.Parallel(t)
	ctx := e2e.TestContext(t, 3*time.Minute)
	b := polSetup(ctx, t)
	ns := polNamespace(b, ctx, t, "refusals", true)
	base := e2e.ValuesFile(t, polValues(ns))

	const cronJobs, deployments = "cronjobs.batch", "deployments.apps"
	tests := map[string]struct {
		file  string // under testdata/policy-chart
		kind  string // the resource the refusal names
		rules map[string][]string
	}{
		"no limits": {
			file: "no-limits.yaml", kind: cronJobs,
			rules: map[string][]string{"resources": {"resources.requests and resources.limits", "(missing in: listener)"}},
		},
		"run as root": {
			file: "run-as-root.yaml", kind: cronJobs,
			rules: map[string][]string{"runAsNonRoot": {"securityContext.runAsNonRoot: true", "(not set in: listener)"}},
		},
		"privilege escalation": {
			file: "privilege-escalation.yaml", kind: deployments,
			rules: map[string][]string{"allowPrivilegeEscalation": {"securityContext.allowPrivilegeEscalation: false", "(not set in: listener)"}},
		},
		"writable root filesystem": {
			file: "writable-root.yaml", kind: cronJobs,
			rules: map[string][]string{"readOnlyRootFilesystem": {"securityContext.readOnlyRootFilesystem: true", "(not set in: listener)"}},
		},
		"sidecar without resources": {
			file: "sidecar-without-resources.yaml", kind: deployments,
			rules: map[string][]string{"resources": {"resources.requests and resources.limits", "(missing in: sidecar)"}},
		},
		"initContainer keeping capabilities": {
			file: "init-keeps-capabilities.yaml", kind: cronJobs,
			rules: map[string][]string{"capabilities": {"drop: [ALL]", "(not dropped in: wait)"}},
		},
	}
	i := 0
	for name, tc := range tests {
		i++
		release := e2e.Uniq("pol", "bad"+strconv.Itoa(i))
		t.Run(name, func(t *testing.T) {
			e2e.ParallelSub(t)
			// A context of its own: a parallel subtest may wait for a free
			// slot longer than its parent's context lasts (the suite runs
			// GOMAXPROCS tests at once, 2 on CI's machines).
			ctx := e2e.TestContext(t, 2*time.Minute)
			workload := release + "-" + e2e.ChartName
			out, err := b.TryHelmInstall(ctx, t, ns, release, base, filepath.Join(b.Root, "internal", "e2e", "chart", "testdata", "policy-chart", tc.file))
			require.Error(t, err, "helm install must fail:\n%s", out)
			require.Contains(t, out, fmt.Sprintf(`%s "%s" is forbidden: ValidatingAdmissionPolicy '%s' with binding '%s' denied request: `,
				tc.kind, workload, polPolicy, polPolicy), "refused by the policy at install time (helm: %v)", err)
			got := polRefusal(out)
			want := make([]string, 0, len(tc.rules))
			for r := range tc.rules {
				want = append(want, polPolicy+"/"+r)
			}
			assert.ElementsMatch(t, want, slices.Sorted(maps.Keys(got)), "exactly the broken rules:\n%s", out)
			for r, phrases := range tc.rules {
				for _, p := range phrases {
					assert.Contains(t, got[polPolicy+"/"+r], p)
				}
			}
			var gerr error
			if tc.kind == cronJobs {
				_, gerr = b.Kube.BatchV1().CronJobs(ns).Get(ctx, workload, metav1.GetOptions{})
			} else {
				_, gerr = b.Kube.AppsV1().Deployments(ns).Get(ctx, workload, metav1.GetOptions{})
			}
			assert.True(t, apierrors.IsNotFound(gerr), "the refused %s does not exist: %v", tc.kind, gerr)
		})
	}
}
