// Package agent plays the kubelet for pods bound to the test bed's fake nodes: it runs
// each container as a local process, reports the pod's status as a kubelet would, and
// removes the pod once it is deleted.
package agent

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
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
	// KindGiteaRunner runs Gitea's real runner through its image's entrypoint
	// script (run.sh), as the gitea/runner and gitea/act_runner images do.
	KindGiteaRunner
	// KindSteeredRunner runs the bed's steered runner: a runner a test controls
	// through files and env (a job held for ever, a chosen result), for the few
	// tests that need a runner the real one cannot be made to be.
	KindSteeredRunner
)

func (k Kind) String() string {
	switch k {
	case KindScaler:
		return "scaler"
	case KindGiteaRunner:
		return "gitea-runner"
	case KindSteeredRunner:
		return "steered-runner"
	default:
		return "stand-in"
	}
}

// ScalerCommand is the scaler's binary name in its image; a container command naming
// it (bare or by path) is pointed at the local build.
const ScalerCommand = "gitea-runner-scaler"

// SteeredRunnerImage is the image name tests give a container to get the steered
// runner; any registry or tag may go with it.
const SteeredRunnerImage = "steered-runner"

// ClassifyImage maps an image reference to the way it is played: a repository ending
// in gitea-runner-scaler is the scaler; gitea/runner (Gitea's runner since v1.0.0),
// gitea/act_runner (its name before) and images built on them named act_runner* or
// gitea-runner*, from any registry or mirror path, are the real runner; a repository
// ending in steered-runner is the steered runner.
func ClassifyImage(image string) Kind {
	repo := imageRepository(image)
	segments := strings.Split(repo, "/")
	last := segments[len(segments)-1]
	parent := ""
	if len(segments) > 1 {
		parent = segments[len(segments)-2]
	}
	switch {
	case last == ScalerCommand:
		return KindScaler
	case strings.Contains(last, "act_runner") || (strings.HasPrefix(last, "gitea-runner") && !strings.HasPrefix(last, ScalerCommand)) || (last == "runner" && parent == "gitea"):
		return KindGiteaRunner
	case last == SteeredRunnerImage:
		return KindSteeredRunner
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

// ImageRunnerRelease is the runner release an image's tag names: "3.1.0" for
// gitea/runner:3.1.0-dind-rootless, gitea/runner:v3.1.0 or a mirror's
// gitea-runner:3.1.0; "" for an image with no tag or a tag that is no release
// (nightly, latest).
func ImageRunnerRelease(image string) string {
	ref, _, _ := strings.Cut(image, "@")
	i := strings.LastIndex(ref, ":")
	if i < strings.LastIndex(ref, "/") || i < 0 {
		return ""
	}
	release, _, _ := strings.Cut(strings.TrimPrefix(ref[i+1:], "v"), "-")
	if release == "" || strings.Trim(release, "0123456789.") != "" || strings.Count(release, ".") != 2 {
		return ""
	}
	return release
}

// giteaRunner is one runner release as its images ship it: the directory with
// the gitea-runner binary, and the entrypoint script run.sh read from it.
type giteaRunner struct {
	dir       string
	runScript []byte
}

func loadGiteaRunner(dir string) (giteaRunner, error) {
	script, err := os.ReadFile(filepath.Join(dir, "run.sh"))
	if err != nil {
		return giteaRunner{}, err
	}
	if _, err := PrepareEntrypoint(script, "/d", "/t"); err != nil {
		return giteaRunner{}, fmt.Errorf("%s: %w", dir, err)
	}
	return giteaRunner{dir: dir, runScript: script}, nil
}

// giteaRunnerFor is the release that plays a runner image: the one its tag
// names when the bed builds it, else the default (zero when there is none).
func (a *Agent) giteaRunnerFor(image string) giteaRunner {
	if r, ok := a.giteaRunners[ImageRunnerRelease(image)]; ok {
		return r
	}
	return a.giteaRunners[""]
}

// Binaries are the local programs that play process-backed images.
type Binaries struct {
	Scaler        string
	SteeredRunner string
	// Entrypoint is the runner image's entrypoint script as prepared for one
	// container start (see PrepareEntrypoint).
	Entrypoint string
	// GiteaRunner is the gitea-runner binary, for a runner image container
	// whose command runs it (RunsGiteaRunnerCommand).
	GiteaRunner string
}

// GiteaRunnerCommand is the runner's binary name in its images.
const GiteaRunnerCommand = "gitea-runner"

// RunsGiteaRunnerCommand says whether a runner image container's command is
// the gitea-runner binary itself (as a cache-server pod's is) rather than
// the image's entrypoint: the bed then plays that command.
func RunsGiteaRunnerCommand(kind Kind, command []string) bool {
	return kind == KindGiteaRunner && len(command) > 0 && path.Base(command[0]) == GiteaRunnerCommand
}

// ProcessArgv is the argv that plays a container, or nil for a stand-in.
func ProcessArgv(kind Kind, command, args []string, bin Binaries) []string {
	switch kind {
	case KindScaler:
		if len(command) == 0 {
			// The image's entrypoint is the scaler itself.
			return append([]string{bin.Scaler}, args...)
		}
		argv := append(append([]string{}, command...), args...)
		if path.Base(argv[0]) == ScalerCommand {
			argv[0] = bin.Scaler
		}
		return argv
	case KindGiteaRunner:
		if RunsGiteaRunnerCommand(kind, command) {
			return append(append([]string{bin.GiteaRunner}, command[1:]...), args...)
		}
		// The runner images' entrypoints (s6 supervising dockerd and run.sh in the
		// dind variants, tini running run.sh in the basic one) all come down to
		// run.sh with the container's env: the bed has no Docker, so it runs run.sh.
		// Any other command the pod sets is not played: the bed has only what
		// the image's own contract needs.
		return []string{"bash", bin.Entrypoint}
	case KindSteeredRunner:
		// Configured by environment only.
		return []string{bin.SteeredRunner}
	default:
		return nil
	}
}
