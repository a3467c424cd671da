package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func ptr[T any](v T) *T { return &v }

func TestResolveEnv(t *testing.T) {
	objects := []any{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "reg", Namespace: "ns"}, Data: map[string][]byte{"token": []byte("s3cret"), "other": []byte("x")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"}, Data: map[string]string{"URL": "http://gitea", "bad key": "skipped"}},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", Labels: map[string]string{"app": "runner"}},
		Spec:       corev1.PodSpec{NodeName: "n1", ServiceAccountName: "sa"},
	}
	tests := map[string]struct {
		container corev1.Container
		want      map[string]string
		wantOrder []string
		wantErr   string
	}{
		"literals expand earlier variables": {
			container: corev1.Container{Env: []corev1.EnvVar{
				{Name: "A", Value: "one"}, {Name: "B", Value: "$(A)-two"}, {Name: "C", Value: "$$(A) $(MISSING)"},
			}},
			want:      map[string]string{"A": "one", "B": "one-two", "C": "$(A) $(MISSING)"},
			wantOrder: []string{"A", "B", "C"},
		},
		"secret and configmap keys": {
			container: corev1.Container{Env: []corev1.EnvVar{
				{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "reg"}, Key: "token"}}},
				{Name: "URL", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "URL"}}},
			}},
			want: map[string]string{"TOKEN": "s3cret", "URL": "http://gitea"},
		},
		"optional missing secret and key are skipped": {
			container: corev1.Container{Env: []corev1.EnvVar{
				{Name: "A", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Key: "k", Optional: ptr(true)}}},
				{Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "reg"}, Key: "nope", Optional: ptr(true)}}},
			}},
			want: map[string]string{},
		},
		"missing secret is a config error naming it": {
			container: corev1.Container{Env: []corev1.EnvVar{
				{Name: "A", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Key: "k"}}},
			}},
			wantErr: `secret "nope" not found`,
		},
		"missing key is a config error that does not leak values": {
			container: corev1.Container{Env: []corev1.EnvVar{
				{Name: "A", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "reg"}, Key: "k"}}},
			}},
			wantErr: "couldn't find key k in Secret ns/reg",
		},
		"envFrom with prefix, env wins, invalid names skipped": {
			container: corev1.Container{
				EnvFrom: []corev1.EnvFromSource{
					{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "reg"}}, Prefix: "R_"},
					{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
					{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Optional: ptr(true)}},
				},
				Env: []corev1.EnvVar{{Name: "URL", Value: "override"}},
			},
			want:      map[string]string{"R_other": "x", "R_token": "s3cret", "URL": "override"},
			wantOrder: []string{"R_other", "R_token", "URL"},
		},
		"downward API fields": {
			container: corev1.Container{Env: []corev1.EnvVar{
				{Name: "NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
				{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
				{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
				{Name: "APP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
			}},
			want: map[string]string{"NAME": "p", "NS": "ns", "NODE": "n1", "IP": PodIP, "APP": "runner"},
		},
		"resource limits round up": {
			container: corev1.Container{
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}},
				Env:       []corev1.EnvVar{{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}}},
			},
			want: map[string]string{"CPU": "2"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset()
			for _, o := range objects {
				switch o := o.(type) {
				case *corev1.Secret:
					_, err := client.CoreV1().Secrets(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{})
					require.NoError(t, err)
				case *corev1.ConfigMap:
					_, err := client.CoreV1().ConfigMaps(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{})
					require.NoError(t, err)
				}
			}
			env, err := ResolveEnv(context.Background(), client, pod, &tc.container)
			if tc.wantErr != "" {
				require.Error(t, err)
				var ce *ConfigError
				assert.ErrorAs(t, err, &ce)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.NotContains(t, err.Error(), "s3cret")
				return
			}
			require.NoError(t, err)
			got := map[string]string{}
			for _, n := range env.Names() {
				got[n], _ = env.Get(n)
			}
			assert.Equal(t, tc.want, got)
			if tc.wantOrder != nil {
				assert.Equal(t, tc.wantOrder, env.Names())
			}
		})
	}
}

func TestExpand(t *testing.T) {
	env := &Env{}
	env.Set("A", "x")
	tests := map[string]struct{ in, want string }{
		"no reference":        {"plain", "plain"},
		"reference":           {"$(A)/y", "x/y"},
		"escaped":             {"$$(A)", "$(A)"},
		"unknown stays":       {"$(B)", "$(B)"},
		"unterminated stays":  {"$(A", "$(A"},
		"lone dollar":         {"a$b$", "a$b$"},
		"several":             {"$(A)$(A)", "xx"},
		"shell syntax passes": {"${A}", "${A}"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) { assert.Equal(t, tc.want, Expand(tc.in, env)) })
	}
}

func TestClassifyImage(t *testing.T) {
	tests := map[string]Kind{
		"ghcr.io/gitea-runner-operator/gitea-runner-scaler:0.1.0": KindScaler,
		"gitea-runner-scaler":                            KindScaler,
		"localhost:5000/gitea-runner-scaler@sha256:abc":  KindScaler,
		"ghcr.io/x/gitea-runner-scaler-debug:1":          KindStandIn,
		"gitea/act_runner:nightly-dind-rootless":         KindGiteaRunner,
		"registry:5000/mirror/act_runner":                KindGiteaRunner,
		"gitea/runner:1.0.8-dind-rootless":               KindGiteaRunner,
		"docker.io/gitea/runner@sha256:abc":              KindGiteaRunner,
		"registry:5000/gitea/runner:1.0.8":               KindGiteaRunner,
		"example/runner:1":                               KindStandIn,
		"registry.example.com/ci/gitea-runner-nonroot:1": KindGiteaRunner,
		"registry.example.com/ci/act_runner-nonroot:1":   KindGiteaRunner,
		"testbed.local/steered-runner:dev":               KindSteeredRunner,
		"busybox:1.36":                                   KindStandIn,
		"docker:dind":                                    KindStandIn,
	}
	for image, want := range tests {
		t.Run(image, func(t *testing.T) { assert.Equal(t, want, ClassifyImage(image)) })
	}
}

func TestImageRunnerRelease(t *testing.T) {
	tests := map[string]string{
		"gitea/runner:3.1.0-dind-rootless":               "3.1.0",
		"gitea/runner:1.0.8":                             "1.0.8",
		"registry:5000/testbed/gitea-runner:v3.1.0":      "3.1.0",
		"registry:5000/gitea/runner:1.0.8-dind@sha256:a": "1.0.8",
		"registry:5000/gitea/runner":                     "",
		"gitea/runner@sha256:abc":                        "",
		"gitea/act_runner:nightly-dind-rootless":         "",
		"gitea/runner:latest":                            "",
		"registry.example.com/ci/gitea-runner-nonroot:1": "",
		"gitea/runner:3.1":                               "",
	}
	for image, want := range tests {
		t.Run(image, func(t *testing.T) { assert.Equal(t, want, ImageRunnerRelease(image)) })
	}
}

// A runner image is played by the release its tag names when the agent has
// it, else by the default: the default image after a release switch must not
// silently run the bed's other runner.
func TestRunnerImagesArePlayedByTheReleaseTheirTagNames(t *testing.T) {
	dirs := map[string]string{}
	for _, release := range []string{"default", "1.0.8", "3.1.0"} {
		dirs[release] = t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dirs[release], "run.sh"), []byte("#!/bin/bash\ncd /data\n"), 0o755))
	}
	a, err := New(Config{
		Client: fake.NewClientset(), APIServer: "https://127.0.0.1:1", LogDir: t.TempDir(), WorkDir: t.TempDir(),
		GiteaRunnerDir:         dirs["default"],
		GiteaRunnerReleaseDirs: map[string]string{"1.0.8": dirs["1.0.8"], "3.1.0": dirs["3.1.0"]},
	})
	require.NoError(t, err)
	tests := map[string]string{
		"gitea/runner:3.1.0-dind-rootless":          dirs["3.1.0"],
		"gitea/runner:1.0.8-dind-rootless":          dirs["1.0.8"],
		"registry:5000/testbed/gitea-runner:v1.0.8": dirs["1.0.8"],
		"gitea/runner:3.3.0":                        dirs["default"],
		"gitea/act_runner:nightly":                  dirs["default"],
	}
	for image, want := range tests {
		t.Run(image, func(t *testing.T) { assert.Equal(t, want, a.giteaRunnerFor(image).dir) })
	}
}

func TestProcessArgv(t *testing.T) {
	tests := map[string]struct {
		kind          Kind
		command, args []string
		want          []string
	}{
		"scaler by bare name":      {KindScaler, []string{"gitea-runner-scaler"}, []string{"run", "--loop"}, []string{"/bin/scaler", "run", "--loop"}},
		"scaler by image path":     {KindScaler, []string{"/usr/local/bin/gitea-runner-scaler", "run"}, nil, []string{"/bin/scaler", "run"}},
		"scaler entrypoint":        {KindScaler, nil, []string{"version"}, []string{"/bin/scaler", "version"}},
		"scaler other command":     {KindScaler, []string{"sh", "-c", "true"}, nil, []string{"sh", "-c", "true"}},
		"runner plays run.sh":      {KindGiteaRunner, []string{"/bin/s6-svscan"}, []string{"x"}, []string{"bash", "/c/run.sh"}},
		"runner's own command":     {KindGiteaRunner, []string{"gitea-runner"}, []string{"--config", "/c.yaml", "cache-server"}, []string{"/r/gitea-runner", "--config", "/c.yaml", "cache-server"}},
		"runner's command by path": {KindGiteaRunner, []string{"/usr/local/bin/gitea-runner", "cache-server"}, []string{"--port", "1"}, []string{"/r/gitea-runner", "cache-server", "--port", "1"}},
		"steered runner":           {KindSteeredRunner, []string{"/bin/s6-svscan"}, []string{"x"}, []string{"/bin/steered"}},
		"stand-in has no process":  {KindStandIn, []string{"sleep"}, nil, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, ProcessArgv(tc.kind, tc.command, tc.args, Binaries{Scaler: "/bin/scaler", SteeredRunner: "/bin/steered", Entrypoint: "/c/run.sh", GiteaRunner: "/r/gitea-runner"}))
		})
	}
}
