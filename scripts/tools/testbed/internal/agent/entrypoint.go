package agent

import (
	"errors"
	"regexp"
)

// The runner image's run.sh works in /data (its state file, .runner, lives there) and
// writes the registration's output to /tmp/reg.log. In a container both are the
// container's own; on the bed every runner is a process on one host, so each
// container start gets its own directories in their place, and the script is
// rewritten to use them. Nothing else in it changes: env names, the registration loop
// and the exec of `gitea-runner daemon` are the image's.
// runnerDataDir is the runner image's working directory, where its .runner lives.
const runnerDataDir = "/data"

var (
	dataPath = regexp.MustCompile(`(^|[\s"'=<>|])/data([\s"';/]|$)`)
	tmpPath  = regexp.MustCompile(`(^|[\s"'=<>|])/tmp/`)
)

// PrepareEntrypoint rewrites run.sh from a runner image to work in dataDir instead of
// /data and tmpDir instead of /tmp. It fails when the script no longer changes to
// /data, the contract the bed plays: a newer run.sh must be read before the bed runs
// it.
func PrepareEntrypoint(script []byte, dataDir, tmpDir string) ([]byte, error) {
	if !regexp.MustCompile(`(?m)^\s*cd /data\s*$`).Match(script) {
		return nil, errors.New("run.sh does not `cd /data`: the runner image's entrypoint changed; read it before the bed plays it")
	}
	out := script
	// A match takes the character after /data, so a second /data right after it is
	// left for the next round.
	for dataPath.Match(out) {
		out = dataPath.ReplaceAll(out, []byte("${1}"+dataDir+"${2}"))
	}
	return tmpPath.ReplaceAll(out, []byte("${1}"+tmpDir+"/")), nil
}
