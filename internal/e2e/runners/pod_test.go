//go:build e2e

// Runner pods on the real API server: the install-wide runnerTemplate and a
// group's spec.template shaping the pods a pass creates, and the README's
// recipes for runners without privilege against Pod Security Admission.

package runners

import (
	"bufio"
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
)

// TestRunnerPodFollowsTheTemplates installs the chart with a runnerTemplate
// (a label and a toleration for every runner pod) and serves a group whose
// spec.template places its pods on pool b, sets the runner's memory limit,
// adds a sidecar and a volume. The runner pod read back from the API server
// has exactly those fields on top of the built-in pod, was scheduled on pool
// b, and its runner registered with the token from the secretKeyRef and ran
// the job.
func TestRunnerPodFollowsTheTemplates(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 6*time.Minute)
	const pool, sidecarImage = "b", "registry.e2e.invalid/tools/cache-proxy:1.0"
	values := e2e.DeploymentValues()
	values["runnerTemplate"] = map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"e2e.gitea.bpg.pw/tier": "ci"}},
		"spec": map[string]any{
			"tolerations": []any{map[string]any{"key": "e2e.gitea.bpg.pw/dedicated", "operator": "Exists", "effect": "NoSchedule"}},
		},
	}
	values["runnerTemplatePinned"] = []any{"spec.tolerations"}
	template := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		NodeSelector: map[string]string{e2e.LabelPool: pool},
		Containers: []corev1.Container{
			{Name: "runner", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("6Gi")}},
				VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}}},
			{Name: "cache-proxy", Image: sidecarImage},
		},
		Volumes: []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("1Gi"))}}}},
	}}
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "podtpl", Max: 1, Values: values, Template: template})
	key := e2e.JobKey("tpl")
	e2e.PushJobs(ctx, t, b, s.Fx, "ci.yml", nil, e2e.WfJob{Key: key, RunsOn: []string{s.Label}})
	jobs := b.Gitea.WaitJobs(ctx, t, s.Fx.Repo, 1)
	got := b.ExpectCompleted(ctx, t, s.NS, s.Group, s.Fx.Repo, e2e.IDsOf(jobs, key), s.Dump)
	job := got[key].Claim

	pods, err := b.Kube.CoreV1().Pods(s.NS).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1, s.Dump())
	pod := pods.Items[0]

	// The group's template: placement, on a node of that pool.
	assert.Equal(t, map[string]string{e2e.LabelPool: pool}, pod.Spec.NodeSelector)
	node, err := b.Kube.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, pool, node.Labels[e2e.LabelPool])
	// The install-wide template: its label and toleration.
	assert.Equal(t, "ci", pod.Labels["e2e.gitea.bpg.pw/tier"])
	assert.Contains(t, pod.Spec.Tolerations, corev1.Toleration{Key: "e2e.gitea.bpg.pw/dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	// The scaler's labels survive.
	assert.Equal(t, s.Group, pod.Labels[e2e.LabelGroup])

	// Containers: the runner first, merged; the sidecar added as written.
	require.Len(t, pod.Spec.Containers, 2)
	runner, sidecar := pod.Spec.Containers[0], pod.Spec.Containers[1]
	require.Equal(t, "runner", runner.Name)
	assert.Equal(t, runnerjob.DefaultImage, runner.Image)
	e2e.RequireResources(t, corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourceEphemeralStorage: resource.MustParse("4Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("6Gi"), corev1.ResourceEphemeralStorage: resource.MustParse("24Gi")},
	}, runner.Resources)
	assert.ElementsMatch(t, []corev1.VolumeMount{
		{Name: runnerjob.DockerDataVolume, MountPath: runnerjob.DockerDataDir},
		{Name: "cache", MountPath: "/cache"},
		{Name: runnerjob.ConfigVolume, MountPath: runnerjob.ConfigDir, ReadOnly: true},
		{Name: runnerjob.StateVolume, MountPath: runnerjob.StatePath, SubPath: runnerjob.StateKey, ReadOnly: true},
	}, runner.VolumeMounts)
	assert.Equal(t, "cache-proxy", sidecar.Name)
	assert.Equal(t, sidecarImage, sidecar.Image)
	// Volumes: the built-in Docker data and the group's cache.
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
	}
	require.Contains(t, vols, "cache")
	require.NotNil(t, vols["cache"].EmptyDir)
	assert.Equal(t, "1Gi", vols["cache"].EmptyDir.SizeLimit.String())
	require.Contains(t, vols, runnerjob.DockerDataVolume)
	assert.Equal(t, runnerjob.DefaultDockerDataSizeLimit, vols[runnerjob.DockerDataVolume].EmptyDir.SizeLimit.String())
	// The built-in defaults.
	require.NotNil(t, pod.Spec.AutomountServiceAccountToken)
	assert.False(t, *pod.Spec.AutomountServiceAccountToken)
	assert.Equal(t, int64(runnerjob.DefaultTerminationGracePeriodSeconds), *pod.Spec.TerminationGracePeriodSeconds)
	// Still the runner's own credentials, never the registration token.
	_, ok := e2e.EnvOf(runner, "GITEA_RUNNER_REGISTRATION_TOKEN")
	assert.False(t, ok, "the templates left the pod without a registration token")
	require.Contains(t, vols, runnerjob.StateVolume)
	require.NotNil(t, vols[runnerjob.StateVolume].Secret)
	assert.Equal(t, runnerjob.StateSecretName(got[key].Claim.Name), vols[runnerjob.StateVolume].Secret.SecretName)
}

// TestRunnerGroupSettingAPinnedFieldFailsAlone: with runnerTemplatePinned,
// a group whose template sets a pinned field is not served and says why;
// admission does not refuse it (that is the guardrails policy's part).
func TestRunnerGroupSettingAPinnedFieldFailsAlone(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 4*time.Minute)
	values := e2e.DeploymentValues()
	values["runnerTemplatePinned"] = []any{"spec.runtimeClassName"}
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "pinned", Max: 1, Values: values,
		Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{RuntimeClassName: ptr.To("runc")}}})
	e2e.WaitUntil(ctx, t, e2e.StepWait, "the group fails with InvalidTemplate", s.Dump, func(ctx context.Context) (bool, string, error) {
		rg, err := b.Group(ctx, s.NS, s.Group)
		if err != nil {
			return false, "", err
		}
		for _, c := range rg.Status.Conditions {
			if c.Type == "Ready" && c.Reason == "InvalidTemplate" {
				return strings.Contains(c.Message, "spec.runtimeClassName is pinned"), c.Message, nil
			}
		}
		return false, e2e.StatusLine(rg), nil
	})
}

// runnerRecipe is a file of testdata/runner-recipes: a group's spec.template
// and, in its comments, what Pod Security Admission must say of the runner
// pod it makes at each level.
type runnerRecipe struct {
	name     string
	body     string // the YAML without its comment lines
	template *corev1.PodTemplateSpec
	psa      map[string]string // level -> allowed or refused
}

func readRecipes(t *testing.T, dir string) []runnerRecipe {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var out []runnerRecipe
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		r := runnerRecipe{name: strings.TrimSuffix(filepath.Base(f), ".yaml"), psa: map[string]string{}}
		var body []string
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "# psa-"); ok {
				level, verdict, _ := strings.Cut(rest, ": ")
				r.psa[level] = verdict
			}
			if !strings.HasPrefix(line, "#") {
				body = append(body, line)
			}
		}
		r.body = strings.Join(body, "\n") + "\n"
		r.template = &corev1.PodTemplateSpec{}
		require.NoError(t, yaml.UnmarshalStrict(raw, r.template), f)
		require.Len(t, r.psa, 2, "%s says what baseline and restricted do", f)
		out = append(out, r)
	}
	return out
}

// TestRunnerRecipesAgainstPodSecurity builds the runner pod of each recipe
// under testdata/runner-recipes (the built-in pod, and the README's recipes
// for runners without privilege) with the scaler's own Job builder, and
// creates it as a server-side dry run in namespaces that enforce Pod
// Security baseline and restricted: the real API server says which level
// each passes. The README shows each recipe's template as it is here.
func TestRunnerRecipesAgainstPodSecurity(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 2*time.Minute)
	recipes := readRecipes(t, filepath.Join(b.Root, "internal", "e2e", "runners", "testdata", "runner-recipes"))
	readme := allMarkdown(t, b.Root)

	// The RuntimeClass admission plugin refuses a pod whose class does not
	// exist; the bed has no sysbox, but admission only needs the object.
	const class = "sysbox-runc"
	rcs := b.Kube.NodeV1().RuntimeClasses()
	if _, err := rcs.Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Handler: "sysbox-runc"}, metav1.CreateOptions{}); err == nil {
		t.Cleanup(func() {
			ctx, cancel := e2e.CleanupContext()
			defer cancel()
			if err := rcs.Delete(ctx, class, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting RuntimeClass %s: %v", class, err)
			}
		})
	} else if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}

	platform := b.PodSecurityPlatform(ctx, t)
	levels := map[string]string{}
	for _, level := range []string{"baseline", "restricted"} {
		levels[level] = b.Namespace(ctx, t, "psa-"+level, map[string]string{"pod-security.kubernetes.io/enforce": level})
	}
	for _, r := range recipes {
		t.Run(r.name, func(t *testing.T) {
			if r.name != "default" {
				indented := "template:\n  " + strings.ReplaceAll(strings.TrimSuffix(r.body, "\n"), "\n", "\n  ") + "\n"
				assert.Contains(t, readme, indented, "the docs show recipe %s as tested", r.name)
			}
			for level, ns := range levels {
				rg := &v1alpha1.RunnerGroup{
					ObjectMeta: metav1.ObjectMeta{Name: "psa", Namespace: ns, UID: "uid-psa"},
					Spec: v1alpha1.RunnerGroupSpec{
						Scope: v1alpha1.ScopeOrg, Org: "acme", Gitea: v1alpha1.GiteaSpec{URL: "https://gitea.example.com"},
						Labels: []string{"ubuntu-latest:host"}, MaxActiveRunners: 1, Template: r.template,
						RegistrationToken: &v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "tokens", Key: "registration"}},
					},
				}
				if r.name == "default" {
					rg.Spec.Template = nil
				}
				require.NoError(t, runnerjob.CheckTemplate(rg, runnerjob.DefaultOptions()), "the scaler accepts the recipe")
				job, err := runnerjob.Build(rg, "psa-abcde", 1, runnerjob.DefaultOptions())
				require.NoError(t, err)
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "psa-", Namespace: ns, Labels: job.Spec.Template.Labels}, Spec: job.Spec.Template.Spec}
				_, err = b.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				// The scaler's own pre-check agrees with the API server.
				ours := tenancy.PodSecurity(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{tenancy.LabelEnforce: level}}}, &job.Spec.Template, platform)
				assert.Equal(t, err == nil, ours == "", "%s at %s: the scaler says %q, the API server %v", r.name, level, ours, err)
				switch r.psa[level] {
				case "allowed":
					assert.NoError(t, err, "%s at %s", r.name, level)
				case "refused":
					if assert.Error(t, err, "%s at %s", r.name, level) {
						assert.Contains(t, err.Error(), `violates PodSecurity "`+level+`:latest"`, "%s at %s", r.name, level)
					}
				default:
					t.Fatalf("%s: psa-%s is %q, want allowed or refused", r.name, level, r.psa[level])
				}
				t.Logf("%s at %s: %v", r.name, level, err)
			}
		})
	}
}

// TestPodSecurityPreCheckAgreesWithTheAPIServer is issue 24 item 2 on the
// real API server: pods that give node root without privileged: true
// (hostPath /, SYS_ADMIN, a host port, unconfined seccomp, an unsafe
// sysctl, hostPID) are refused by Pod Security baseline there, and the
// scaler refuses each in a namespace without an enforce label, where the
// cluster's default (privileged, here as by default) would admit it. A
// plain pod passes both. Unmasked /proc and root in a user namespace
// (hostUsers: false) are issue 39: userNamespacedPods.
func TestPodSecurityPreCheckAgreesWithTheAPIServer(t *testing.T) {
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 2*time.Minute)
	baseline := b.Namespace(ctx, t, "psa-pre-baseline", map[string]string{tenancy.LabelEnforce: "baseline"})
	t.Run("user-namespaced pods", func(t *testing.T) { userNamespacedPods(ctx, t, b, baseline) })
	unlabelled := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unlabelled"}}
	runner := func(sc *corev1.SecurityContext) corev1.Container {
		return corev1.Container{Name: "runner", Image: "runner", SecurityContext: sc}
	}
	tests := map[string]struct {
		spec    corev1.PodSpec
		allowed bool
	}{
		"plain": {spec: corev1.PodSpec{Containers: []corev1.Container{runner(nil)}}, allowed: true},
		"hostPath / as root": {spec: corev1.PodSpec{Containers: []corev1.Container{runner(&corev1.SecurityContext{RunAsUser: ptr.To[int64](0)})},
			Volumes: []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}}},
		"SYS_ADMIN":          {spec: corev1.PodSpec{Containers: []corev1.Container{runner(&corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}})}}},
		"a host port":        {spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "runner", Image: "runner", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}}}}},
		"seccomp Unconfined": {spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}, Containers: []corev1.Container{runner(nil)}}},
		"an unsafe sysctl":   {spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.core_pattern", Value: "|/tmp/x"}}}, Containers: []corev1.Container{runner(nil)}}},
		"hostPID":            {spec: corev1.PodSpec{HostPID: true, Containers: []corev1.Container{runner(nil)}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "psa-", Namespace: baseline}, Spec: tc.spec}
			_, err := b.Kube.CoreV1().Pods(baseline).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			ours := tenancy.PodSecurity(unlabelled, &corev1.PodTemplateSpec{Spec: tc.spec}, tenancy.Platform{})
			if tc.allowed {
				assert.NoError(t, err)
				assert.Empty(t, ours)
				return
			}
			if assert.Error(t, err, "baseline refuses it on the API server") {
				assert.Contains(t, err.Error(), `violates PodSecurity "baseline:latest"`)
			}
			assert.Contains(t, ours, `Pod Security "baseline:latest"`, "the scaler refuses it in an unlabelled namespace")
		})
	}
}

// userNamespacedPods is issue 39 on the real API server: a pod with
// hostUsers: false and an unmasked /proc at baseline, and one running as
// root but otherwise restricted at restricted. Pod Security admits both
// from Kubernetes 1.35 (policy versions 1.35 and later), and before that
// only with the feature gate UserNamespacesPodSecurityStandards (the bed
// has it with TESTBED_APISERVER_FEATURE_GATES); otherwise it refuses both.
// The pre-check told what the scaler knows (the server's version, the
// platform's word on the gate) agrees, and told nothing refuses both, so
// what it is told is what makes it agree.
func userNamespacedPods(ctx context.Context, t *testing.T, b *e2e.Testbed, baseline string) {
	gates := b.FeatureGates(ctx, t)
	// Without these gates the API server drops hostUsers or procMount
	// from the pod before Pod Security sees it (Kubernetes 1.30 has both
	// off); from 1.33 both are on by default, and a release that no longer
	// lists one has it on for good.
	for _, gate := range []string{"UserNamespacesSupport", "ProcMountType"} {
		if on, listed := gates[gate]; listed && !on {
			t.Skipf("the API server's feature gate %s is off: it would drop the field from the pod", gate)
		}
	}
	info, err := b.Kube.Discovery().ServerVersion()
	require.NoError(t, err)
	server, err := tenancy.ParseServerVersion(info.Major, info.Minor)
	require.NoError(t, err)
	gate, listed := gates["UserNamespacesPodSecurityStandards"]
	ga := !server.Older(psaapi.MajorMinorVersion(1, 35))
	require.True(t, listed || ga, "Kubernetes %s does not list the gate UserNamespacesPodSecurityStandards: tenancy.Platform and this test need a look", server)
	relaxed := gate || ga
	t.Logf("Kubernetes %s, the gate UserNamespacesPodSecurityStandards: %v (listed: %v); Pod Security relaxes for user-namespaced pods: %v", server, gate, listed, relaxed)
	told := tenancy.Platform{Server: server, UserNamespacesPodSecurityStandards: gate}
	restricted := b.Namespace(ctx, t, "psa-pre-restricted", map[string]string{tenancy.LabelEnforce: "restricted"})
	tests := map[string]struct {
		ns, level string
		spec      corev1.PodSpec
		check     string // the Pod Security check that refuses it unrelaxed
	}{
		"procMount Unmasked at baseline": {ns: baseline, level: "baseline", check: "procMount", spec: corev1.PodSpec{
			HostUsers: ptr.To(false),
			Containers: []corev1.Container{{Name: "runner", Image: "runner", SecurityContext: &corev1.SecurityContext{
				ProcMount: ptr.To(corev1.UnmaskedProcMount),
			}}},
		}},
		"root at restricted": {ns: restricted, level: "restricted", check: "runAsUser=0", spec: corev1.PodSpec{
			HostUsers:       ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "runner", Image: "runner", SecurityContext: &corev1.SecurityContext{
				RunAsUser: ptr.To[int64](0), AllowPrivilegeEscalation: ptr.To(false),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			}}},
		}},
	}
	flavourPods(ctx, t, b, baseline, restricted, told)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "psa-", Namespace: tc.ns}, Spec: tc.spec}
			_, err := b.Kube.CoreV1().Pods(tc.ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tc.ns, Labels: map[string]string{tenancy.LabelEnforce: tc.level}}}
			tmpl := &corev1.PodTemplateSpec{Spec: tc.spec}
			ours := tenancy.PodSecurity(ns, tmpl, told)
			t.Logf("the API server: %v; the pre-check: %q", err, ours)
			if relaxed {
				assert.NoError(t, err, "the API server admits it")
				assert.Empty(t, ours, "the pre-check told the server's version and the gate admits it")
				assert.Contains(t, tenancy.PodSecurity(ns, tmpl, tenancy.Platform{}), tc.check, "the pre-check told nothing refuses it")
				return
			}
			if assert.Error(t, err, "the API server refuses it") {
				assert.Contains(t, err.Error(), `violates PodSecurity "`+tc.level+`:latest"`)
				assert.Contains(t, err.Error(), tc.check)
			}
			assert.Contains(t, ours, tc.check, "the pre-check refuses it")
			assert.Empty(t, tenancy.PodSecurity(ns, tmpl, tenancy.Platform{Server: server, UserNamespacesPodSecurityStandards: true}),
				"the pre-check told of a gate the API server lacks would admit it")
		})
	}
}

// flavourPods holds the pre-check to the API server on each runner pod
// flavour's pod as a pass builds it (spec.flavour), at each level: the
// privileged pod passes only privileged; the user-namespaced one passes
// privileged, and baseline where Pod Security relaxes for such pods; the
// Host one (the runner alone, as uid 1000) passes every level; the
// API server and the pre-check told what the scaler knows say the same.
func flavourPods(ctx context.Context, t *testing.T, b *e2e.Testbed, baseline, restricted string, told tenancy.Platform) {
	privileged := b.Namespace(ctx, t, "psa-pre-privileged", nil)
	levels := map[string]string{privileged: "privileged", baseline: "baseline", restricted: "restricted"}
	opts := runnerjob.DefaultOptions()
	opts.UserNamespaced = runnerjob.UserNamespacedPod{Image: "runner:userns", SeccompProfile: "rootless-dind.json", TunResource: "squat.ai/tun"}
	rg := &v1alpha1.RunnerGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "flavours", UID: "uid-flavours"},
		Spec: v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeOrg, Org: "acme", Gitea: v1alpha1.GiteaSpec{URL: "https://gitea.example.com"}, MaxActiveRunners: 1,
			AuthToken: v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "api", Key: "token"}}},
	}
	for _, f := range []v1alpha1.RunnerFlavour{v1alpha1.FlavourPrivileged, v1alpha1.FlavourUserNamespaced, v1alpha1.FlavourHost} {
		opts.Flavour = f
		for ns, level := range levels {
			t.Run(string(f)+" pod at "+level, func(t *testing.T) {
				rg.Namespace = ns
				job, err := runnerjob.Build(rg, "flavours-abcde", 1, opts)
				require.NoError(t, err)
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "psa-", Namespace: ns}, Spec: job.Spec.Template.Spec}
				_, apiErr := b.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{tenancy.LabelEnforce: level}}}
				ours := tenancy.PodSecurity(nsObj, &job.Spec.Template, told)
				t.Logf("the API server: %v; the pre-check: %q", apiErr, ours)
				assert.Equal(t, apiErr == nil, ours == "", "the API server and the pre-check agree")
				switch {
				case level == "privileged", f == v1alpha1.FlavourHost,
					f == v1alpha1.FlavourUserNamespaced && level == "baseline" && ours == "":
					assert.NoError(t, apiErr)
				default:
					assert.Error(t, apiErr)
				}
			})
		}
	}
}

// allMarkdown is every Markdown file of the repository, concatenated: the
// docs are split over several files by topic and sections move between
// them, so a check that the docs show something looks in all of them.
func allMarkdown(t *testing.T, root string) string {
	t.Helper()
	var all strings.Builder
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".md") {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		all.Write(raw)
		all.WriteString("\n")
		return nil
	})
	require.NoError(t, err)
	return all.String()
}
