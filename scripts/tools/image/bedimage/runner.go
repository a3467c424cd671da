package main

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Flavour is one of Gitea's runner images, as its Dockerfile's stage of the
// same name makes it: what runs first, as whom, with which env and volumes.
type Flavour struct {
	Name string
	// Stage is the archive's Dockerfile stage the image is, when not Name.
	Stage string
	// Suffix follows the version in the tag: upstream's basic image is the
	// bare version.
	Suffix     string
	Entrypoint []string
	User       string
	// Env beyond PATH.
	Env     []string
	Volumes []string
	// S6 says the image supervises a Docker daemon and the runner with s6
	// (the archive's scripts/s6 at /etc/s6) and carries dockerd-entrypoint.sh.
	S6 bool
	// StateUID owns /data and /etc/s6: s6-svscan writes its supervise
	// directories there as the image's user.
	StateUID int
	// RuntimeDir is the rootless daemon's XDG_RUNTIME_DIR, where its
	// DOCKER_HOST socket goes, the user's own.
	RuntimeDir string
	// UserDirs are folders of the user's home its Docker daemon writes,
	// made in the image with their parents below the home and owned by
	// StateUID: the data root, as upstream's base image makes it (the daemon
	// sets its mode at every start, which only its owner may, and a volume
	// the runtime makes there from the image keeps that owner), and the
	// config folder, where Debian's Docker 20.10 writes key.json and where a
	// daemon.json mounted by subPath would otherwise have the runtime make
	// it root's.
	UserDirs []string
	// UserNamespaced makes the rootless daemon start in a pod with
	// hostUsers: false, whose user namespace maps 65536 ids: newuidmap and
	// newgidmap with file capabilities (cap_setuid, cap_setgid) instead of
	// the setuid bit, which cannot write a map from inside such a pod, and
	// the subordinate ids within the pod's range (1-999, 1001-65535). What
	// the runner-pods doc's Dockerfile does to upstream's image.
	UserNamespaced bool
}

// rootlessHome is the rootless user's home, which rootfs.sh makes.
const rootlessHome = "/home/rootless"

const basePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Flavours are the three images of Gitea's runner, and dind-rootless made
// ready for user-namespaced pods. The Docker volumes are upstream's base
// images' (docker:dind and docker:dind-rootless).
var Flavours = []Flavour{
	dindRootless,
	userNamespaced(dindRootless),
	{
		Name: "dind", Suffix: "-dind",
		Entrypoint: []string{"s6-svscan", "/etc/s6"},
		Volumes:    []string{"/data", "/var/lib/docker"},
		S6:         true,
	},
	{
		Name:       "basic",
		Entrypoint: []string{"/sbin/tini", "--", "run.sh"},
		Volumes:    []string{"/data"},
	},
}

var dindRootless = Flavour{
	Name: "dind-rootless", Suffix: "-dind-rootless",
	Entrypoint: []string{"s6-svscan", "/etc/s6"},
	User:       "rootless",
	Env:        []string{"DOCKER_HOST=unix:///run/user/1000/docker.sock"},
	Volumes:    []string{"/data", "/home/rootless/.local/share/docker"},
	S6:         true, StateUID: 1000, RuntimeDir: "/run/user/1000",
	UserDirs: []string{rootlessHome + "/.local/share/docker", rootlessHome + "/.config/docker"},
}

// userNamespaced is f made ready for a user namespace, as its own tag.
func userNamespaced(f Flavour) Flavour {
	f.Stage = f.Name
	f.Name += "-userns"
	f.Suffix += "-userns"
	f.UserNamespaced = true
	return f
}

// RunnerFiles are what an image adds to the Debian base: the runner, the
// archive's run.sh and, for the s6 flavours, its s6 services and the
// Docker daemon's entrypoint.
type RunnerFiles struct {
	Binary       string // the gitea-runner built from the archive
	Scripts      string // the archive's scripts/ folder (run.sh, s6/)
	DockerdStart string // dockerd-entrypoint.sh
}

// RunnerImage is the flavour f of the runner over base (a gzipped tar of
// a root file system, which stays the image's first layer as it is).
func RunnerImage(base v1.Layer, f Flavour, files RunnerFiles) (v1.Image, error) {
	var ents []tarEntry
	if f.UserNamespaced {
		uns, err := userNamespacedEntries(base)
		if err != nil {
			return nil, err
		}
		ents = append(ents, uns...)
	}
	add := func(src, dst string, uid int) error {
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		ents = append(ents, tarEntry{name: dst, mode: 0o755, uid: uid, data: data})
		return nil
	}
	if err := add(files.Binary, "/usr/local/bin/gitea-runner", 0); err != nil {
		return nil, err
	}
	if err := add(filepath.Join(files.Scripts, "run.sh"), "/usr/local/bin/run.sh", 0); err != nil {
		return nil, err
	}
	ents = append(ents, tarEntry{name: "/data", dir: true, mode: 0o755, uid: f.StateUID})
	if f.RuntimeDir != "" {
		ents = append(ents, tarEntry{name: f.RuntimeDir, dir: true, mode: 0o700, uid: f.StateUID})
	}
	made := map[string]bool{}
	for _, dir := range f.UserDirs {
		for d := dir; d != rootlessHome && !made[d]; d = path.Dir(d) {
			made[d] = true
			ents = append(ents, tarEntry{name: d, dir: true, mode: 0o755, uid: f.StateUID})
		}
	}
	if f.S6 {
		if err := add(files.DockerdStart, "/usr/local/bin/dockerd-entrypoint.sh", 0); err != nil {
			return nil, err
		}
		s6, err := treeEntries(filepath.Join(files.Scripts, "s6"), "/etc/s6", f.StateUID)
		if err != nil {
			return nil, err
		}
		ents = append(ents, s6...)
	}
	layer, err := tarLayer(ents)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, base, layer)
	if err != nil {
		return nil, err
	}
	return withConfig(img, func(c *v1.Config) {
		c.Entrypoint = f.Entrypoint
		c.User = f.User
		c.Env = append([]string{basePath}, f.Env...)
		c.Volumes = map[string]struct{}{}
		for _, v := range f.Volumes {
			c.Volumes[v] = struct{}{}
		}
	})
}

// JobImage is the base alone, with bash as its command: what a `docker://`
// label names for a job's container.
func JobImage(base v1.Layer) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, base)
	if err != nil {
		return nil, err
	}
	return withConfig(img, func(c *v1.Config) {
		c.Cmd = []string{"bash"}
		c.Env = []string{basePath}
	})
}

func withConfig(img v1.Image, set func(*v1.Config)) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	set(&cf.Config)
	return mutate.ConfigFile(img, cf)
}

type tarEntry struct {
	name string
	dir  bool
	mode int64
	uid  int
	data []byte
	// capabilities is the file's security.capability extended attribute.
	capabilities []byte
}

// subordinateIDs are the rootless user's subordinate ids inside a pod's
// user namespace of 65536 ids: all but root's (0) and its own (1000).
const subordinateIDs = "rootless:1:999\nrootless:1001:64535\n"

// Linux's capability numbers and its version 2 file-capability format
// (linux/capability.h: VFS_CAP_REVISION_2, VFS_CAP_FLAGS_EFFECTIVE), which
// is valid in every user namespace.
const (
	capSetgid = 6
	capSetuid = 7
)

func fileCapability(capability int) []byte {
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], 0x02000000|0x1) // revision 2, effective
	binary.LittleEndian.PutUint32(b[4:], 1<<capability)  // permitted, low word
	return b
}

// userNamespacedEntries are the files Flavour.UserNamespaced changes:
// the base's newuidmap and newgidmap, without the setuid bit and with the
// one capability each needs, and the subordinate ids.
func userNamespacedEntries(base v1.Layer) ([]tarEntry, error) {
	want := map[string]int{"usr/bin/newuidmap": capSetuid, "usr/bin/newgidmap": capSetgid}
	rc, err := base.Uncompressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	ents := []tarEntry{
		{name: "/etc/subuid", mode: 0o644, data: []byte(subordinateIDs)},
		{name: "/etc/subgid", mode: 0o644, data: []byte(subordinateIDs)},
	}
	tr := tar.NewReader(rc)
	for len(want) > 0 {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("the base has no %v", want)
		}
		if err != nil {
			return nil, err
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		c, ok := want[name]
		if !ok {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		ents = append(ents, tarEntry{name: "/" + name, mode: 0o755, data: data, capabilities: fileCapability(c)})
		delete(want, name)
	}
	return ents, nil
}

// treeEntries are the files and folders under src, at dst, owned by uid,
// with their modes as the archive has them.
func treeEntries(src, dst string, uid int) ([]tarEntry, error) {
	var out []tarEntry
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := tarEntry{name: path.Join(dst, filepath.ToSlash(rel)), dir: d.IsDir(), mode: int64(info.Mode().Perm()), uid: uid}
		if !d.IsDir() {
			if e.data, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// tarLayer writes the entries sorted, with a fixed time, so the same files
// give the same digest and a push finds the layer already there.
func tarLayer(ents []tarEntry) (v1.Layer, error) {
	sort.Slice(ents, func(i, j int) bool { return ents[i].name < ents[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		hdr := &tar.Header{Name: strings.TrimPrefix(e.name, "/"), Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		if e.capabilities != nil {
			hdr.Format = tar.FormatPAX
			hdr.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": string(e.capabilities)}
		}
		if e.dir {
			hdr.Name += "/"
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
}

// runRunner pushes the three flavours of one runner version as
// REGISTRY/gitea/runner:VERSION[-flavour].
func runRunner(args []string) error {
	fs := flag.NewFlagSet("runner", flag.ContinueOnError)
	base := fs.String("base", "", "gzipped tar of the runner images' root file system")
	var files RunnerFiles
	fs.StringVar(&files.Binary, "binary", "", "gitea-runner")
	fs.StringVar(&files.Scripts, "scripts", "", "the runner archive's scripts/ folder")
	fs.StringVar(&files.DockerdStart, "dockerd-entrypoint", "", "dockerd-entrypoint.sh")
	version := fs.String("version", "", "the runner's version, as the tags carry it (3.1.0)")
	registry := fs.String("registry", "", "HOST:PORT of the registry")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *base == "" || files.Binary == "" || files.Scripts == "" || files.DockerdStart == "" || *version == "" || *registry == "" {
		return errors.New("runner: -base, -binary, -scripts, -dockerd-entrypoint, -version and -registry are required")
	}
	// One layer object for every flavour: its digests are computed once.
	baseLayer, err := tarball.LayerFromFile(*base)
	if err != nil {
		return err
	}
	for _, f := range Flavours {
		img, err := RunnerImage(baseLayer, f, files)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		if err := push(img, fmt.Sprintf("%s/gitea/runner:%s%s", *registry, *version, f.Suffix)); err != nil {
			return err
		}
	}
	return nil
}

// runJob pushes the job image.
func runJob(args []string) error {
	fs := flag.NewFlagSet("job", flag.ContinueOnError)
	base := fs.String("base", "", "gzipped tar of the job image's root file system")
	ref := fs.String("ref", "", "REGISTRY/NAME:TAG to push to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *base == "" || *ref == "" {
		return errors.New("job: -base and -ref are required")
	}
	l, err := tarball.LayerFromFile(*base)
	if err != nil {
		return err
	}
	img, err := JobImage(l)
	if err != nil {
		return err
	}
	return push(img, *ref)
}

func push(img v1.Image, ref string) error {
	r, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		return err
	}
	if err := remote.Write(r, img); err != nil {
		return fmt.Errorf("push %s: %w", r, err)
	}
	d, _ := img.Digest()
	fmt.Printf("pushed %s@%s\n", r, d)
	return nil
}
