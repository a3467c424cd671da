package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// mountVolumes plays the kubelet's configMap and secret volumes for one
// container: each such volume the container mounts is written, one file per
// key (or per item, at its path), under dir/<volume>, and the result maps
// each mount path to that directory, or to the file a subPath names. The
// container is a process on this host, so it cannot see the mount path
// itself; rewriteMountPaths points its env at the copies, and a runner's
// fresh layer links what is mounted under /data. The kubelet mounts these
// volumes read-only; a host process gets no read-only mount, so the files
// lose their write bits instead. Other volume types are left out, but
// emptyDir volumes: each is one directory of the pod,
// podDir/emptydir/<volume>, shared by its containers (an init container
// writes a file there that a main container reads).
func mountVolumes(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, c *corev1.Container, dir, podDir string) (map[string]string, error) {
	volumes := map[string]corev1.VolumeSource{}
	emptyDirs := map[string]bool{}
	for i := range pod.Spec.Volumes {
		if v := pod.Spec.Volumes[i]; v.ConfigMap != nil || v.Secret != nil {
			volumes[v.Name] = v.VolumeSource
		} else if v.EmptyDir != nil {
			emptyDirs[v.Name] = true
		}
	}
	res := newEnvResolver(client, pod)
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		if emptyDirs[m.Name] {
			out := filepath.Join(podDir, "emptydir", m.Name)
			if err := os.MkdirAll(out, 0o755); err != nil {
				return nil, err
			}
			mounts[filepath.Clean(m.MountPath)] = out
			continue
		}
		src, ok := volumes[m.Name]
		if !ok {
			continue
		}
		p, err := projectionOf(ctx, res, src)
		if err != nil {
			return nil, err
		}
		out := filepath.Join(dir, m.Name)
		if err := p.write(out); err != nil {
			return nil, err
		}
		mounts[filepath.Clean(m.MountPath)] = filepath.Join(out, m.SubPath)
	}
	return mounts, nil
}

// projection is what the kubelet writes for a configMap or secret volume.
type projection struct {
	kind, name  string
	data        map[string][]byte
	items       []corev1.KeyToPath
	defaultMode *int32
	optional    bool
}

// projectionOf reads the object a configMap or secret volume names. A
// missing object that is optional projects nothing.
func projectionOf(ctx context.Context, res *envResolver, src corev1.VolumeSource) (projection, error) {
	if cm := src.ConfigMap; cm != nil {
		p := projection{kind: "configmap", name: cm.Name, items: cm.Items, defaultMode: cm.DefaultMode, optional: cm.Optional != nil && *cm.Optional}
		obj, err := res.configMap(ctx, cm.Name, cm.Optional)
		if err != nil || obj == nil {
			return p, err
		}
		p.data = map[string][]byte{}
		for k, v := range obj.Data {
			p.data[k] = []byte(v)
		}
		for k, v := range obj.BinaryData {
			p.data[k] = v
		}
		return p, nil
	}
	s := src.Secret
	p := projection{kind: "secret", name: s.SecretName, items: s.Items, defaultMode: s.DefaultMode, optional: s.Optional != nil && *s.Optional}
	obj, err := res.secret(ctx, s.SecretName, s.Optional)
	if err != nil || obj == nil {
		return p, err
	}
	p.data = obj.Data
	return p, nil
}

// write writes the projection's files under out: every key, or only the
// listed items, each at its path with its mode (the item's, else the
// volume's defaultMode, else 0644), without write bits. A listed key the
// object lacks fails the mount, as it keeps the kubelet's pod from
// starting, unless the volume is optional.
func (p projection) write(out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if p.data == nil {
		return nil
	}
	mode := int32(0o644)
	if p.defaultMode != nil {
		mode = *p.defaultMode
	}
	type file struct {
		data []byte
		mode int32
	}
	files := map[string]file{}
	if len(p.items) == 0 {
		for k, v := range p.data {
			files[k] = file{v, mode}
		}
	}
	for _, it := range p.items {
		v, ok := p.data[it.Key]
		if !ok {
			if p.optional {
				continue
			}
			return fmt.Errorf("%s %q references non-existent key %q", p.kind, p.name, it.Key)
		}
		m := mode
		if it.Mode != nil {
			m = *it.Mode
		}
		files[it.Path] = file{v, m}
	}
	for k, f := range files {
		path := filepath.Join(out, k)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := writeFileAtomic(path, f.data, os.FileMode(f.mode)&^0o222); err != nil {
			return err
		}
	}
	return nil
}

// rewriteMountPaths replaces, in every env value that is a path at or under
// a mount path, that mount path with where mountVolumes wrote the volume.
func rewriteMountPaths(env *Env, mounts map[string]string) {
	if len(mounts) == 0 {
		return
	}
	paths := make([]string, 0, len(mounts))
	for p := range mounts {
		paths = append(paths, p)
	}
	// The longest mount path first: the deepest mount wins.
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	for _, name := range env.Names() {
		v, _ := env.Get(name)
		for _, p := range paths {
			if v == p || strings.HasPrefix(v, p+"/") {
				env.Set(name, mounts[p]+strings.TrimPrefix(v, p))
				break
			}
		}
	}
}
