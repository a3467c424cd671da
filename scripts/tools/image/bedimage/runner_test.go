package main

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// archiveFiles reads the files under prefix from a runner source archive,
// by their path inside it (its top folder cut).
func archiveFiles(t *testing.T, archive, prefix string) map[string]*tar.Header {
	t.Helper()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	out := map[string]*tar.Header{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		_, rel, _ := strings.Cut(hdr.Name, "/")
		if !strings.HasPrefix(rel, prefix) {
			continue
		}
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		hdr.PAXRecords = map[string]string{"body": string(body)}
		out[rel] = hdr
	}
}

// stage is what one stage of the archive's Dockerfile says of its image.
type stage struct {
	entrypoint []string
	user       string
	env        []string
	copies     []string // COPY arguments
	runs       []string
}

func dockerfileStages(t *testing.T, dockerfile string) map[string]*stage {
	t.Helper()
	out := map[string]*stage{}
	var cur *stage
	for _, line := range strings.Split(dockerfile, "\n") {
		instr, args, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch strings.ToUpper(instr) {
		case "FROM":
			cur = &stage{}
			if m := regexp.MustCompile(`(?i) AS (\S+)$`).FindStringSubmatch(args); m != nil {
				out[m[1]] = cur
			}
		case "ENTRYPOINT":
			require.NoError(t, json.Unmarshal([]byte(args), &cur.entrypoint), line)
		case "USER":
			cur.user = args
		case "ENV":
			cur.env = append(cur.env, args)
		case "COPY":
			cur.copies = append(cur.copies, args)
		case "RUN":
			cur.runs = append(cur.runs, args)
		}
	}
	return out
}

// TestFlavoursAreTheArchivesStages holds each flavour to its stage of the
// runner's own Dockerfile, in both archives the bed builds: the same
// entrypoint, user and env, the same scripts at the same paths, and the
// same ownership of /etc/s6 and /data.
func TestFlavoursAreTheArchivesStages(t *testing.T) {
	for _, version := range []string{"1.0.8", "3.1.0"} {
		archive := filepath.Join("..", "..", "gitea-runner", "gitea-runner-"+version+".tar.gz")
		stages := dockerfileStages(t, archiveFiles(t, archive, "Dockerfile")["Dockerfile"].PAXRecords["body"])
		for _, f := range Flavours {
			t.Run(version+"/"+f.Name, func(t *testing.T) {
				st := stages[cmp.Or(f.Stage, f.Name)]
				require.NotNil(t, st, "the Dockerfile has a stage %s", cmp.Or(f.Stage, f.Name))
				assert.Equal(t, st.entrypoint, f.Entrypoint)
				assert.Equal(t, st.user, f.User)
				assert.Equal(t, st.env, f.Env)
				if f.RuntimeDir != "" {
					assert.Equal(t, []string{"DOCKER_HOST=unix://" + f.RuntimeDir + "/docker.sock"}, st.env, "the daemon's socket is in the runtime directory")
				}
				assert.Contains(t, st.copies, "scripts/run.sh /usr/local/bin/run.sh")
				assert.Equal(t, f.S6, contains(st.copies, "scripts/s6 /etc/s6"), "copies scripts/s6")
				chowns := contains(st.runs, "mkdir -p /data && chown -R rootless:rootless /etc/s6 /data")
				assert.Equal(t, chowns, f.StateUID == 1000, "/etc/s6 and /data belong to rootless")
			})
		}
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// TestRunnerImage builds every flavour over a small base and reads back
// its config and the files it adds.
func TestRunnerImage(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) string {
		p := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o755))
		return p
	}
	files := RunnerFiles{
		Binary:       write("gitea-runner", "runner binary"),
		DockerdStart: write("dockerd-entrypoint.sh", "#!/bin/sh\n"),
		Scripts:      filepath.Join(dir, "scripts"),
	}
	write("scripts/run.sh", "#!/bin/bash\ncd /data\n")
	write("scripts/s6/docker/run", "#!/bin/bash\n")
	write("scripts/s6/gitea-runner/run", "#!/bin/bash\n")
	base, err := tarLayer([]tarEntry{
		{name: "/etc/os-release", mode: 0o644, data: []byte("ID=debian\n")},
		{name: "/etc/subuid", mode: 0o644, data: []byte("rootless:100000:65536\n")},
		{name: "/usr/bin/newgidmap", mode: 0o4755, data: []byte("newgidmap")},
		{name: "/usr/bin/newuidmap", mode: 0o4755, data: []byte("newuidmap")},
	})
	require.NoError(t, err)

	for _, f := range Flavours {
		t.Run(f.Name, func(t *testing.T) {
			img, err := RunnerImage(base, f, files)
			require.NoError(t, err)
			cf, err := img.ConfigFile()
			require.NoError(t, err)
			assert.Equal(t, "linux/amd64", cf.OS+"/"+cf.Architecture)
			assert.Equal(t, f.Entrypoint, cf.Config.Entrypoint)
			assert.Equal(t, f.User, cf.Config.User)
			assert.Contains(t, cf.Config.Env, basePath)
			for _, v := range f.Volumes {
				assert.Contains(t, cf.Config.Volumes, v)
			}
			layers, err := img.Layers()
			require.NoError(t, err)
			require.Len(t, layers, 2, "the base as it is, then the runner's files")
			bd, _ := base.Digest()
			ld, _ := layers[0].Digest()
			assert.Equal(t, bd, ld)

			got := flatten(t, img)
			assert.Equal(t, "ID=debian\n", got["/etc/os-release"].PAXRecords["body"])
			assert.Equal(t, "runner binary", got["/usr/local/bin/gitea-runner"].PAXRecords["body"])
			assert.Equal(t, "#!/bin/bash\ncd /data\n", got["/usr/local/bin/run.sh"].PAXRecords["body"])
			for _, p := range []string{"/usr/local/bin/gitea-runner", "/usr/local/bin/run.sh"} {
				assert.Equal(t, int64(0o755), got[p].Mode, p)
				assert.Zero(t, got[p].Uid, "%s is root's", p)
			}
			assert.Equal(t, f.StateUID, got["/data"].Uid, "/data's owner")
			if f.RuntimeDir != "" {
				assert.Equal(t, f.StateUID, got[f.RuntimeDir].Uid, "the runtime directory's owner")
				assert.Equal(t, int64(0o700), got[f.RuntimeDir].Mode)
			}
			for _, dir := range f.UserDirs {
				for d := dir; d != rootlessHome; d = path.Dir(d) {
					require.Contains(t, got, d)
					assert.Equal(t, f.StateUID, got[d].Uid, "%s's owner", d)
					assert.Equal(t, byte(tar.TypeDir), got[d].Typeflag, d)
				}
			}
			// newuidmap and newgidmap: setuid root, or (user-namespaced) only
			// the one capability each needs, in the format every user
			// namespace honours: revision 2, effective, bit 7 (setuid) or
			// 6 (setgid) permitted.
			caps := map[string]string{
				"/usr/bin/newuidmap": "\x01\x00\x00\x02\x80\x00\x00\x00" + strings.Repeat("\x00", 12),
				"/usr/bin/newgidmap": "\x01\x00\x00\x02\x40\x00\x00\x00" + strings.Repeat("\x00", 12),
			}
			for p, c := range caps {
				xattr, has := got[p].PAXRecords["SCHILY.xattr.security.capability"]
				if f.UserNamespaced {
					assert.Equal(t, c, xattr, p)
					assert.Equal(t, int64(0o755), got[p].Mode, "%s has no setuid bit", p)
					assert.Equal(t, strings.TrimPrefix(p, "/usr/bin/"), got[p].PAXRecords["body"], "%s is the base's", p)
				} else {
					assert.False(t, has, p)
					assert.Equal(t, int64(0o4755), got[p].Mode, p)
				}
			}
			wantSubuid := "rootless:100000:65536\n"
			if f.UserNamespaced {
				wantSubuid = "rootless:1:999\nrootless:1001:64535\n"
				assert.Equal(t, wantSubuid, got["/etc/subgid"].PAXRecords["body"])
			}
			assert.Equal(t, wantSubuid, got["/etc/subuid"].PAXRecords["body"])
			_, hasEntrypoint := got["/usr/local/bin/dockerd-entrypoint.sh"]
			assert.Equal(t, f.S6, hasEntrypoint, "dockerd-entrypoint.sh")
			for _, p := range []string{"/etc/s6", "/etc/s6/docker/run", "/etc/s6/gitea-runner/run"} {
				e, ok := got[p]
				assert.Equal(t, f.S6, ok, p)
				if ok {
					assert.Equal(t, f.StateUID, e.Uid, "%s's owner", p)
				}
			}
		})
	}
}

func TestJobImage(t *testing.T) {
	base, err := tarLayer([]tarEntry{{name: "/usr/bin/node", mode: 0o755, data: []byte("node")}})
	require.NoError(t, err)
	img, err := JobImage(base)
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, []string{"bash"}, cf.Config.Cmd)
	assert.Empty(t, cf.Config.Entrypoint, "act runs its own command in the job container")
	assert.Equal(t, "node", flatten(t, img)["/usr/bin/node"].PAXRecords["body"])
}

// TestBaseLayerFromAGzippedFile: a cached root file system is pushed as
// the file it is, so its digest is the file's and a warm push sends nothing.
func TestBaseLayerFromAGzippedFile(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755}))
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	p := filepath.Join(t.TempDir(), "base.tar.gz")
	require.NoError(t, os.WriteFile(p, buf.Bytes(), 0o644))
	l, err := tarball.LayerFromFile(p)
	require.NoError(t, err)
	d, err := l.Digest()
	require.NoError(t, err)
	want, _, err := v1.SHA256(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	assert.Equal(t, want, d)
}

// flatten reads the image's files as a runtime lays them out, each
// header carrying its content as PAXRecords["body"].
func flatten(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]*tar.Header{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		if hdr.PAXRecords == nil {
			hdr.PAXRecords = map[string]string{}
		}
		hdr.PAXRecords["body"] = string(body)
		out["/"+strings.TrimSuffix(hdr.Name, "/")] = hdr
	}
}
