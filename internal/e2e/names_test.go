//go:build e2e

// Names: the product's, written out, and names unique to a run.

package e2e

import (
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The product's names as the README documents them (labels and the state
// ConfigMap's key on what the scaler creates, the chart's name, the runner
// container's), written out here rather than taken from the product's
// packages, so that a change there shows up as a failing test.
const (
	labelGroup      = "gitea.bpg.pw/runnergroup-name"
	labelManagedBy  = "gitea.bpg.pw/managed-by"
	labelGiteaJob   = "gitea.bpg.pw/gitea-job-id"
	labelListener   = "gitea.bpg.pw/listener"
	stateDataKey    = "spawned.json"
	chartName       = "gitea-runner-operator"
	runnerContainer = "runner"
)

// The test bed's and the tests' own names.
const (
	// labelPool is the pool label of the bed's fake nodes.
	labelPool = "testbed.gitea.bpg.pw/pool"

	// scalerImage ends in gitea-runner-scaler, which the test bed's agent
	// plays with the locally built bin/gitea-runner-scaler.
	scalerImage = "registry.e2e.invalid/gitea-runner-operator/gitea-runner-scaler"

	// e2eFieldManager owns what the tests apply and create.
	e2eFieldManager = "gitea-runner-operator-e2e"
	// restrictedLabel opts a namespace into the restricted-pods policy.
	restrictedLabel = "policies.gitea.bpg.pw/restricted"
)

var runSuffix = func() string {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return strconv.FormatInt(time.Now().Unix()%(36*36*36*36*36), 36) + fmt.Sprintf("%02x", b[:1])
}()

// uniq returns a name unique to this run: prefix, "-", a short suffix, then
// "-" and each of parts. Gitea keeps organisations, users and jobs across
// runs, so every name there must be new each time.
func uniq(prefix string, parts ...string) string {
	return strings.Join(append([]string{prefix, runSuffix}, parts...), "-")
}

// jobKey is a workflow job key unique to this run; the hold
// file "name-<key>" then holds exactly this job.
func jobKey(parts ...string) string {
	return strings.ReplaceAll(strings.Join(append(parts, runSuffix), "_"), "-", "_")
}
