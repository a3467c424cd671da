//go:build e2e

package runners

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/e2e/giteasetup"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// cacheSaveStep saves one entry through the cache API of the runner's
// cache server, as actions/cache does (reserve, upload, commit), with the
// ACTIONS_CACHE_URL and ACTIONS_RUNTIME_TOKEN the runner gives the job:
// the bed has no network, so the action itself cannot be fetched.
const cacheSaveStep = `set -eu
U="${ACTIONS_CACHE_URL}_apis/artifactcache"
A="Authorization: Bearer ${ACTIONS_RUNTIME_TOKEN}"
T=$(mktemp -d)
printf '%s' '@PROOF@' > "$T/entry"
N=$(wc -c < "$T/entry")
curl -fsS -H "$A" -H 'Content-Type: application/json' -d "{\"key\":\"@KEY@\",\"version\":\"v1\",\"cacheSize\":$N}" "$U/caches" > "$T/reserved"
ID=$(sed -n 's/.*"cacheId":\([0-9]*\).*/\1/p' "$T/reserved")
test -n "$ID"
curl -fsS -X PATCH -H "$A" -H 'Content-Type: application/octet-stream' -H "Content-Range: bytes 0-$((N-1))/*" --data-binary @"$T/entry" "$U/caches/$ID"
curl -fsS -H "$A" -H 'Content-Type: application/json' -d "{\"size\":$N}" "$U/caches/$ID"
printf saved > '@SEEN@'
`

// cacheRestoreStep looks the entry up and downloads it as actions/cache
// does, writing what it got, or "miss <HTTP status>", to the seen file.
const cacheRestoreStep = `set -eu
U="${ACTIONS_CACHE_URL}_apis/artifactcache"
A="Authorization: Bearer ${ACTIONS_RUNTIME_TOKEN}"
T=$(mktemp -d)
CODE=$(curl -sS -o "$T/found" -w '%{http_code}' -H "$A" "$U/cache?keys=@KEY@&version=v1")
if [ "$CODE" = 200 ]; then
  LOC=$(sed -n 's/.*"archiveLocation":"\([^"]*\)".*/\1/p' "$T/found" | sed 's/\\u0026/\&/g')
  curl -fsS -o '@SEEN@' "$LOC"
else
  printf 'miss %s' "$CODE" > '@SEEN@'
fi
`

// TestASharedCacheIsKeptAcrossEphemeralRunnersPerRepository is issue 20
// items 2 and 3 for the cache, with Gitea's real runner and its real
// cache-server (the chart's runnerCache): a job of repository A on one
// ephemeral runner saves an entry, a later job of A on a new ephemeral
// runner restores it, and a job of repository B of the same group and
// namespace does not see it. The group's Cache condition says the server
// answers; the runner's config names it and the ConfigMap never holds the
// secret.
//
// On the bed the cache server's pod runs in a network namespace of its own
// (it listens on every interface) and the agent plays its Service on a
// loopback port (testbed-agent's testbed.gitea.bpg.pw/forward), which
// runnerCache.url names.
func TestASharedCacheIsKeptAcrossEphemeralRunnersPerRepository(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the bed runs the cache server's pod in a network namespace of its own, which needs root (as the bed and CI run)")
	}
	e2e.Parallel(t)
	b := e2e.Bed(t)
	ctx := e2e.TestContext(t, 8*time.Minute)
	port := e2e.FreeLoopbackPort(t)
	values := e2e.DeploymentValues()
	values["runnerCache"] = map[string]any{
		"enabled":        true,
		"port":           port,
		"url":            fmt.Sprintf("http://127.0.0.1:%d/", port),
		"persistence":    map[string]any{"enabled": false, "size": "1Gi"},
		"podAnnotations": map[string]any{"testbed.gitea.bpg.pw/forward": fmt.Sprintf("127.0.0.1:%d=%d", port, port)},
	}
	s := b.ServedGroup(ctx, t, e2e.SceneOpts{Name: "rcache", Max: 2, Values: values})
	other := b.Gitea.CreateOrgRepo(ctx, t, s.Fx.Spec.Org, "other")

	e2e.WaitUntil(ctx, t, e2e.StepWait, "the group's Cache condition True", s.Dump, func(ctx context.Context) (bool, string, error) {
		rg, err := b.Group(ctx, s.NS, s.Group)
		if err != nil {
			return false, "", err
		}
		c := meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionCache)
		if c == nil {
			return false, "no Cache condition", nil
		}
		return c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonCacheReachable, c.Reason + ": " + c.Message, nil
	})

	proof := e2e.Uniq("cache-proof")
	cacheKey := e2e.Uniq("deps")
	run := func(name string, r giteasetup.Repo, script string) string {
		t.Helper()
		key := e2e.JobKey(name)
		seen := filepath.Join(e2e.HoldDir, "rcache-"+key)
		step := strings.NewReplacer("@PROOF@", proof, "@KEY@", cacheKey, "@SEEN@", seen).Replace(script)
		// Each workflow runs on the push that adds it only: a later push
		// must not run an earlier save again.
		file := name + ".yml"
		wf := "name: e2e\non:\n  push:\n    paths: ['.gitea/workflows/" + file + "']\njobs:\n  " + key + ":\n    runs-on: [" + s.Label + "]\n    steps:\n      - run: |\n" + indent(step, "          ")
		b.Gitea.PushWorkflow(ctx, t, s.Fx.PushAs, r, file, wf)
		var id int64
		e2e.WaitUntil(ctx, t, e2e.StepWait, "job "+name+" in Gitea", s.Dump, func(ctx context.Context) (bool, string, error) {
			jobs, err := b.Gitea.RepoJobs(ctx, r)
			if err != nil {
				return false, err.Error(), nil
			}
			for _, j := range jobs {
				if j.Name == key {
					id = j.ID
					return true, "", nil
				}
			}
			return false, e2e.DescribeGiteaJobs(jobs), nil
		})
		e2e.WaitUntil(ctx, t, e2e.StepWait, "job "+name+" done", s.Dump, func(ctx context.Context) (bool, string, error) {
			gj, err := b.GiteaJob(ctx, r, id)
			return err == nil && gj.State() == "completed/success", gj.State(), nil
		})
		got, err := os.ReadFile(seen)
		require.NoError(t, err, "job %s's step wrote what it saw", name)
		return string(got)
	}

	assert.Equal(t, "saved", run("save", s.Fx.Repo, cacheSaveStep), "repository A saved an entry through its runner's cache server")
	assert.Equal(t, proof, run("restore", s.Fx.Repo, cacheRestoreStep), "a later job of A, on a new ephemeral runner, restores it")
	assert.Equal(t, "miss 204", run("peek", other, cacheRestoreStep), "a job of repository B does not see A's entry")

	jobs, err := b.Kube.BatchV1().Jobs(s.NS).List(ctx, metav1.ListOptions{LabelSelector: runnerjob.Selector(s.Group)})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(jobs.Items), 3, "each job had a runner of its own")

	cm, err := b.Kube.CoreV1().ConfigMaps(s.NS).Get(ctx, runnerjob.ConfigMapName(s.Group), metav1.GetOptions{})
	require.NoError(t, err)
	var rendered map[string]map[string]any
	// Each runner reads the key of its own pod's grace (issue 32.5).
	key, ok := runnerjob.MountedConfigKey(s.Group, &jobs.Items[0])
	require.True(t, ok, "the runner Job mounts the group's runner config")
	require.NoError(t, yaml.Unmarshal([]byte(cm.Data[key]), &rendered))
	assert.Equal(t, map[string]any{"enabled": true, "external_server": fmt.Sprintf("http://127.0.0.1:%d/", port)}, rendered["cache"],
		"the ConfigMap names the server and never holds the secret")
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}
