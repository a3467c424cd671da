package runnerjob

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// recipeBlock is the yaml block after the marker <!-- recipe:NAME --> of
// the recipes page.
func recipeBlock(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile("../../charts/gitea-runner-operator/docs/recipes.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)<!-- recipe:" + regexp.QuoteMeta(name) + " -->\n```yaml\n(.*?)```\n").FindSubmatch(raw)
	require.NotNil(t, m, "docs/recipes.md has no yaml block marked recipe:%s", name)
	return string(m[1])
}

func recipeGroup(t *testing.T) *v1alpha1.RunnerGroup {
	t.Helper()
	var rg v1alpha1.RunnerGroup
	require.NoError(t, yaml.UnmarshalStrict([]byte(recipeBlock(t, "arm64")), &rg))
	rg.UID = "uid-arm64"
	return &rg
}

// The arm64 recipe is a valid group whose runner pods land on arm64 nodes
// and register with the linux-arm64 label.
func TestRecipeArm64Group(t *testing.T) {
	rg := recipeGroup(t)
	require.NoError(t, rg.Spec.Validate())
	job, err := Build(rg, "arm64-abcde", 7, DefaultOptions())
	require.NoError(t, err)
	pod := job.Spec.Template.Spec
	assert.Equal(t, map[string]string{"kubernetes.io/arch": "arm64"}, pod.NodeSelector)
	var labels string
	for _, e := range pod.Containers[0].Env {
		if e.Name == "GITEA_RUNNER_LABELS" {
			labels = e.Value
		}
	}
	assert.Contains(t, strings.Split(labels, ","), "linux-arm64:docker://gitea/runner-images:ubuntu-latest")
}

// The warm pool recipe: two CronJobs of a ServiceAccount whose Role may
// get and patch that one group and nothing else, each patch giving a
// spec the group accepts.
func TestRecipeWarmPoolBySchedule(t *testing.T) {
	docs := strings.Split(recipeBlock(t, "warm-pool"), "\n---\n")
	require.Len(t, docs, 5)
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[1]), &role))
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[2]), &binding))
	require.Len(t, role.Rules, 1)
	rule := role.Rules[0]
	assert.Equal(t, []string{v1alpha1.GroupVersion.Group}, rule.APIGroups)
	assert.Equal(t, []string{"runnergroups"}, rule.Resources)
	assert.Equal(t, []string{"get", "patch"}, rule.Verbs)

	require.Len(t, rule.ResourceNames, 1, "one group")
	assert.Equal(t, role.Name, binding.RoleRef.Name)
	// A group like the first recipe's, of the name the Role gives.
	rg := recipeGroup(t)
	rg.Name = rule.ResourceNames[0]

	pools := map[string]int32{}
	for _, doc := range docs[3:] {
		var cj batchv1.CronJob
		require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &cj))
		pod := cj.Spec.JobTemplate.Spec.Template.Spec
		require.Len(t, binding.Subjects, 1)
		assert.Equal(t, binding.Subjects[0].Name, pod.ServiceAccountName, "%s runs as the bound ServiceAccount", cj.Name)
		assert.Equal(t, rule.Verbs[1], pod.Containers[0].Args[0])
		args := pod.Containers[0].Args
		patch := args[len(args)-1]
		require.Contains(t, args, "--type=merge")
		require.Equal(t, rg.Name, args[2], "%s patches the group the Role lets it", cj.Name)

		before, err := yaml.Marshal(rg)
		require.NoError(t, err)
		before, err = yaml.YAMLToJSON(before)
		require.NoError(t, err)
		// On fields of objects alone, as here, a strategic merge patch is
		// the JSON merge patch kubectl's --type=merge sends.
		after, err := strategicpatch.StrategicMergePatch(before, []byte(patch), v1alpha1.RunnerGroup{})
		require.NoError(t, err)
		var patched v1alpha1.RunnerGroup
		require.NoError(t, yaml.UnmarshalStrict(after, &patched))
		require.NoError(t, patched.Spec.Validate(), "%s leaves a valid spec", cj.Name)
		require.LessOrEqual(t, patched.Spec.MinIdleRunners, patched.Spec.MaxActiveRunners, "the CRD refuses a pool above maxActiveRunners")
		pools[cj.Name] = patched.Spec.MinIdleRunners
	}
	assert.Equal(t, map[string]int32{"warm-pool-day": 3, "warm-pool-night": 0}, pools)
}

// The pull cache recipe's runnerTemplate mounts the daemon.json where the
// built-in pod's rootless Docker reads it, and keeps the pod's own mounts.
func TestRecipePullCache(t *testing.T) {
	var values struct {
		RunnerTemplate corev1.PodTemplateSpec `json:"runnerTemplate"`
	}
	require.NoError(t, yaml.UnmarshalStrict([]byte(recipeBlock(t, "pull-cache")), &values))
	opts := DefaultOptions()
	opts.Template = &values.RunnerTemplate
	job, err := Build(recipeGroup(t), "arm64-abcde", 7, opts)
	require.NoError(t, err)
	pod := job.Spec.Template.Spec
	runner := pod.Containers[0]
	require.Equal(t, "runner", runner.Name)

	var docker string
	for _, m := range runner.VolumeMounts {
		if m.Name == "docker-data" {
			docker = m.MountPath
		}
	}
	require.NotEmpty(t, docker, "the built-in pod's Docker data mount")
	home, _, ok := strings.Cut(docker, "/.local/share/docker")
	require.True(t, ok, "Docker's data are under the rootless user's home: %s", docker)
	i := slices.IndexFunc(runner.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "docker-daemon-config" })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, home+"/.config/docker/daemon.json", runner.VolumeMounts[i].MountPath, "rootless Docker reads ~/.config/docker/daemon.json")
	assert.True(t, slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
		return v.Name == "docker-daemon-config" && v.ConfigMap != nil && v.ConfigMap.Name == "docker-daemon-config"
	}))

	// The ConfigMap after it in the recipe holds the daemon.json.
	raw, err := os.ReadFile("../../charts/gitea-runner-operator/docs/recipes.md")
	require.NoError(t, err)
	_, rest, _ := bytes.Cut(raw, []byte("<!-- recipe:pull-cache -->"))
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```\n").FindAllSubmatch(rest, 2)
	require.Len(t, blocks, 2)
	var cm corev1.ConfigMap
	require.NoError(t, yaml.UnmarshalStrict(blocks[1][1], &cm))
	var daemon struct {
		RegistryMirrors    []string `json:"registry-mirrors"`
		InsecureRegistries []string `json:"insecure-registries"`
	}
	require.NoError(t, yaml.UnmarshalStrict([]byte(cm.Data["daemon.json"]), &daemon))
	require.Len(t, daemon.RegistryMirrors, 1)
	assert.Equal(t, "docker-daemon-config", cm.Name)
	assert.Equal(t, []string{strings.TrimPrefix(daemon.RegistryMirrors[0], "http://")}, daemon.InsecureRegistries, "a plain-HTTP mirror is an insecure registry to Docker")
}
