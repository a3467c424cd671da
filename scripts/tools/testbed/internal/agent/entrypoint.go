package agent

import (
	"errors"
	"regexp"
	"strings"
)

// The runner image's run.sh works in /data (its state file, .runner, lives there) and
// writes the registration's output to /tmp/reg.log. In a container both are the
// container's own; on the bed every runner is a process on one host, so each
// container start gets its own directories in their place, and the script is
// rewritten to use them. Nothing else in it changes: env names, the registration loop
// and the exec of `gitea-runner daemon` are the image's.
// runnerDataDir is the runner image's working directory, where its .runner lives.
const runnerDataDir = "/data"

// imagePath is where run.sh names /data or /tmp/: after the start of a
// line, a blank, a quote or a redirection, and /data only as a whole path
// segment. The character before is matched; the one after /data is not
// taken (checked by hand), so "/data /data" finds both.
var imagePath = regexp.MustCompile(`(^|[\s"'=<>|])(/data|/tmp/)`)

// PrepareEntrypoint rewrites run.sh from a runner image to work in dataDir instead of
// /data and tmpDir instead of /tmp. It fails when the script no longer changes to
// /data, the contract the bed plays: a newer run.sh must be read before the bed runs
// it. The script is read once, from the start: what it puts in is never rewritten
// again, so a bed whose own folders lie under /tmp or /data is no different.
func PrepareEntrypoint(script []byte, dataDir, tmpDir string) ([]byte, error) {
	if !regexp.MustCompile(`(?m)^\s*cd /data\s*$`).Match(script) {
		return nil, errors.New("run.sh does not `cd /data`: the runner image's entrypoint changed; read it before the bed plays it")
	}
	var out []byte
	done := 0
	for _, loc := range imagePath.FindAllSubmatchIndex(script, -1) {
		pathStart, pathEnd := loc[4], loc[5]
		out = append(out, script[done:pathStart]...)
		switch path := string(script[pathStart:pathEnd]); {
		case path == "/tmp/":
			out = append(out, tmpDir+"/"...)
		case pathEnd == len(script) || strings.IndexByte(" \t\n\"';/", script[pathEnd]) >= 0:
			out = append(out, dataDir...)
		default:
			out = append(out, path...) // /database and the like
		}
		done = pathEnd
	}
	return append(out, script[done:]...), nil
}
