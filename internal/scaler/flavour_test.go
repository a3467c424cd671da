package scaler

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// usernsSetUp is the platform's setup of the UserNamespaced flavour.
var usernsSetUp = runnerjob.UserNamespacedPod{
	Image:          "registry.example.com/runner:3.1.0-dind-rootless-userns",
	SeccompProfile: "rootless-dind.json",
	TunResource:    "squat.ai/tun",
}

func withFlavour(f v1alpha1.RunnerFlavour) func(*v1alpha1.RunnerGroup) {
	return func(rg *v1alpha1.RunnerGroup) { rg.Spec.Flavour = f }
}

// assertUserNamespacedPod checks the pod of the UserNamespaced flavour:
// the smallest change to the privileged pod under which the rootless
// daemon runs job containers (runnerjob.userNamespaced).
func assertUserNamespacedPod(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	assert.Equal(t, ptr.To(false), spec.HostUsers, "a user namespace of its own")
	c := spec.Containers[0]
	assert.Equal(t, usernsSetUp.Image, c.Image)
	require.NotNil(t, c.SecurityContext)
	assert.Nil(t, c.SecurityContext.Privileged, "no privilege")
	assert.Equal(t, ptr.To(corev1.UnmaskedProcMount), c.SecurityContext.ProcMount)
	assert.Equal(t, &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("rootless-dind.json")}, c.SecurityContext.SeccompProfile)
	assert.Equal(t, resource.MustParse("1"), c.Resources.Limits[usernsSetUp.TunResource], "/dev/net/tun from the device plugin")
	assert.Equal(t, resource.MustParse("1"), c.Resources.Requests[usernsSetUp.TunResource])
}

// assertHostPod checks the Host flavour's pod: the image's runner alone,
// as uid 1000, nothing a Docker daemon needs, host labels only.
func assertHostPod(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	require.NotNil(t, spec.SecurityContext)
	assert.Equal(t, ptr.To[int64](1000), spec.SecurityContext.RunAsUser)
	assert.Equal(t, ptr.To(true), spec.SecurityContext.RunAsNonRoot)
	c := spec.Containers[0]
	assert.Equal(t, runnerjob.DefaultImage, c.Image, "the same image")
	assert.Equal(t, []string{runnerjob.HostRunScript}, c.Command, "its runner alone, without s6 and the daemon")
	assert.Equal(t, ptr.To(false), c.SecurityContext.AllowPrivilegeEscalation)
	assert.Nil(t, c.SecurityContext.Privileged)
	assert.Nil(t, c.Lifecycle, "no s6 service to stop first")
	for _, v := range spec.Volumes {
		assert.NotEqual(t, runnerjob.DockerDataVolume, v.Name, "no Docker data")
	}
	for _, e := range c.Env {
		if e.Name == "GITEA_RUNNER_LABELS" {
			for _, l := range strings.Split(e.Value, ",") {
				assert.False(t, v1alpha1.IsDockerLabel(l), "label %s is a host label", l)
			}
			assert.Contains(t, e.Value, "ubuntu-latest:host", "the default label, on the host")
		}
	}
}

// TestTheFlavourIsTheOneTheNamespaceAdmits is issue 39's flavour per
// group through a pass: Auto keeps the privileged pod where the namespace
// admits it and takes the user-namespaced one elsewhere when the platform
// set it up and the API server's Pod Security admits it; an asked flavour
// is never swapped for another; each refusal says what would fix it.
func TestTheFlavourIsTheOneTheNamespaceAdmits(t *testing.T) {
	tests := []struct {
		name    string
		level   string
		flavour v1alpha1.RunnerFlavour
		setUp   bool
		server  string // the API server's minor version
		config  *v1alpha1.RunnerConfig
		dflt    v1alpha1.RunnerFlavour // the platform's default
		pinned  bool
		reason  string
		want    v1alpha1.RunnerFlavour // the Job's, when one is made
		says    []string               // in the refusal
	}{
		{name: "Auto in a privileged namespace keeps the privileged pod", level: "privileged", setUp: true, server: "35",
			reason: v1alpha1.ReasonReconciled, want: v1alpha1.FlavourPrivileged},
		{name: "Auto at baseline takes the user-namespaced pod", level: "baseline", setUp: true, server: "35",
			reason: v1alpha1.ReasonReconciled, want: v1alpha1.FlavourUserNamespaced},
		{name: "unset is Auto", level: "baseline", flavour: "", setUp: true, server: "37",
			reason: v1alpha1.ReasonReconciled, want: v1alpha1.FlavourUserNamespaced},
		{name: "Auto at baseline before 1.35 without the gate", level: "baseline", flavour: v1alpha1.FlavourAuto, setUp: true, server: "34",
			reason: v1alpha1.ReasonPodSecurityForbidsRunner, says: []string{"Privileged:", "UserNamespaced:", "procMount", "privileged"}},
		{name: "Auto at baseline, not set up", level: "baseline", setUp: false, server: "35",
			reason: v1alpha1.ReasonPodSecurityForbidsRunner, says: []string{"not set up", "userNamespacedRunners"}},
		{name: "Auto at restricted: neither passes", level: "restricted", setUp: true, server: "35",
			reason: v1alpha1.ReasonPodSecurityForbidsRunner, says: []string{"UserNamespaced:", "restricted"}},
		{name: "UserNamespaced asked in a privileged namespace", level: "privileged", flavour: v1alpha1.FlavourUserNamespaced, setUp: true, server: "35",
			reason: v1alpha1.ReasonReconciled, want: v1alpha1.FlavourUserNamespaced},
		{name: "UserNamespaced asked, not set up", level: "privileged", flavour: v1alpha1.FlavourUserNamespaced, setUp: false, server: "35",
			reason: v1alpha1.ReasonFlavourNotSetUp, says: []string{"userNamespacedRunners"}},
		{name: "Privileged asked at baseline is refused, not swapped", level: "baseline", flavour: v1alpha1.FlavourPrivileged, setUp: true, server: "35",
			reason: v1alpha1.ReasonPodSecurityForbidsRunner, says: []string{"privileged"}},
		{name: "privileged job containers in a user-namespaced pod", level: "privileged", flavour: v1alpha1.FlavourUserNamespaced, setUp: true, server: "35",
			config: &v1alpha1.RunnerConfig{Container: &v1alpha1.RunnerContainerConfig{Privileged: ptr.To(true)}},
			reason: v1alpha1.ReasonInvalidRunnerConfig, says: []string{"container.privileged", "spec.flavour Privileged"}},
		{name: "job containers on the pod's network in a user-namespaced pod", level: "privileged", flavour: v1alpha1.FlavourUserNamespaced, setUp: true, server: "35",
			config: &v1alpha1.RunnerConfig{Container: &v1alpha1.RunnerContainerConfig{Network: ptr.To("host")}},
			reason: v1alpha1.ReasonInvalidRunnerConfig, says: []string{"container.network: host"}},
		{name: "Auto with privileged job containers keeps the privileged pod", level: "privileged", setUp: true, server: "35",
			config: &v1alpha1.RunnerConfig{Container: &v1alpha1.RunnerContainerConfig{Privileged: ptr.To(true)}},
			reason: v1alpha1.ReasonReconciled, want: v1alpha1.FlavourPrivileged},

		{name: "the platform's default Privileged: no fallback at baseline", level: "baseline", setUp: true, server: "35", dflt: v1alpha1.FlavourPrivileged,
			reason: v1alpha1.ReasonPodSecurityForbidsRunner, says: []string{"privileged"}},
		{name: "the platform's default UserNamespaced even where privileged is admitted", level: "privileged", setUp: true, server: "35", dflt: v1alpha1.FlavourUserNamespaced,
			reason: v1alpha1.ReasonReconciled, want: v1alpha1.FlavourUserNamespaced},
		{name: "a group's own flavour over the platform's default", level: "privileged", flavour: v1alpha1.FlavourPrivileged, setUp: true, server: "35", dflt: v1alpha1.FlavourUserNamespaced,
			reason: v1alpha1.ReasonReconciled, want: v1alpha1.FlavourPrivileged},
		{name: "a pinned flavour refuses another", level: "privileged", flavour: v1alpha1.FlavourPrivileged, setUp: true, server: "35", dflt: v1alpha1.FlavourUserNamespaced, pinned: true,
			reason: v1alpha1.ReasonInvalidSpec, says: []string{"pins every group's flavour to UserNamespaced"}},
		{name: "a pinned flavour admits a group that names it", level: "privileged", flavour: v1alpha1.FlavourUserNamespaced, setUp: true, server: "35", dflt: v1alpha1.FlavourUserNamespaced, pinned: true,
			reason: v1alpha1.ReasonReconciled, want: v1alpha1.FlavourUserNamespaced},
		{name: "Host at restricted", level: "restricted", flavour: v1alpha1.FlavourHost, server: "34",
			reason: v1alpha1.ReasonReconciled, want: v1alpha1.FlavourHost},
		{name: "Host needs nothing set up", level: "baseline", flavour: v1alpha1.FlavourHost, setUp: false, server: "35",
			reason: v1alpha1.ReasonReconciled, want: v1alpha1.FlavourHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, newGroup("ci", 5, withFlavour(tt.flavour), func(rg *v1alpha1.RunnerGroup) { rg.Spec.RunnerConfig = tt.config }))
			e.kube.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{Major: "1", Minor: tt.server}
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}
			e.labelNamespace(map[string]string{tenancy.LabelEnforce: tt.level})

			e.pass(func(_ *Deps, c *Config) {
				if tt.setUp {
					c.Runner.UserNamespaced = usernsSetUp
				}
				c.Runner.DefaultFlavour, c.Runner.FlavourPinned = tt.dflt, tt.pinned
			})

			c := ready(e.group("ci"))
			assert.Equal(t, tt.reason, c.Reason, c.Message)
			for _, s := range tt.says {
				assert.Contains(t, c.Message, s)
			}
			if tt.want == "" {
				assert.Empty(t, e.jobs())
				return
			}
			require.Len(t, e.jobs(), 1)
			spec := e.jobs()[0].Spec.Template.Spec
			switch tt.want {
			case v1alpha1.FlavourUserNamespaced:
				assertUserNamespacedPod(t, spec)
			case v1alpha1.FlavourHost:
				assertHostPod(t, spec)
			default:
				assert.Nil(t, spec.HostUsers)
				assert.Equal(t, ptr.To(true), spec.Containers[0].SecurityContext.Privileged)
				assert.Equal(t, runnerjob.DefaultImage, spec.Containers[0].Image)
			}
		})
	}
}

// TestALoopKeepsTheFlavourWithItsVerdict: a loop remembers a group's pod
// verdict between passes, and with it the flavour it chose; a Job created
// on a remembered verdict is the chosen flavour's, and a namespace that
// moves to privileged is judged again and gets the privileged pod.
func TestALoopKeepsTheFlavourWithItsVerdict(t *testing.T) {
	ctx := context.Background()
	rg := newGroup("ci", 5)
	rg.Generation = 1
	e := newEnv(t, rg)
	e.kube.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{Major: "1", Minor: "35"}
	sc, c := watchingScaler(t, e, func(_ *Deps, c *Config) { c.Runner.UserNamespaced = usernsSetUp })
	relabel := func(level, rv string) { t.Helper(); relabelSeen(t, e, c, level, rv) }
	passWith := func(ids ...int64) {
		t.Helper()
		var jobs []gitea.Job
		for _, id := range ids {
			jobs = append(jobs, queued(id, "ubuntu-latest"))
		}
		e.gitea.snap = gitea.Snapshot{Queued: jobs}
		_, err := sc.Pass(ctx)
		require.NoError(t, err)
		require.Equal(t, v1alpha1.ReasonReconciled, ready(e.group("ci")).Reason, ready(e.group("ci")).Message)
	}
	jobFor := func(id int64) corev1.PodSpec {
		t.Helper()
		for _, j := range e.jobs() {
			if j.Labels[v1alpha1.LabelGiteaJobID] == strconv.FormatInt(id, 10) {
				return j.Spec.Template.Spec
			}
		}
		require.Failf(t, "no runner Job", "for Gitea job %d", id)
		return corev1.PodSpec{}
	}

	relabel("baseline", "200")
	passWith(1)
	passWith(1, 2)
	assert.Equal(t, 1, sc.mem.verdicts.judged[podVerdict], "the second pass kept the verdict")
	assertUserNamespacedPod(t, jobFor(1))
	assertUserNamespacedPod(t, jobFor(2))

	relabel("privileged", "201")
	passWith(1, 2, 3)
	assert.Equal(t, 2, sc.mem.verdicts.judged[podVerdict], "the namespace moved: judged again")
	assert.Equal(t, ptr.To(true), jobFor(3).Containers[0].SecurityContext.Privileged)
}

// node is a node whose default runtime handler reports user namespace
// support as userNamespaces says (nil: reports no features, as before
// Kubernetes 1.30).
func node(name string, userNamespaces *bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if userNamespaces != nil {
		n.Status.RuntimeHandlers = []corev1.NodeRuntimeHandler{{Name: "", Features: &corev1.NodeRuntimeHandlerFeatures{UserNamespaces: userNamespaces}}}
	}
	return n
}

// TestUserNamespacedRunnersWaitForANodeThatRunsThem: a user-namespaced
// runner pod on a node whose runtime cannot run it never starts, again
// for every job; the scaler reads what the nodes say first, and refuses
// only on their word: nodes that report no support, not nodes it cannot
// read or that report nothing.
func TestUserNamespacedRunnersWaitForANodeThatRunsThem(t *testing.T) {
	tests := []struct {
		name      string
		nodes     []*corev1.Node
		forbidden bool
		reason    string
	}{
		{"one node of two runs them", []*corev1.Node{node("old", ptr.To(false)), node("new", ptr.To(true))}, false, v1alpha1.ReasonReconciled},
		{"no node runs them", []*corev1.Node{node("a", ptr.To(false)), node("b", ptr.To(false))}, false, v1alpha1.ReasonNodesLackUserNamespaces},
		{"the nodes report no features", []*corev1.Node{node("a", nil)}, false, v1alpha1.ReasonReconciled},
		{"the nodes cannot be read", []*corev1.Node{node("a", ptr.To(false))}, true, v1alpha1.ReasonReconciled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, newGroup("ci", 5), newGroup("priv", 5, withFlavour(v1alpha1.FlavourPrivileged)))
			for _, n := range tt.nodes {
				require.NoError(t, e.kube.Tracker().Add(n))
			}
			if tt.forbidden {
				e.kube.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(corev1.Resource("nodes"), "", errors.New("no"))
				})
			}
			e.kube.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{Major: "1", Minor: "35"}
			e.gitea.snap = gitea.Snapshot{Queued: []gitea.Job{queued(7, "ubuntu-latest")}}
			e.labelNamespace(map[string]string{tenancy.LabelEnforce: "baseline"})

			e.pass(func(_ *Deps, c *Config) { c.Runner.UserNamespaced = usernsSetUp })

			c := ready(e.group("ci"))
			assert.Equal(t, tt.reason, c.Reason, c.Message)
			if tt.reason == v1alpha1.ReasonNodesLackUserNamespaces {
				assert.Contains(t, c.Message, "containerd 2")
				assert.Empty(t, e.jobs())
			} else {
				require.Len(t, e.jobs(), 1)
				assertUserNamespacedPod(t, e.jobs()[0].Spec.Template.Spec)
			}
			assert.Equal(t, v1alpha1.ReasonPodSecurityForbidsRunner, ready(e.group("priv")).Reason, "a privileged group reads no nodes and is judged as before")
			if tt.forbidden {
				assert.Contains(t, e.logs.String(), "cannot read the nodes")
			}
		})
	}
}

// TestTheNodesAreReadOncePerRecheck: a loop asks the nodes at most once
// per nodesRecheck, however many groups and passes need the answer.
func TestTheNodesAreReadOncePerRecheck(t *testing.T) {
	e := newEnv(t, newGroup("a", 5), newGroup("b", 5))
	require.NoError(t, e.kube.Tracker().Add(node("n", ptr.To(true))))
	e.labelNamespace(map[string]string{tenancy.LabelEnforce: "baseline"})
	e.kube.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{Major: "1", Minor: "35"}
	sc := e.scaler(func(_ *Deps, c *Config) { c.Runner.UserNamespaced = usernsSetUp })
	lists := func() int {
		n := 0
		for _, a := range e.kube.Actions() {
			if a.GetVerb() == "list" && a.GetResource().Resource == "nodes" {
				n++
			}
		}
		return n
	}
	for range 3 {
		_, err := sc.Pass(context.Background())
		require.NoError(t, err)
	}
	assert.Equal(t, 1, lists(), "three passes of two groups within the recheck")
	assert.Equal(t, nodesSupport, sc.nodes.verdict)
}
