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
	LabelGroup      = "gitea.bpg.pw/runnergroup-name"
	LabelManagedBy  = "gitea.bpg.pw/managed-by"
	LabelGiteaJob   = "gitea.bpg.pw/gitea-job-id"
	LabelListener   = "gitea.bpg.pw/listener"
	StateDataKey    = "spawned.json"
	ChartName       = "gitea-runner-operator"
	runnerContainer = "runner"
)

// The test bed's and the tests' own names.
const (
	// LabelPool is the pool label of the bed's fake nodes.
	LabelPool = "testbed.gitea.bpg.pw/pool"

	// scalerImage ends in gitea-runner-scaler, which the test bed's agent
	// plays with the locally built bin/gitea-runner-scaler.
	scalerImage = "registry.e2e.invalid/gitea-runner-operator/gitea-runner-scaler"

	// FieldManager owns what the tests apply and create.
	FieldManager = "gitea-runner-operator-e2e"
	// RestrictedLabel opts a namespace into the restricted-pods policy.
	RestrictedLabel = "policies.gitea.bpg.pw/restricted"
)

var RunSuffix = func() string {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return strconv.FormatInt(time.Now().Unix()%(36*36*36*36*36), 36) + fmt.Sprintf("%02x", b[:1])
}()

// Uniq returns a name unique to this run: prefix, "-", a short suffix, then
// "-" and each of parts. Gitea keeps organisations, users and jobs across
// runs, so every name there must be new each time.
func Uniq(prefix string, parts ...string) string {
	return strings.Join(append([]string{prefix, RunSuffix}, parts...), "-")
}

// JobKey is a workflow job key unique to this run; the hold
// file "name-<key>" then holds exactly this job.
func JobKey(parts ...string) string {
	return strings.ReplaceAll(strings.Join(append(parts, RunSuffix), "_"), "-", "_")
}
