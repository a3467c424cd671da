//go:build e2e

package chart

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
)

// manualAnnotation marks a Job made by `kubectl create job --from=cronjob/...`.
const manualAnnotation = "cronjob.kubernetes.io/instantiate"

// passJobs lists the Jobs the CronJob owns: its scheduled passes and the
// manual ones kubectl made from it.
func passJobs(b *e2e.Testbed, ctx context.Context, ns, cronJob string) ([]batchv1.Job, error) {
	list, err := b.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []batchv1.Job
	for _, j := range list.Items {
		for _, ref := range j.OwnerReferences {
			if ref.Kind == "CronJob" && ref.Name == cronJob {
				out = append(out, j)
			}
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].CreationTimestamp.Before(&out[k].CreationTimestamp) })
	return out, nil
}

// passPod is the pod of a pass Job.
func passPod(b *e2e.Testbed, ctx context.Context, ns, job string) (*corev1.Pod, error) {
	pods, err := b.JobPods(ctx, ns, job)
	if err != nil {
		return nil, err
	}
	if len(pods) != 1 {
		return nil, fmt.Errorf("Job %s has %d pods", job, len(pods))
	}
	return &pods[0], nil
}

var logTimeRE = regexp.MustCompile(`^time=(\S+) `)

// passWindow is when a pass ran, from its first to its last log line.
type passWindow struct {
	job        string
	start, end time.Time
	created    int // runner Jobs it created
	conflicts  int // times it lost the race for the state ConfigMap
}

func parsePassLog(job, log string) passWindow {
	w := passWindow{job: job}
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		m := logTimeRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		if w.start.IsZero() {
			w.start = ts
		}
		w.end = ts
	}
	w.created = len(e2e.Lines(log, `msg="created runner Job"`))
	w.conflicts = len(e2e.Lines(log, "state changed under this pass"))
	return w
}

// TestCronJobAndManualPassesStartNoDuplicate installs the chart in its
// default mode (a CronJob that passes every minute) and, with six jobs
// queued, starts three manual passes with `kubectl create job
// --from=cronjob/...` just as the CronJob's own pass starts. All four passes
// succeed, and each Gitea job gets exactly one runner Job: six in all.
func TestCronJobAndManualPassesStartNoDuplicate(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 8*time.Minute)
	values := e2e.BaseValues()
	// Keep every pass for inspection: manual passes count against the
	// CronJob's history too.
	values["cronjob"] = map[string]any{"successfulJobsHistoryLimit": 10, "failedJobsHistoryLimit": 10}
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "cron", Max: 10, Values: values})
	ns, fx, group, label, dump := s.NS, s.Fx, s.Group, s.Label, s.Dump
	cronJob := s.Rel.Fullname()

	// The jobs must be queued between two ticks, with no pass running, so
	// that the first passes to see them are the racing ones.
	e2e.WaitUntil(ctx, t, 3*time.Minute, "a quiet moment well before a CronJob tick", dump, func(ctx context.Context) (bool, string, error) {
		cj, err := b.Kube.BatchV1().CronJobs(ns).Get(ctx, cronJob, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		passes, err := passJobs(b, ctx, ns, cronJob)
		if err != nil {
			return false, err.Error(), nil
		}
		now := time.Now()
		tick := now.Truncate(time.Minute)
		ticked := cj.CreationTimestamp.Time.After(tick) ||
			(cj.Status.LastScheduleTime != nil && !cj.Status.LastScheduleTime.Time.Before(tick))
		running := 0
		for i := range passes {
			if e2e.JobActive(&passes[i]) {
				running++
			}
		}
		state := fmt.Sprintf("now %s, lastSchedule %v, %d passes running", now.UTC().Format(time.RFC3339), cj.Status.LastScheduleTime, running)
		return ticked && running == 0 && now.Sub(tick) >= time.Second && tick.Add(time.Minute).Sub(now) >= 15*time.Second, state, nil
	})

	keys, wf := e2e.NumberedJobs("cron", 6, label)
	e2e.PushJobs(ctx, t, b, fx, "ci.yml", nil, wf...)
	jobs := b.Gitea.WaitJobs(ctx, t, fx.Repo, len(keys))
	for k, j := range jobs {
		require.Equal(t, "queued", j.Status, "Gitea job %s", k)
	}
	before, err := b.RunnerJobs(ctx, ns, group)
	require.NoError(t, err)
	require.Empty(t, before, "no pass should have run since the jobs were queued")

	// Start the manual passes just before the tick, so that their pods
	// start together with the scheduled pass's.
	tick := time.Now().Truncate(time.Minute).Add(time.Minute)
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(time.Until(tick.Add(-300 * time.Millisecond))):
	}
	var wg sync.WaitGroup
	manual := make([]string, 3)
	errs := make([]error, 3)
	for i := range manual {
		manual[i] = fmt.Sprintf("%s-m%d-%s", cronJob, i, e2e.RunSuffix)
		wg.Go(func() {
			out, err := exec.CommandContext(ctx, "kubectl", "--kubeconfig", b.Kubeconfig, "--namespace", ns,
				"create", "job", "--from=cronjob/"+cronJob, manual[i]).CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("kubectl create job %s: %v: %s", manual[i], err, out)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}

	// The scheduled pass of this tick and the three manual ones all succeed.
	var passes []batchv1.Job
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the scheduled pass and the manual ones succeeded", dump, func(ctx context.Context) (bool, string, error) {
		all, err := passJobs(b, ctx, ns, cronJob)
		if err != nil {
			return false, err.Error(), nil
		}
		passes = passes[:0]
		scheduled := 0
		var state []string
		done := true
		for _, j := range all {
			isManual := j.Annotations[manualAnnotation] == "manual"
			if !isManual && j.CreationTimestamp.Time.Before(tick.Add(-time.Second)) {
				continue // an earlier tick's pass
			}
			if !isManual {
				scheduled++
			}
			passes = append(passes, j)
			state = append(state, fmt.Sprintf("%s(manual=%v)=%s", j.Name, isManual, e2e.JobState(&j)))
			if e2e.JobCondition(&j, batchv1.JobFailed) {
				return false, "", fmt.Errorf("pass Job %s failed", j.Name)
			}
			if !e2e.JobCondition(&j, batchv1.JobComplete) {
				done = false
			}
		}
		if scheduled > 1 {
			return false, "", fmt.Errorf("the CronJob started %d passes for one tick: %v", scheduled, state)
		}
		return done && scheduled == 1 && len(passes) == 4, strings.Join(state, " "), nil
	})

	// Every Gitea job got exactly one runner Job, and it served the job.
	b.ExpectCompleted(ctx, t, ns, group, fx.Repo, e2e.IDsOf(jobs, keys...), dump)
	all, err := b.RunnerJobs(ctx, ns, group)
	require.NoError(t, err)
	require.Len(t, all, len(keys), "one runner Job per Gitea job: %v", e2e.JobNames(all))

	// What the passes did, from their logs: together they created exactly
	// one runner Job per Gitea job.
	created, overlaps := 0, 0
	var windows []passWindow
	for _, j := range passes {
		pod, err := passPod(b, ctx, ns, j.Name)
		require.NoError(t, err)
		w := parsePassLog(j.Name, b.PodLog(ns, pod.Name, "listener"))
		require.False(t, w.start.IsZero(), "no log of pass %s (pod %s)", j.Name, pod.Name)
		created += w.created
		windows = append(windows, w)
	}
	for i := range windows {
		for k := i + 1; k < len(windows); k++ {
			if windows[i].start.Before(windows[k].end) && windows[k].start.Before(windows[i].end) {
				overlaps++
			}
		}
		t.Logf("pass %s ran %s .. %s, created %d runner Job(s), lost the state race %d time(s)", windows[i].job,
			windows[i].start.Format("15:04:05.000"), windows[i].end.Format("15:04:05.000"), windows[i].created, windows[i].conflicts)
	}
	t.Logf("%d of %d pairs of passes ran at the same time", overlaps, len(windows)*(len(windows)-1)/2)
	require.NotZero(t, overlaps, "no two passes ran at the same time, so nothing raced")
	require.Equal(t, len(keys), created, "runner Jobs created by all passes together")
}

// TestListenerTemplateShapesTheRealPod installs the chart (CronJob mode)
// with a listenerTemplate that places the listener on pool b, changes its
// resources and adds a sidecar, and checks the pod of the scheduled pass that
// served a Gitea job: it ran on a pool-b node, with the merged resources and
// the sidecar, which ended with the pass.
func TestListenerTemplateShapesTheRealPod(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 8*time.Minute)
	const pool, sidecarImage = "b", "registry.e2e.invalid/tools/log-shipper:1.0"
	values := e2e.BaseValues()
	values["listenerTemplate"] = map[string]any{
		"metadata": map[string]any{
			"labels":      map[string]any{"e2e.gitea.bpg.pw/team": "platform"},
			"annotations": map[string]any{"e2e.gitea.bpg.pw/note": "placed by listenerTemplate"},
		},
		"spec": map[string]any{
			"nodeSelector": map[string]any{e2e.LabelPool: pool},
			"containers": []any{
				map[string]any{
					"name": "listener",
					"resources": map[string]any{
						"requests": map[string]any{"cpu": "20m"},
						"limits":   map[string]any{"memory": "96Mi"},
					},
				},
				map[string]any{
					"name":  "log-shipper",
					"image": sidecarImage,
					"resources": map[string]any{
						"requests": map[string]any{"cpu": "5m", "memory": "8Mi"},
						"limits":   map[string]any{"cpu": "10m", "memory": "16Mi"},
					},
				},
			},
		},
	}
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "template", Max: 2, Values: values})
	ns, rel, fx, group, label, dump := s.NS, s.Rel, s.Fx, s.Group, s.Label, s.Dump
	key := e2e.JobKey("tpl")
	e2e.PushJobs(ctx, t, b, fx, "ci.yml", nil, e2e.WfJob{Key: key, RunsOn: []string{label}})
	jobs := b.Gitea.WaitJobs(ctx, t, fx.Repo, 1)

	// The next tick's pass serves the job.
	b.ExpectCompleted(ctx, t, ns, group, fx.Repo, e2e.IDsOf(jobs, key), dump)

	// The pass that created the runner Job, and its pod.
	var pod *corev1.Pod
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the pass that created the runner Job finished", dump, func(ctx context.Context) (bool, string, error) {
		passes, err := passJobs(b, ctx, ns, rel.Fullname())
		if err != nil {
			return false, err.Error(), nil
		}
		var state []string
		for _, j := range passes {
			p, err := passPod(b, ctx, ns, j.Name)
			if err != nil {
				state = append(state, err.Error())
				continue
			}
			log := b.PodLog(ns, p.Name, "listener")
			state = append(state, fmt.Sprintf("%s=%s/%s", j.Name, e2e.JobState(&j), p.Status.Phase))
			if len(e2e.Lines(log, `msg="created runner Job"`, "runnergroup="+ns+"/"+group)) == 0 {
				continue
			}
			if e2e.JobCondition(&j, batchv1.JobFailed) {
				return false, "", fmt.Errorf("pass %s created the runner Job, then failed", j.Name)
			}
			pod = p
			return e2e.JobCondition(&j, batchv1.JobComplete) && p.Status.Phase == corev1.PodSucceeded, strings.Join(state, " "), nil
		}
		return false, strings.Join(state, " "), nil
	})
	require.Empty(t, pod.Annotations[manualAnnotation])

	// Placement: the selector is merged over the default, and the scheduler
	// put the pod on a node of that pool.
	require.Equal(t, map[string]string{"kubernetes.io/os": "linux", e2e.LabelPool: pool}, pod.Spec.NodeSelector)
	require.NotEmpty(t, pod.Spec.NodeName)
	node, err := b.Kube.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, pool, node.Labels[e2e.LabelPool], "pod %s ran on node %s", pod.Name, node.Name)

	// Metadata: added, the chart's own labels kept.
	require.Equal(t, "platform", pod.Labels["e2e.gitea.bpg.pw/team"])
	require.Equal(t, "placed by listenerTemplate", pod.Annotations["e2e.gitea.bpg.pw/note"])
	require.Equal(t, "default", pod.Labels[e2e.LabelListener])

	// Resources: merged key by key over the defaults.
	require.Len(t, pod.Spec.Containers, 2)
	listener, sidecar := pod.Spec.Containers[0], pod.Spec.Containers[1]
	require.Equal(t, "listener", listener.Name)
	wantRes := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("96Mi")},
	}
	e2e.RequireResources(t, wantRes, listener.Resources)
	require.NotNil(t, listener.SecurityContext)
	require.Equal(t, true, *listener.SecurityContext.RunAsNonRoot)
	require.Equal(t, true, *listener.SecurityContext.ReadOnlyRootFilesystem)

	// The sidecar: added after the listener, unchanged, and it ran and
	// ended with the pass.
	require.Equal(t, "log-shipper", sidecar.Name)
	require.Equal(t, sidecarImage, sidecar.Image)
	e2e.RequireResources(t, corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m"), corev1.ResourceMemory: resource.MustParse("8Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
	}, sidecar.Resources)
	states := map[string]corev1.ContainerState{}
	for _, cs := range pod.Status.ContainerStatuses {
		states[cs.Name] = cs.State
	}
	for _, name := range []string{"listener", "log-shipper"} {
		st := states[name]
		require.NotNil(t, st.Terminated, "container %s of %s: %+v", name, pod.Name, st)
		require.Zero(t, st.Terminated.ExitCode, "container %s of %s", name, pod.Name)
	}
}

// TestAdditionalListenerServesOnlyItsGroups installs the chart with an
// additional listener "gpu" whose selector takes the RunnerGroups labelled
// pool=gpu. Both listeners run (as Deployments) and both groups get their
// jobs served; the listeners' logs show that each group was served by its
// own listener only, pass after pass.
func TestAdditionalListenerServesOnlyItsGroups(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 8*time.Minute)
	const poolKey = "e2e.gitea.bpg.pw/pool"
	values := e2e.DeploymentValues()
	values["listeners"] = []any{map[string]any{
		"name":     "gpu",
		"selector": map[string]any{"matchLabels": map[string]any{poolKey: "gpu"}},
	}}
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "listeners", Group: "rg-std", Max: 2, Values: values})
	ns, rel, fx := s.NS, s.Rel, s.Fx

	// A second group for the gpu listener: its own repository and label,
	// the first group's tokens.
	gpuRepo := b.Gitea.CreateOrgRepo(ctx, t, fx.Spec.Org, "cuda")
	gpuLabel := e2e.Uniq("e2e-rg-gpu")
	b.CreateGroup(ctx, t, ns, "rg-gpu", map[string]string{poolKey: "gpu"}, b.GroupSpec(fx, e2e.GroupSecret(s.Group), 2, gpuLabel))
	groups := []struct {
		name   string
		label  string
		repo   giteasetup.Repo
		serves string
	}{
		{name: s.Group, label: s.Label, repo: fx.Repo, serves: "default"},
		{name: "rg-gpu", label: gpuLabel, repo: gpuRepo, serves: "gpu"},
	}
	dump := func() string { return b.DumpNamespaces(ns) + b.Gitea.JobsLine(fx.Repo, gpuRepo) }
	ids := map[string]map[string]int64{}
	for _, g := range groups {
		key := e2e.JobKey(g.name)
		b.Gitea.PushWorkflow(ctx, t, fx.PushAs, g.repo, "ci.yml", e2e.Workflow(e2e.WfJob{Key: key, RunsOn: []string{g.label}}))
		ids[g.name] = e2e.IDsOf(b.Gitea.WaitJobs(ctx, t, g.repo, 1), key)
	}
	for _, g := range groups {
		b.ExpectCompleted(ctx, t, ns, g.name, g.repo, ids[g.name], dump)
	}
	// A few more passes, so that a listener serving the wrong group would
	// have had every chance to show in its log.
	for _, g := range groups {
		b.WaitPasses(ctx, t, ns, g.name, 2, dump, nil)
	}

	logs := map[string]string{}
	for _, listener := range []string{"default", "gpu"} {
		pods, err := b.ListenerPods(ctx, rel, listener)
		require.NoError(t, err)
		require.NotEmpty(t, pods, "pods of listener %s", listener)
		for _, p := range pods {
			logs[listener] += b.PodLog(ns, p.Name, "listener")
		}
	}
	for _, g := range groups {
		mention := regexp.MustCompile(`runnergroup=` + regexp.QuoteMeta(ns+"/"+g.name) + `(\s|$)`)
		for listener, log := range logs {
			n := len(mention.FindAllString(log, -1))
			if listener == g.serves {
				require.NotZero(t, n, "listener %s never served its group %s:\n%s", listener, g.name, e2e.Tail(log, 20))
				created := e2e.Lines(log, `msg="created runner Job"`, "runnergroup="+ns+"/"+g.name+" ")
				require.Len(t, created, 1, "listener %s created the runner Job of %s", listener, g.name)
				t.Logf("listener %s served %s (%d log lines): %s", listener, g.name, n, created[0])
			} else {
				require.Zero(t, n, "listener %s served %s, which belongs to listener %s:\n%s", listener, g.name, g.serves, strings.Join(mention.FindAllString(log, 5), "\n"))
			}
		}
	}
}
