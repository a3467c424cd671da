package runnerjob

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// NewName returns "{group}-{5 random characters}". The scaler names Jobs
// itself, instead of leaving it to generateName, because the runner's name
// (GITEA_RUNNER_NAME, see RunnerName) is made from the Job's and that env is
// part of the object being created.
func NewName(group string) string {
	return group + "-" + utilrand.String(suffixLen)
}

// IsJobName reports whether name is one NewName makes for the group: the
// group's prefix followed by exactly one random suffix.
func IsJobName(group, name string) bool {
	suffix, ok := strings.CutPrefix(name, group+"-")
	if !ok || len(suffix) != suffixLen {
		return false
	}
	for _, r := range suffix {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// ownerTagLen is the length of OwnerTag: 8 hex digits, 32 bits, so two
// groups on one Gitea share a tag once in about 4 billion pairs.
const ownerTagLen = 8

// OwnerTag is a short digest of the group's UID. It is part of every runner
// name the group registers with Gitea, because a group's name alone is not
// unique: group "ci" in namespace a and group "ci" in namespace b (or in
// another cluster on the same Gitea) would otherwise count, reap and delete
// each other's runners. A UID is unique per object, so the tag is certain
// where the name is not; a group deleted and created again gets a new tag,
// and never adopts the registrations of the old one.
func OwnerTag(uid types.UID) string {
	sum := sha256.Sum256([]byte(uid))
	return hex.EncodeToString(sum[:])[:ownerTagLen]
}

// RunnerName is the name a runner Job's runner registers with in Gitea:
// "{Job name}-{OwnerTag}", e.g. "ci-x2v7k-3f9a1c2b". The Job's own name
// stays short (a group may have 50 characters); Gitea allows 255.
func RunnerName(rg *v1alpha1.RunnerGroup, jobName string) string {
	return jobName + "-" + OwnerTag(rg.UID)
}

// JobOfRunner says whether a Gitea runner name is one this group registers
// and, if so, the name of its runner Job: the group's prefix, exactly one
// random suffix and the group's own OwnerTag. The fixed suffix length keeps
// group "ci" from claiming the runners of group "ci-gpu"; the tag keeps it
// from claiming those of another namespace's "ci".
func JobOfRunner(rg *v1alpha1.RunnerGroup, runnerName string) (string, bool) {
	jobName, tag, ok := cutLast(runnerName, "-")
	if !ok || tag != OwnerTag(rg.UID) || !IsJobName(rg.Name, jobName) {
		return "", false
	}
	return jobName, true
}

// SplitRunnerName reads a runner name made by RunnerName: the group, the
// runner Job and the owner tag. ok is false for any other name.
func SplitRunnerName(runnerName string) (group, jobName, tag string, ok bool) {
	jobName, tag, ok = cutLast(runnerName, "-")
	if !ok || len(tag) != ownerTagLen || strings.Trim(tag, "0123456789abcdef") != "" {
		return "", "", "", false
	}
	group, _, ok = cutLast(jobName, "-")
	if !ok || group == "" || !IsJobName(group, jobName) {
		return "", "", "", false
	}
	return group, jobName, tag, true
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+len(sep):], true
}

// ConfigMapName names the ConfigMap that holds the runner config the scaler
// renders for the group named group; the group owns it. RunnerGroup names
// are at most 50 characters, so the name stays a valid ConfigMap name.
func ConfigMapName(group string) string {
	return group + "-runner-config"
}

// ConfigKeyFor is the key, in the group's runner config ConfigMap, of the
// config made for runner pods with the grace period grace, e.g.
// "config-grace-10920s.yaml". Each runner Job mounts the key of its own
// pod's grace, and the runner reads the shutdown_timeout made from it
// (runnerconfig.ShutdownTimeout), whatever grace the group has when the
// pod starts or its runner restarts: one config for every grace would
// give a pod made before a grace change a timeout made for another
// grace, which either cancels a job its own grace would let finish or
// outlives that grace and is killed before it reports. The rest of the
// config is the group's, the same under every key.
func ConfigKeyFor(grace time.Duration) string {
	return "config-grace-" + strconv.FormatInt(int64(grace/time.Second), 10) + "s.yaml"
}

// Selector returns the label selector of a group's runner Jobs.
func Selector(group string) string { return v1alpha1.LabelRunnerGroupName + "=" + group }

// GroupLabels are the labels that tie an object to its RunnerGroup.
func GroupLabels(group string) map[string]string {
	return map[string]string{v1alpha1.LabelRunnerGroupName: group, v1alpha1.LabelManagedBy: v1alpha1.ManagedBy}
}
