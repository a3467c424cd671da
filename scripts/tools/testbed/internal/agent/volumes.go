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

// mountConfigMaps plays the kubelet's configMap volumes for one container:
// each configMap volume the container mounts is written, one file per key,
// under dir/<volume>, and the result maps each mount path to that directory.
// The container is a process on this host, so it cannot see the mount path
// itself; rewriteMountPaths points its env at the copies. Other volume types
// are left out, but emptyDir volumes: each is one directory of the pod,
// podDir/emptydir/<volume>, shared by its containers (an init container
// writes a file there that a main container reads).
func mountConfigMaps(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, c *corev1.Container, dir, podDir string) (map[string]string, error) {
	volumes := map[string]*corev1.ConfigMapVolumeSource{}
	emptyDirs := map[string]bool{}
	for i := range pod.Spec.Volumes {
		if v := pod.Spec.Volumes[i]; v.ConfigMap != nil {
			volumes[v.Name] = v.ConfigMap
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
		cm, err := res.configMap(ctx, src.Name, src.Optional)
		if err != nil {
			return nil, err
		}
		out := filepath.Join(dir, m.Name)
		if err := os.MkdirAll(out, 0o755); err != nil {
			return nil, err
		}
		if cm != nil {
			files := cm.Data
			if len(src.Items) > 0 {
				// As the kubelet: only the listed keys, each at its
				// path; a listed key the ConfigMap lacks fails the
				// mount unless the volume is optional.
				files = map[string]string{}
				for _, it := range src.Items {
					v, ok := cm.Data[it.Key]
					if !ok {
						if src.Optional != nil && *src.Optional {
							continue
						}
						return nil, fmt.Errorf("configmap %q references non-existent config key %q", src.Name, it.Key)
					}
					files[it.Path] = v
				}
			}
			for k, v := range files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(out, k)), 0o755); err != nil {
					return nil, err
				}
				if err := writeFileAtomic(filepath.Join(out, k), []byte(v), 0o644); err != nil {
					return nil, err
				}
			}
		}
		mounts[filepath.Clean(m.MountPath)] = out
	}
	return mounts, nil
}

// rewriteMountPaths replaces, in every env value that is a path at or under
// a mount path, that mount path with where mountConfigMaps wrote the volume.
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
