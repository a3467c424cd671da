//go:build e2e

package e2e

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// RunnerImages are Gitea's runner flavours and the job image that
// scripts/testbed pushes for the real node.
type RunnerImages struct {
	Repo     string // REGISTRY/gitea/runner, as the node pulls it
	Versions []string
	Job      string // the job image, as a Docker daemon in a pod pulls it
}

// RunnerImages pushes the runner images once per bed, for the first test
// that needs them: up leaves them out, as most runs never start a runner
// pod on the real node. The lock keeps two areas from pushing at once and
// the second waits for the first's push.
func (b *Testbed) RunnerImages(t *testing.T) RunnerImages {
	t.Helper()
	l := hold(t, filepath.Join(lockDir(t), "runner-images.lock"), syscall.LOCK_EX)
	defer l.release()
	path := filepath.Join(b.Dir, "runner-images.env")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		cmd := exec.Command(filepath.Join(b.Root, "scripts", "testbed"), "runner-images")
		cmd.Env = append(os.Environ(), "TESTBED_DIR="+b.Dir)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "scripts/testbed runner-images:\n%s", out)
	}
	env, err := ReadEnvFile(path)
	require.NoError(t, err)
	im := RunnerImages{Repo: env["RUNNER_IMAGE_REPO"], Versions: strings.Fields(env["RUNNER_IMAGE_VERSIONS"]), Job: env["JOB_IMAGE"]}
	require.NotContains(t, []string{im.Repo, im.Job}, "", "%s lacks a key: %v", path, env)
	return im
}
