//go:build e2e

// Issue 39 on the real node: the UserNamespaced flavour's runner pod (no
// privilege, a user namespace of its own) in a namespace enforcing Pod
// Security baseline runs container jobs with a service container and a
// docker build, and a job that tries to reach past the pod gets nothing.

package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// usernsFlags set the UserNamespaced flavour up for a pass, as the chart's
// userNamespacedRunners does: the bed's userns image, its tun device
// plugin's resource and the profile scripts/testbed installs on the node;
// and the API server's gate, when the bed runs with it, as
// scaler.userNamespacesPodSecurityStandards says it.
func usernsFlags(b *e2e.Testbed, ctx context.Context, t *testing.T, n realNode, im e2e.RunnerImages) []string {
	t.Helper()
	args := []string{
		"--user-namespaced-runner-image", im.Repo + ":3.1.0-dind-rootless-userns",
		"--user-namespaced-tun-resource", n.tunResource,
		"--user-namespaced-seccomp-profile", n.seccompProfile,
	}
	if b.PodSecurityPlatform(ctx, t).UserNamespacesPodSecurityStandards {
		args = append(args, "--user-namespaces-pod-security-standards")
	}
	return args
}

// requireUserNamespaces fails unless the real node can run pods with
// hostUsers: false (containerd 2 and runc 1.2 or newer: the runtime says
// so in the node's status) and the API server admits them at baseline.
func requireUserNamespaces(b *e2e.Testbed, ctx context.Context, t *testing.T, n realNode) {
	t.Helper()
	node, err := b.Kube.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	require.NoError(t, err)
	supported := false
	for _, h := range node.Status.RuntimeHandlers {
		if h.Name == "" && h.Features != nil && ptr.Deref(h.Features.UserNamespaces, false) {
			supported = true
		}
	}
	require.True(t, supported, "the real node's runtime supports user namespaces (start the bed with TESTBED_NODE_RUNTIME=containerd2, as make test does); its handlers: %+v", node.Status.RuntimeHandlers)
	require.NotEmpty(t, n.tunResource, "node.env names the tun device plugin's resource")
	require.NotZero(t, node.Status.Allocatable.Name(corev1.ResourceName(n.tunResource), "").Value(), "the node offers %s", n.tunResource)
}

// usernsWorkflow has three jobs for the group's three runners. label runs
// in a container of its docker:// label's image. serve runs in a
// container of the job image beside a service container of the same image
// serving HTTP, which it reaches by name on the job's Docker network, and
// tries what a job should not get: a kernel module loaded (finit_module,
// EPERM without CAP_SYS_MODULE over the node), a block device made, the
// node's container runtime socket. build runs on the runner pod itself
// (a :host label) and builds an image with the pod's Docker daemon, runs
// it, and tries again from a container that asks the daemon for
// everything: the node's root mounted (it gets the pod's), every
// capability and no seccomp filter (still no module), a privileged
// container (refused: the daemon has no privilege to give).
func usernsWorkflow(labelKey, serveKey, buildKey, dockerLabel, hostLabel, jobImage, runtimeSocket string) string {
	module := `perl -e 'my $args = ""; syscall(313, -1, $args, 0); exit($!{EPERM} ? 0 : 1)' && echo "no kernel module: EPERM"`
	return fmt.Sprintf(`name: userns
on: [push]
jobs:
  %[8]s:
    runs-on: [%[3]s]
    steps:
      - run: test -f /.dockerenv && grep -q bookworm /etc/os-release && echo "in a container of the label's image"
  %[1]s:
    runs-on: [%[3]s]
    container:
      image: %[5]s
    services:
      web:
        image: %[5]s
        cmd: ["node", "-e", "require('http').createServer((q, r) => r.end('service ok')).listen(8080)"]
    steps:
      - run: test -f /.dockerenv && grep -q bookworm /etc/os-release && echo "in a container of the job image"
      - run: |
          for i in $(seq 30); do
            out=$(node -e "require('http').get('http://web:8080/', r => { let d = ''; r.on('data', c => d += c); r.on('end', () => console.log(d)); }).on('error', () => process.exit(1))") && break
            sleep 1
          done
          test "$out" = "service ok" && echo "the service container answered: $out"
      - run: |
          %[7]s
      - run: '! mknod /tmp/disk b 8 0 2>/dev/null && echo "no block device"'
      - run: test ! -e %[6]s && echo "no runtime socket"
  %[2]s:
    runs-on: [%[4]s]
    steps:
      - run: |
          set -e
          mkdir -p /tmp/ctx && cd /tmp/ctx
          printf 'FROM %[5]s\nRUN echo built in a user namespace > /built\n' > Dockerfile
          docker build -q -t e2e-built .
          test "$(docker run --rm e2e-built cat /built)" = "built in a user namespace" && echo "docker build ran"
      - run: |
          cat > /tmp/escape.sh <<'EOF'
          set -e
          test ! -e /host%[6]s && echo "the node root is not there: /host is the pod"
          %[7]s
          EOF
          docker run --rm -v /:/host -v /tmp/escape.sh:/escape.sh:ro --cap-add ALL --security-opt seccomp=unconfined %[5]s sh /escape.sh
      - run: '! docker run --rm --privileged %[5]s true 2>/dev/null && echo "no privileged container"'
`, serveKey, buildKey, dockerLabel, hostLabel, jobImage, runtimeSocket, module, labelKey)
}

// TestRealNodeUserNamespacedRunnerRunsContainerJobsAtBaseline is issue 39's
// proof: a group with spec.flavour left to Auto, in a namespace that
// enforces baseline, gets the UserNamespaced flavour's pod from the pass
// (hostUsers false, not privileged, the device plugin's /dev/net/tun, the
// Localhost seccomp profile), which the API server admits and the real
// node runs; its rootless Docker daemon runs a job in its docker://
// label's image, a container job with a service container, a docker
// build, and refuses every escape the workflow tries.
func TestRealNodeUserNamespacedRunnerRunsContainerJobsAtBaseline(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	n := readRealNode(b, t)
	ctx := e2e.TestContext(t, 12*time.Minute)
	requireUserNamespaces(b, ctx, t, n)
	im := b.RunnerImages(t)

	hostLabel := "realnode-pod:host"
	s := newRunnerScene(b, ctx, t, n, im, "userns", "3.1.0", dindRootless, func(spec *v1alpha1.RunnerGroupSpec) {
		spec.MaxActiveRunners = 3
		spec.Labels = append(spec.Labels, hostLabel)
		// The flavour's image, not the template's.
		spec.Template.Spec.Containers[0].Image = ""
	})
	s.enforce(ctx, t, "baseline")

	labelKey, serveKey, buildKey := e2e.JobKey("label"), e2e.JobKey("serve"), e2e.JobKey("build")
	b.Gitea.PushWorkflow(ctx, t, s.fx.PushAs, s.fx.Repo, "userns.yml", usernsWorkflow(labelKey, serveKey, buildKey, s.label, strings.TrimSuffix(hostLabel, ":host"), im.Job, n.runtimeSocket))
	b.Gitea.WaitJobs(ctx, t, s.fx.Repo, 3)

	opts := e2e.PassOpts{Namespaces: []string{s.ns}, Args: usernsFlags(b, ctx, t, n, im)}
	jobs := s.passUntilRunnerJobs(ctx, t, opts, 3)
	rg, ready := b.ReadyOf(ctx, t, s.ns, s.group)
	require.Equal(t, v1alpha1.ReasonReconciled, ready.Reason, e2e.StatusLine(rg))

	for _, j := range jobs {
		spec := j.Spec.Template.Spec
		require.Equal(t, ptr.To(false), spec.HostUsers, "Job %s: the UserNamespaced flavour", j.Name)
		c := spec.Containers[0]
		assert.Nil(t, c.SecurityContext.Privileged, "Job %s: no privilege", j.Name)
		assert.Equal(t, im.Repo+":3.1.0-dind-rootless-userns", c.Image, "Job %s: the flavour's image", j.Name)
		assert.Equal(t, int64(1), c.Resources.Limits.Name(corev1.ResourceName(n.tunResource), "").Value(), "Job %s: /dev/net/tun", j.Name)
	}

	// Passes go on (the runners' lifecycle) while the jobs run; the daemon
	// pulls the job image on a cold pod.
	e2e.WaitEvery(ctx, t, 5*time.Second, 8*time.Minute, "the three jobs succeeded on "+n.name, s.dump, func(ctx context.Context) (bool, string, error) {
		b.Pass(ctx, t, opts)
		all, err := b.Gitea.RepoJobs(ctx, s.fx.Repo)
		if err != nil {
			return false, err.Error(), nil
		}
		done := 0
		for _, j := range all {
			st := j.State()
			if !strings.HasPrefix(st, "completed/") {
				continue
			}
			log, lerr := s.jobLog(ctx, j.ID)
			require.Equal(t, "completed/success", st, "job %s's conclusion; its log:\n%s\n%v", j.Name, e2e.Tail(log, 40), lerr)
			done++
		}
		return done == 3, e2e.DescribeGiteaJobs(all), nil
	})

	all, err := b.Gitea.RepoJobs(ctx, s.fx.Repo)
	require.NoError(t, err)
	for _, j := range all {
		log, err := s.jobLog(ctx, j.ID)
		require.NoError(t, err)
		var want []string
		switch j.Name {
		case labelKey:
			want = []string{"in a container of the label's image"}
		case serveKey:
			want = []string{"in a container of the job image", "the service container answered: service ok", "no kernel module: EPERM", "no block device", "no runtime socket"}
		case buildKey:
			want = []string{"docker build ran", "the node root is not there: /host is the pod", "no kernel module: EPERM", "no privileged container"}
		}
		for _, w := range want {
			assert.Contains(t, log, w, "job %s's log", j.Name)
		}
		t.Logf("job %s: queued -> in_progress %s, in_progress -> completed %s (Gitea's times)", j.Name, j.StartedAt.Sub(j.CreatedAt), j.CompletedAt.Sub(j.StartedAt))
	}
}

// TestRealNodeHostRunnerRunsJobsAtRestricted: a group of spec.flavour Host
// in a namespace enforcing restricted gets the runner alone from Gitea's
// dind-rootless image (its run.sh, as uid 1000, no Docker daemon); the
// real node runs it, and a job on its default label (a host label now)
// runs on the pod as that user and finds no Docker daemon.
func TestRealNodeHostRunnerRunsJobsAtRestricted(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	n := readRealNode(b, t)
	ctx := e2e.TestContext(t, 8*time.Minute)
	im := b.RunnerImages(t)
	s := newRunnerScene(b, ctx, t, n, im, "hostflavour", "3.1.0", dindRootless, func(spec *v1alpha1.RunnerGroupSpec) {
		spec.Flavour = v1alpha1.FlavourHost
		spec.Labels = []string{"realnode-host"}
		// Nothing for a Docker daemon: no daemon.json.
		spec.Template.Spec.Containers[0].VolumeMounts = nil
		spec.Template.Spec.Volumes = nil
	})
	s.enforce(ctx, t, "restricted")

	key := e2e.JobKey("host")
	b.Gitea.PushWorkflow(ctx, t, s.fx.PushAs, s.fx.Repo, "host.yml", fmt.Sprintf(`name: host
on: [push]
jobs:
  %s:
    runs-on: [realnode-host]
    steps:
      - run: test "$(id -u)" = 1000 && echo "on the pod as uid 1000"
      - run: test ! -e /run/user/1000/docker.sock && ! grep -qsx dockerd /proc/[0-9]*/comm && echo "no Docker daemon"
`, key))
	b.Gitea.WaitJobs(ctx, t, s.fx.Repo, 1)
	// The runner pod may start, run the job and end between two looks:
	// its Job's pod template is what is checked.
	spec := s.passUntilRunnerJobs(ctx, t, e2e.PassOpts{Namespaces: []string{s.ns}}, 1)[0].Spec.Template.Spec
	require.NotNil(t, spec.SecurityContext)
	require.Equal(t, ptr.To[int64](1000), spec.SecurityContext.RunAsUser, "the Host flavour's pod")

	e2e.WaitUntil(ctx, t, 3*time.Minute, "job "+key+" succeeded on the runner pod", s.dump, func(ctx context.Context) (bool, string, error) {
		j, st, ok := s.onlyJob(ctx)
		if !ok || !strings.HasPrefix(st, "completed/") {
			return false, st, nil
		}
		log, err := s.jobLog(ctx, j.ID)
		require.NoError(t, err)
		require.Equal(t, "completed/success", st, "the job's log:\n%s", e2e.Tail(log, 30))
		for _, want := range []string{"on the pod as uid 1000", "no Docker daemon"} {
			assert.Contains(t, log, want)
		}
		return true, "", nil
	})
}
