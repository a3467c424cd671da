package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/why"
)

func parseCheckGroup(t *testing.T, args ...string) (*CheckGroupCmd, error) {
	t.Helper()
	c, err := parseCLI(t, append([]string{"check-group", "--allowed-gitea-urls", "https://gitea.example.com", "--service-account", "gitea-runners:gro"}, args...)...)
	return &c.CheckGroup, err
}

func TestCheckGroupTakesOneGroupNamedOrInAFile(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		ns      string
	}{
		{name: "named", args: []string{"team-a/acme"}, ns: "team-a"},
		{name: "in a file", args: []string{"-f", "group.yaml"}},
		{name: "neither", args: nil, wantErr: "NAMESPACE/NAME, or its manifest with -f"},
		{name: "both", args: []string{"team-a/acme", "-f", "group.yaml"}, wantErr: "not both"},
		{name: "no namespace", args: []string{"acme"}, wantErr: "must be NAMESPACE/NAME"},
		{name: "a path", args: []string{"team-a/acme/x"}, wantErr: "must be NAMESPACE/NAME"},
		{name: "no ServiceAccount of the scaler", args: []string{"team-a/acme", "--service-account", ""}, wantErr: "--service-account"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseCheckGroup(t, tt.args...)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.ns, c.namespace)
		})
	}
}

func TestCheckGroupReadsAManifestAsTheAPIServerWould(t *testing.T) {
	const group = `apiVersion: gitea.bpg.pw/v1alpha1
kind: RunnerGroup
metadata: {name: acme%s}
spec:
  scope: org
  org: acme
  gitea: {url: https://gitea.example.com}
  maxActiveRunners: 5
  authToken: {secretRef: {name: acme-runner-tokens, key: api}}%s
`
	tests := []struct {
		name, namespace, extra string
		kind                   string
		wantNS, wantErr        string
	}{
		{name: "the context's namespace when it names none", wantNS: "team-a"},
		{name: "its own namespace", namespace: ", namespace: team-b", wantNS: "team-b"},
		{name: "an unknown field, as the API server refuses it", extra: "\n  maxActive: 3", wantErr: `unknown field "maxActive"`},
		{name: "another kind", kind: "Deployment", wantErr: "not a RunnerGroup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			manifest := strings.Replace(group, "%s", tt.namespace, 1)
			manifest = strings.Replace(manifest, "%s", tt.extra, 1)
			if tt.kind != "" {
				manifest = strings.Replace(manifest, "kind: RunnerGroup", "kind: "+tt.kind, 1)
			}
			path := filepath.Join(t.TempDir(), "group.yaml")
			require.NoError(t, os.WriteFile(path, []byte(manifest), 0o600))
			c := &CheckGroupCmd{File: path}
			rg, err := c.readFile(nil, "team-a")
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantNS, rg.Namespace)
			assert.Equal(t, "acme", rg.Name)
			assert.Empty(t, rg.UID, "a group from a file has no last pass")

			stdin := &CheckGroupCmd{File: "-"}
			fromStdin, err := stdin.readFile(strings.NewReader(manifest), "team-a")
			require.NoError(t, err)
			assert.Equal(t, rg, fromStdin)
		})
	}
}

// A group in a namespace not enabled for the scaler is missing something:
// the command says what, with the enabling command, and exits 1; no Gitea
// client is made for it.
func TestCheckGroupExitsOneWithTheFixWhenSomethingIsMissing(t *testing.T) {
	c, err := parseCheckGroup(t, "-f", "group.yaml", "--tenant-cluster-role", "gro-tenant")
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "group.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: gitea.bpg.pw/v1alpha1
kind: RunnerGroup
metadata: {name: acme, namespace: team-a}
spec:
  scope: org
  org: acme
  gitea: {url: https://gitea.example.com}
  maxActiveRunners: 5
  authToken: {secretRef: {name: acme-runner-tokens, key: api}}
`), 0o600))
	c.File = path
	rg, err := c.readFile(nil, "")
	require.NoError(t, err)
	// The fake API server allows no review: the scaler holds no right.
	kube := fake.NewSimpleClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}})
	kube.PrependReactor("create", "localsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, a.(k8stesting.CreateAction).GetObject(), nil
	})
	asked := false
	deps := why.Deps{Kube: kube, Gitea: func(string, string) (gitea.Client, error) {
		asked = true
		return nil, assert.AnError
	}}
	var out, errOut bytes.Buffer
	assert.Equal(t, ExitFailed, c.runWith(context.Background(), deps, rg, IO{Out: &out, Err: &errOut}))
	assert.Contains(t, out.String(), "MISSING  namespace: namespace team-a is not enabled")
	assert.Contains(t, out.String(), "fix: someone who holds the tenant rights in team-a runs: gitea-runner-scaler enable-namespace team-a --tenant-cluster-role gro-tenant --service-account gitea-runners:gro")
	assert.Contains(t, out.String(), "missing: 1")
	assert.False(t, asked, "no token is sent from a namespace not enabled")
	assert.Empty(t, errOut.String())
}
