package agent

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runnerArchives lists the runner source archives the bed builds from (one per
// version TESTBED_RUNNER_VERSION can pick).
func runnerArchives(t *testing.T) []string {
	t.Helper()
	archives, err := filepath.Glob("../../../gitea-runner/gitea-runner-*.tar.gz")
	require.NoError(t, err)
	require.NotEmpty(t, archives, "runner source archives in scripts/tools/gitea-runner")
	return archives
}

// runScript reads scripts/run.sh from a runner source archive.
func runScript(t *testing.T, archive string) []byte {
	t.Helper()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		require.NoError(t, err, "scripts/run.sh is in the archive")
		if strings.HasSuffix(h.Name, "/scripts/run.sh") {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			return b
		}
	}
}

func TestPrepareEntrypointRelocatesTheImagesDirectories(t *testing.T) {
	for _, archive := range runnerArchives(t) {
		t.Run(filepath.Base(archive), func(t *testing.T) {
			got, err := PrepareEntrypoint(runScript(t, archive), "/bed/c/data", "/bed/c/tmp")
			require.NoError(t, err)
			s := string(got)
			assert.Contains(t, s, "\ncd /bed/c/data\n")
			assert.Contains(t, s, "mkdir -p /bed/c/data")
			assert.Contains(t, s, "tee /bed/c/tmp/reg.log")
			assert.NotContains(t, s, " /data")
			assert.NotContains(t, s, " /tmp/")
			// The contract itself is untouched.
			for _, kept := range []string{"GITEA_RUNNER_REGISTRATION_TOKEN", "--ephemeral", "exec gitea-runner daemon", "RUNNER_STATE_FILE"} {
				assert.Contains(t, s, kept)
			}
		})
	}
}

func TestPrepareEntrypoint(t *testing.T) {
	tests := map[string]struct {
		in, want, err string
	}{
		"adjacent":    {in: "cd /data\nls /data /data/x\n", want: "cd /d\nls /d /d/x\n"},
		"quoted":      {in: "cd /data\nX=\"/data\"\n", want: "cd /d\nX=\"/d\"\n"},
		"other paths": {in: "cd /data\nls /database /x/data\n", want: "cd /d\nls /database /x/data\n"},
		"tmp":         {in: "cd /data\necho >/tmp/a\ncat /tmp/b\n", want: "cd /d\necho >/t/a\ncat /t/b\n"},
		"nested":      {in: "cd /data\nls /data/data /data/tmp/ /tmp/tmp/\n", want: "cd /d\nls /d/data /d/tmp/ /t/tmp/\n"},
		"no cd":       {in: "mkdir -p /data\n", err: "does not `cd /data`"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := PrepareEntrypoint([]byte(tc.in), "/d", "/t")
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
}

// A bed under /tmp (a clone there) or under a /data folder gives paths
// that look like the image's own: what was put in is never rewritten
// again (a run.sh that changed to /tmp/…/data/…/tmp/… found no .runner).
func TestPrepareEntrypointLeavesTheBedsOwnPathsAlone(t *testing.T) {
	tests := map[string]struct {
		data, tmp string
	}{
		"bed under /tmp":  {"/tmp/ci/.testbed/pod/runner/data", "/tmp/ci/.testbed/pod/runner/tmp"},
		"bed under /data": {"/data/bed/pod/data", "/data/bed/pod/tmp"},
	}
	in := "cd /data\nmkdir -p /data\necho >/tmp/reg.log\nls /data /data/x\n"
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := PrepareEntrypoint([]byte(in), tc.data, tc.tmp)
			require.NoError(t, err)
			want := "cd " + tc.data + "\nmkdir -p " + tc.data + "\necho >" + tc.tmp + "/reg.log\nls " + tc.data + " " + tc.data + "/x\n"
			assert.Equal(t, want, string(got))
		})
	}
}
