package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two kubeconfig files as $KUBECONFIG lists them: the first has the
// clusters and the user, the second the contexts and the current one.
const (
	kubeconfigClusters = `apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster: {server: "https://prod.example:6443"}
- name: dev
  cluster: {server: "https://dev.example:6443"}
users:
- name: me
  user: {token: not-a-real-token}
`
	kubeconfigContexts = `apiVersion: v1
kind: Config
current-context: prod-team-a
contexts:
- name: prod-team-a
  context: {cluster: prod, user: me, namespace: team-a}
- name: dev
  context: {cluster: dev, user: me}
`
)

// kubeconfigSolo is a whole kubeconfig of its own.
const kubeconfigSolo = `apiVersion: v1
kind: Config
current-context: solo
clusters:
- name: solo
  cluster: {server: "https://solo.example:6443"}
users:
- name: me
  user: {token: not-a-real-token}
contexts:
- name: solo
  context: {cluster: solo, user: me, namespace: ops}
`

func writeKubeconfigs(t *testing.T) (clusters, contexts, solo string) {
	t.Helper()
	dir := t.TempDir()
	clusters, contexts, solo = filepath.Join(dir, "clusters"), filepath.Join(dir, "contexts"), filepath.Join(dir, "solo")
	require.NoError(t, os.WriteFile(clusters, []byte(kubeconfigClusters), 0o600))
	require.NoError(t, os.WriteFile(contexts, []byte(kubeconfigContexts), 0o600))
	require.NoError(t, os.WriteFile(solo, []byte(kubeconfigSolo), 0o600))
	// No ~/.kube/config of the machine running the test takes part.
	t.Setenv("HOME", dir)
	return clusters, contexts, solo
}

func TestKubeconfigIsLoadedAsKubectlLoadsIt(t *testing.T) {
	clusters, contexts, solo := writeKubeconfigs(t)
	list := clusters + string(os.PathListSeparator) + contexts
	tests := []struct {
		name          string
		env           string
		flags         KubeFlags
		wantHost      string
		wantNamespace string
		wantErr       string
	}{
		{name: "a KUBECONFIG list is merged; its current context wins", env: list,
			wantHost: "https://prod.example:6443", wantNamespace: "team-a"},
		{name: "--context picks another context; one without a namespace means default", env: list,
			flags: KubeFlags{Context: "dev"}, wantHost: "https://dev.example:6443", wantNamespace: "default"},
		{name: "--context names a context the config lacks", env: list,
			flags: KubeFlags{Context: "nope"}, wantErr: `context "nope" does not exist`},
		{name: "--kubeconfig wins over KUBECONFIG", env: list,
			flags: KubeFlags{Kubeconfig: solo}, wantHost: "https://solo.example:6443", wantNamespace: "ops"},
		{name: "a --kubeconfig that does not exist is an error", env: clusters,
			flags: KubeFlags{Kubeconfig: filepath.Join(t.TempDir(), "missing")}, wantErr: "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			got, err := tc.flags.load()
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantHost, got.config.Host)
			assert.Equal(t, tc.wantNamespace, got.namespace)
			assert.Equal(t, userAgent(), got.config.UserAgent)
		})
	}
}

// status looks where kubectl get would: -A everywhere, else -n, else the
// context's namespace; why looks at every namespace unless told, because
// which group serves a job is decided across namespaces; inside a pod an
// empty -n means every namespace, as for the listener.
func TestNamespacesFollowKubectlsHabits(t *testing.T) {
	tests := []struct {
		name           string
		sel            Selection
		target         kubeTarget
		contextDefault bool
		want           []string
	}{
		{name: "status: the context's namespace", target: kubeTarget{namespace: "team-a"}, contextDefault: true, want: []string{"team-a"}},
		{name: "status: -n wins", sel: Selection{Namespace: []string{"x"}}, target: kubeTarget{namespace: "team-a"}, contextDefault: true, want: []string{"x"}},
		{name: "status: -A wins over -n", sel: Selection{Namespace: []string{"x"}, AllNamespaces: true}, target: kubeTarget{namespace: "team-a"}, contextDefault: true},
		{name: "status in a pod: all", contextDefault: true},
		{name: "why: all, whatever the context", target: kubeTarget{namespace: "team-a"}},
		{name: "why: -n", sel: Selection{Namespace: []string{"x"}}, target: kubeTarget{namespace: "team-a"}, want: []string{"x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.sel.namespacesFor(tc.target, tc.contextDefault)
			assert.Equal(t, tc.want, tc.sel.Namespace)
		})
	}
}
