// Package agent plays the kubelet for pods bound to the test bed's fake nodes: it runs
// each container as a local process, reports the pod's status as a kubelet would, and
// removes the pod once it is deleted.
package agent

import (
	"path"
	"strings"
)

// Kind says how a container image is played locally.
type Kind int

const (
	// KindStandIn is any image without a local binary: a built-in process that waits
	// until the pod's main containers end (or the pod is deleted) and exits 0.
	KindStandIn Kind = iota
	// KindScaler runs the locally built gitea-runner-scaler.
	KindScaler
	// KindRunner runs the test runner in place of act_runner.
	KindRunner
)

func (k Kind) String() string {
	switch k {
	case KindScaler:
		return "scaler"
	case KindRunner:
		return "runner"
	default:
		return "stand-in"
	}
}

// ScalerCommand is the scaler's binary name in its image; a container command naming
// it (bare or by path) is pointed at the local build.
const ScalerCommand = "gitea-runner-scaler"

// ClassifyImage maps an image reference to the way it is played: a repository ending
// in gitea-runner-scaler is the scaler, anything mentioning act_runner is a runner.
func ClassifyImage(image string) Kind {
	repo := imageRepository(image)
	switch {
	case repo == ScalerCommand || strings.HasSuffix(repo, "/"+ScalerCommand):
		return KindScaler
	case strings.Contains(image, "act_runner"):
		return KindRunner
	default:
		return KindStandIn
	}
}

// imageRepository strips the digest and tag from an image reference. A colon before
// the last slash belongs to a registry port, not to a tag.
func imageRepository(image string) string {
	repo, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return repo
}

// ProcessArgv is the argv that plays a container, or nil for a stand-in.
func ProcessArgv(kind Kind, command, args []string, scalerBin, runnerBin string) []string {
	switch kind {
	case KindScaler:
		if len(command) == 0 {
			// The image's entrypoint is the scaler itself.
			return append([]string{scalerBin}, args...)
		}
		argv := append(append([]string{}, command...), args...)
		if path.Base(argv[0]) == ScalerCommand {
			argv[0] = scalerBin
		}
		return argv
	case KindRunner:
		// act_runner images start their own daemons before the runner; the test runner
		// replaces all of that and is configured by environment only.
		return []string{runnerBin}
	default:
		return nil
	}
}
