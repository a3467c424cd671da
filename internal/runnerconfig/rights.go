package runnerconfig

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// SafeOptions are the docker run flags container.options may carry outside
// privileged namespaces: each changes only the job container's own
// resources, env, names or DNS, never what it can reach of the runner pod
// or the node. Every other flag (--privileged, --cap-add, -v, --mount,
// --device, --pid, --ipc, --network, --security-opt, --env-file, ...) is
// refused there: an allow list, so a flag that a later Docker adds stays
// refused until it is judged here.
var SafeOptions = []string{
	"--add-host", "--env", "--label", "--memory", "--memory-reservation", "--memory-swap",
	"--cpus", "--cpu-shares", "--cpuset-cpus", "--shm-size", "--ulimit", "--dns",
	"--dns-search", "--dns-option", "--hostname", "--user", "--workdir", "--tmpfs",
	"--pids-limit", "--init", "--platform", "--stop-timeout", "--stop-signal",
}

// safeShort are the one-letter forms of SafeOptions; each takes a value.
var safeShort = map[byte]string{'e': "--env", 'l': "--label", 'm': "--memory", 'c': "--cpu-shares", 'h': "--hostname", 'u': "--user", 'w': "--workdir"}

// plainOptions are options that split the same on spaces as with the
// shell-like splitting the runner does: no quotes, no backslashes. Outside
// privileged namespaces options must be plain, so the check reads the
// flags the runner will read.
var plainOptions = regexp.MustCompile(`^[A-Za-z0-9 \t=:._,/@+%-]*$`)

// dockerVolumeName is a named Docker volume: no '/', no glob, so it cannot
// match a host path.
var dockerVolumeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// NeedsPrivileged lists what a merged config gives job containers that
// only a namespace whose Pod Security level is privileged allows, each
// naming the field. The runner's Docker daemon is the runner pod's own in
// the built-in pod, but the platform's runner template may point it
// elsewhere, so the scaler cannot bound what a privileged job container or
// a host path reaches; the namespace's level, which only a cluster admin
// sets, decides, as it decides for the runner pod itself.
func NeedsPrivileged(c v1alpha1.RunnerConfig) []string {
	k := c.Container
	if k == nil {
		return nil
	}
	out := UserNamespacedCannot(c)
	for _, v := range k.ValidVolumes {
		if !dockerVolumeName.MatchString(v) {
			out = append(out, fmt.Sprintf("container.valid_volumes %q (a path or a glob: bind mounts into job containers)", v))
		}
	}
	if k.DockerHost != nil && *k.DockerHost != "" && *k.DockerHost != "-" {
		out = append(out, fmt.Sprintf("container.docker_host %q (another Docker daemon than the runner pod's)", *k.DockerHost))
	}
	if k.Options != nil {
		if err := checkOptions(*k.Options); err != nil {
			out = append(out, "container.options: "+err.Error())
		}
	}
	return out
}

// UserNamespacedCannot lists what a merged config asks of job containers
// that a user-namespaced runner pod's Docker daemon cannot give, each
// naming the field: it holds no privilege to hand a container (runc
// cannot mount /sys for it), and the pod's network namespace is not its
// own to put a container in (the chart's docs/runner-pods.md, rows 6 and
// 7 of what was tried).
// Both are also what NeedsPrivileged lists first.
func UserNamespacedCannot(c v1alpha1.RunnerConfig) []string {
	k := c.Container
	if k == nil {
		return nil
	}
	var out []string
	if k.Privileged != nil && *k.Privileged {
		out = append(out, "container.privileged: true (privileged job containers)")
	}
	if k.Network != nil && *k.Network == "host" {
		out = append(out, "container.network: host (job containers on the runner's host network)")
	}
	return out
}

// checkOptions says why options carry more than SafeOptions.
func checkOptions(options string) error {
	if !plainOptions.MatchString(options) {
		return errors.New("quotes, backslashes and other shell characters are refused outside privileged namespaces")
	}
	var bad []string
	for _, tok := range strings.Fields(options) {
		if !strings.HasPrefix(tok, "-") {
			continue // a value
		}
		if strings.HasPrefix(tok, "--") {
			name, _, _ := strings.Cut(tok, "=")
			if !slices.Contains(SafeOptions, name) {
				bad = append(bad, name)
			}
			continue
		}
		// -eFOO=bar, -m 1g: a one-letter flag and its value.
		if len(tok) < 2 || safeShort[tok[1]] == "" {
			bad = append(bad, tok)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s not among the flags allowed outside privileged namespaces", strings.Join(bad, ", "))
	}
	return nil
}
