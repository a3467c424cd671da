//go:build e2e

// Runner pods on the real node with Gitea's runner image (the flavours
// scripts/testbed builds from Debian's packages and pushes to the bed's
// registry) started by containerd: the pod's own Docker daemon runs the
// job's steps in a container of the job image, which it pulls from the
// bed's registry as a user's daemon would from theirs.

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// registryHost is the job image's registry: the in-pod Docker daemon must
// list it in insecure-registries, as it speaks plain HTTP.
func registryHost(im e2e.RunnerImages) string { return im.Job[:strings.Index(im.Job, "/")] }

// Where each flavour's Docker daemon reads its daemon.json.
const (
	rootlessDaemonJSON = "/home/rootless/.config/docker/daemon.json"
	rootDaemonJSON     = "/etc/docker/daemon.json"
)

// dockerDaemonConfig is the ConfigMap a user mounts at the daemon's
// daemon.json, here to let it pull from the bed's plain-HTTP registry.
func dockerDaemonConfig(b *e2e.Testbed, ctx context.Context, t *testing.T, ns string, im e2e.RunnerImages) string {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"insecure-registries": []string{registryHost(im)}})
	require.NoError(t, err)
	const name = "docker-daemon"
	_, err = b.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Data:       map[string]string{"daemon.json": string(raw)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return name
}

// runnerTemplate places a group's runner pods on the real node with the
// image, its daemon.json from the ConfigMap at daemonJSON.
func (n realNode) runnerTemplate(image, configMap, daemonJSON string) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		NodeSelector: map[string]string{n.label: "true"},
		Tolerations:  []corev1.Toleration{{Key: n.label, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Containers: []corev1.Container{{
			Name:            runnerjob.ContainerName,
			Image:           image,
			ImagePullPolicy: corev1.PullAlways, // the bed re-pushes tags over a node that keeps its images
			VolumeMounts:    []corev1.VolumeMount{{Name: "docker-daemon", MountPath: daemonJSON, SubPath: "daemon.json", ReadOnly: true}},
		}},
		Volumes: []corev1.Volume{{Name: "docker-daemon", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}},
		}}},
	}}
}

// jsAction is a JavaScript action: it greets its input with node's
// version, as an output the workflow checks.
var jsAction = map[string]string{
	"action.yml": "name: greet\ninputs:\n  who:\n    required: true\noutputs:\n  greeting:\n    description: the greeting\nruns:\n  using: node20\n  main: index.js\n",
	"index.js": "const fs = require('fs');\n" +
		"fs.appendFileSync(process.env.GITHUB_OUTPUT, `greeting=hello ${process.env.INPUT_WHO} from node ${process.version}\\n`);\n",
}

// containerWorkflow's job runs in a container of the job image whose
// workflow asks the pod's Docker daemon for the node's reach
// (escapeOptions): a run: step proves it is inside a Docker container of
// the Debian job image and that the runner dropped those options (no
// CAP_SYS_ADMIN, bit 21 of CapEff; no Docker daemon among the processes it
// sees), then the JavaScript action from actionURL, whose output the last
// step checks.
func containerWorkflow(key, label, image, actionURL string) string {
	return fmt.Sprintf(`name: realnode
on: [push]
jobs:
  %s:
    runs-on: [%s]
    container:
      image: %s
      options: %s
    steps:
      - run: test -f /.dockerenv && grep -q bookworm /etc/os-release && echo "in a container of the job image"
      - run: |
          eff=$(awk '/^CapEff/ {print $2}' /proc/self/status)
          test $(( 0x$eff >> 21 & 1 )) = 0 && echo "no CAP_SYS_ADMIN"
          ! grep -qsx dockerd /proc/[0-9]*/comm && echo "the pod's Docker daemon is out of sight"
      - id: greet
        uses: %s@main
        with:
          who: e2e
      - run: case "${{ steps.greet.outputs.greeting }}" in "hello e2e from node v"*) echo ok ;; *) exit 1 ;; esac
`, key, label, image, escapeOptions, actionURL)
}

// escapeOptions are a workflow's container options that would give its
// job container the pod's processes, a capability that mounts file systems,
// and no seccomp filter. With container.privileged false (the rendered
// runner config's default), gitea-runner 3.1 drops each with a warning;
// 1.0.8 drops only --privileged (runner-pods.md, "What a job may ask of
// the pod's Docker daemon").
const escapeOptions = "--pid=host --cap-add=SYS_ADMIN --security-opt=seccomp=unconfined"

// runnerScene is a group whose one runner pod runs on the real node with
// a flavour of Gitea's runner image and a `docker://` label for the job
// image, and an action repository beside the workflow's.
type runnerScene struct {
	b                *e2e.Testbed
	ns, group, label string
	fx               e2e.ScopeFixture
	action           giteasetup.Repo
	dump             func() string
}

// flavour is an image tag suffix and where its daemon reads daemon.json.
type flavour struct{ suffix, daemonJSON string }

var dindRootless = flavour{"-dind-rootless", rootlessDaemonJSON}

// newRunnerScene makes the scene; edits change the group's spec before it
// is created (one runner at most unless an edit says otherwise).
func newRunnerScene(b *e2e.Testbed, ctx context.Context, t *testing.T, n realNode, im e2e.RunnerImages, name, version string, f flavour, edits ...func(*v1alpha1.RunnerGroupSpec)) runnerScene {
	t.Helper()
	s := runnerScene{b: b, group: "rg-" + name, label: "realnode-docker"}
	s.ns = b.Namespace(ctx, t, "e2e-"+name, nil)
	s.fx = b.NewOrgScope(ctx, t, e2e.Uniq("e2e-"+name))
	s.action = b.Gitea.CreateOrgRepo(ctx, t, s.fx.Spec.Org, "greet")
	for file, content := range jsAction {
		e2e.MustGitea(t, s.fx.PushAs.PushFile(ctx, s.action, file, []byte(content)), "push %s to %s", file, s.action)
	}
	b.TokenSecret(ctx, t, s.ns, e2e.GroupSecret(s.group), s.fx.RegToken, s.fx.APIToken)
	spec := b.GroupSpec(s.fx, e2e.GroupSecret(s.group), 1, s.label+":docker://"+im.Job)
	spec.DefaultLabels = ptr.To(false)
	spec.Gitea.URL = n.giteaURL
	cm := dockerDaemonConfig(b, ctx, t, s.ns, im)
	spec.Template = n.runnerTemplate(im.Repo+":"+version+f.suffix, cm, f.daemonJSON)
	for _, edit := range edits {
		edit(&spec)
	}
	b.CreateGroup(ctx, t, s.ns, s.group, nil, spec)
	s.dump = func() string { return b.DumpNamespaces(s.ns) + s.podLogs() + b.Gitea.JobsLine(s.fx.Repo) }
	return s
}

// runnerPod runs passes until one created the group's runner Job, and
// returns the runner's name and the Job's pod once the runner registered
// with Gitea; it logs how long that took from the Job's creation: a cold start
// on the real node (the image pulled if the node lacks it, the pod's Docker
// daemon started, then the runner).
func (s runnerScene) runnerPod(ctx context.Context, t *testing.T) (runner string, pod corev1.Pod) {
	t.Helper()
	var start coldStart
	runnerJob := s.passUntilRunnerJobs(ctx, t, e2e.PassOpts{Namespaces: []string{s.ns}}, 1)[0]
	runner = runnerjob.RunnerNameOf(&runnerJob)
	created := runnerJob.CreationTimestamp.Time
	e2e.WaitEvery(ctx, t, time.Second, 5*time.Minute, "runner "+runner+"'s pod running and the runner registered", s.dump, func(ctx context.Context) (bool, string, error) {
		if start.running == 0 {
			pods, err := s.b.JobPods(ctx, s.ns, runnerJob.Name)
			if err != nil || len(pods) != 1 {
				return false, fmt.Sprintf("%d pods, %v", len(pods), err), nil
			}
			if pod = pods[0]; pod.Status.Phase != corev1.PodRunning {
				return false, string(pod.Status.Phase), nil
			}
			start.running = time.Since(created)
		}
		if _, ok := s.b.OrgRunners(ctx, t, s.fx.Spec.Org)[runner]; !ok {
			return false, "pod running, runner " + runner + " not registered yet", nil
		}
		start.registered = time.Since(created)
		return true, "", nil
	})
	t.Logf("cold start of runner pod %s on the real node: Job created -> pod running %s -> runner registered %s",
		pod.Name, start.running.Round(time.Second), start.registered.Round(time.Second))
	return runner, pod
}

// passUntilRunnerJobs runs passes with opts until the group has n runner
// Jobs, and returns them.
func (s runnerScene) passUntilRunnerJobs(ctx context.Context, t *testing.T, opts e2e.PassOpts, n int) []batchv1.Job {
	t.Helper()
	var jobs []batchv1.Job
	e2e.WaitUntil(ctx, t, e2e.StepWait, fmt.Sprintf("passes created %d runner Jobs of the group", n), s.dump, func(ctx context.Context) (bool, string, error) {
		r := s.b.Pass(ctx, t, opts)
		e2e.RequireSanePass(t, r, "pass")
		var err error
		jobs, err = s.b.RunnerJobs(ctx, s.ns, s.group)
		if err != nil || len(jobs) < n {
			return false, fmt.Sprintf("%d runner Jobs, %v; the pass's last lines:\n%s", len(jobs), err, e2e.Tail(r.Log, 8)), nil
		}
		return true, "", nil
	})
	return jobs
}

// enforce labels the scene's namespace to enforce Pod Security level.
func (s runnerScene) enforce(ctx context.Context, t *testing.T, level string) {
	t.Helper()
	nsObj, err := s.b.Kube.CoreV1().Namespaces().Get(ctx, s.ns, metav1.GetOptions{})
	require.NoError(t, err)
	nsObj.Labels[tenancy.LabelEnforce] = level
	_, err = s.b.Kube.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// coldStart is a runner pod's start, from its Job's creation (which the
// API server stamps in whole seconds).
type coldStart struct{ running, registered time.Duration }

// onlyJob is the scene's one Gitea job.
func (s runnerScene) onlyJob(ctx context.Context) (giteasetup.Job, string, bool) {
	jobs, err := s.b.Gitea.RepoJobs(ctx, s.fx.Repo)
	if err != nil || len(jobs) != 1 {
		return giteasetup.Job{}, fmt.Sprintf("%d jobs, %v", len(jobs), err), false
	}
	return jobs[0], jobs[0].State(), true
}

// jobLog is a job's log as Gitea stores what its runner reported.
func (s runnerScene) jobLog(ctx context.Context, id int64) (string, error) {
	g := s.b.Gitea
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/api/v1/repos/%s/actions/jobs/%d/logs", g.Admin.URL(), s.fx.Repo, id), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "token "+g.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET job %d's log: %s", id, resp.Status)
	}
	return string(body), err
}

// podLogs are the last lines of every runner pod's log in the namespace:
// the real node's pods have logs the API server serves.
func (s runnerScene) podLogs() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := s.b.Kube.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error() + "\n"
	}
	var sb strings.Builder
	for _, p := range pods.Items {
		raw, err := s.b.Kube.CoreV1().Pods(s.ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: runnerjob.ContainerName, TailLines: ptr.To(int64(40))}).DoRaw(ctx)
		fmt.Fprintf(&sb, "---- log of %s/%s (%v)\n%s\n", s.ns, p.Name, err, raw)
	}
	return sb.String()
}

// TestRealNodeRunnerRunsContainerJobs serves a group whose runner pods run
// on the real node with the dind-rootless image from the bed's registry and
// a `docker://` label for the job image: the pod's s6 starts the rootless
// Docker daemon and then the runner, whose job runs a run: step and a
// JavaScript action from the bed's Gitea in a container that daemon pulled
// and started, without the options the workflow asked for to reach the
// pod (escapeOptions). The job succeeds, the pod's container is
// containerd's, and once the runner is done its registration is gone.
func TestRealNodeRunnerRunsContainerJobs(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	n := readRealNode(b, t)
	im := b.RunnerImages(t)
	ctx := e2e.TestContext(t, 12*time.Minute)
	s := newRunnerScene(b, ctx, t, n, im, "realrunner", "3.1.0", dindRootless)

	key := e2e.JobKey("container")
	b.Gitea.PushWorkflow(ctx, t, s.fx.PushAs, s.fx.Repo, "container.yml", containerWorkflow(key, s.label, im.Job, n.giteaURL+"/"+s.action.String()))
	b.Gitea.WaitJobs(ctx, t, s.fx.Repo, 1)
	runner, pod := s.runnerPod(ctx, t)
	ok, why := n.containersStarted(&pod)
	require.True(t, ok, "the runner pod's container is the node's runtime's: %s", why)

	// The daemon pulls the job image on a cold pod.
	e2e.WaitUntil(ctx, t, 5*time.Minute, "job "+key+" succeeded in a container on "+n.name, s.dump, func(ctx context.Context) (bool, string, error) {
		j, st, ok := s.onlyJob(ctx)
		if !ok || !strings.HasPrefix(st, "completed/") {
			return false, st, nil
		}
		require.Equal(t, "completed/success", st, "the job's conclusion\n%s", e2e.Redact(s.dump()))
		require.Equal(t, runner, j.RunnerName, "the group's runner ran it")
		log, err := s.jobLog(ctx, j.ID)
		require.NoError(t, err)
		for _, opt := range []string{"--pid", "--cap-add", "--security-opt"} {
			require.Contains(t, log, fmt.Sprintf("container option %q is not allowed when privileged mode is disabled", opt), "the runner says it dropped %s", opt)
		}
		t.Logf("job %s on a cold runner pod (a pass at once): queued -> in_progress %s, in_progress -> completed %s (Gitea's times)",
			key, j.StartedAt.Sub(j.CreatedAt), j.CompletedAt.Sub(j.StartedAt))
		return true, "", nil
	})

	e2e.WaitUntil(ctx, t, e2e.StepWait, "runner "+runner+"'s pod ended and its registration is gone", s.dump, func(ctx context.Context) (bool, string, error) {
		p, err := b.Kube.CoreV1().Pods(s.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if p.Status.Phase != corev1.PodSucceeded {
			return false, fmt.Sprintf("pod %s: %s", p.Name, p.Status.Phase), nil
		}
		if _, ok := b.OrgRunners(ctx, t, s.fx.Spec.Org)[runner]; ok {
			return false, "runner " + runner + " is still registered", nil
		}
		return true, "", nil
	})
}
