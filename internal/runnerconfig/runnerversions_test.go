package runnerconfig_test

import (
	"archive/tar"
	"compress/gzip"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	"k8s.io/utils/ptr"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerconfig"
)

// TestEveryRenderedKeyIsReadByEveryRunnerOnTheBed renders a config with every
// field of the typed subset set, and the cache the scaler owns, and checks
// that each key is one gitea/runner reads, by the config struct
// (internal/pkg/config/config.go) of every runner release the test bed
// builds (scripts/tools/gitea-runner). A key a release does not read would be
// dropped silently by 1.0.8 and with a warning by 3.1.
func TestEveryRenderedKeyIsReadByEveryRunnerOnTheBed(t *testing.T) {
	all := v1alpha1.RunnerConfig{
		Log: &v1alpha1.RunnerLogConfig{Level: ptr.To("debug")},
		Runner: &v1alpha1.RunnerRunnerConfig{
			Envs: map[string]string{"A": "b"}, Timeout: ptr.To("1h"), Insecure: ptr.To(true),
			FetchTimeout: ptr.To("5s"), FetchInterval: ptr.To("2s"), FetchIntervalMax: ptr.To("5s"),
			GithubMirror: ptr.To("https://mirror.example"),
		},
		Container: &v1alpha1.RunnerContainerConfig{
			Network: ptr.To("host"), Privileged: ptr.To(true), Options: ptr.To("--add-host=a:b"),
			ValidVolumes: []string{"v"}, DockerHost: ptr.To("-"), ForcePull: ptr.To(true),
			RequireDocker: ptr.To(true), DockerTimeout: ptr.To("10s"),
		},
	}
	// Every pointer and slice of the subset is set above, so a field added to
	// the API types without a line here fails this test rather than going
	// unchecked.
	requireEverySet(t, reflect.ValueOf(all), "runnerConfig")
	tmpl, err := runnerconfig.Render(all, time.Minute, runnerconfig.Cache{ExternalServer: "http://cache:8088/"})
	require.NoError(t, err)
	rendered, err := runnerconfig.WithSecret(tmpl, "s3cret")
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(rendered, &doc))
	keys := keyPaths(doc, "")
	require.Contains(t, keys, "cache.external_secret")

	archives, err := filepath.Glob("../../scripts/tools/gitea-runner/gitea-runner-*.tar.gz")
	require.NoError(t, err)
	require.NotEmpty(t, archives)
	for _, archive := range archives {
		t.Run(filepath.Base(archive), func(t *testing.T) {
			read := runnerKeys(t, archive)
			for _, k := range keys {
				assert.Contains(t, read, k, "%s reads no key %s", filepath.Base(archive), k)
			}
		})
	}
}

// requireEverySet fails for a nil pointer, slice or map in v's structs.
func requireEverySet(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map:
		require.False(t, v.IsNil(), "%s is not set in the test's config", path)
		if v.Kind() == reflect.Pointer {
			requireEverySet(t, v.Elem(), path)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			// Fields the scaler owns are refused in every layer (CheckReserved).
			if slices.Contains([]string{"Cache", "File", "Labels", "Capacity", "EnvFile", "ShutdownTimeout"}, f.Name) {
				continue
			}
			requireEverySet(t, v.Field(i), path+"."+f.Name)
		}
	}
}

// keyPaths lists the dotted paths of doc's keys down to the values that are
// not mappings (runner.envs is a map of names the runner passes on, so its
// keys are not config keys).
func keyPaths(doc map[string]any, prefix string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		p := prefix + k
		if m, ok := doc[k].(map[string]any); ok && p != "runner.envs" {
			out = append(out, keyPaths(m, p+".")...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// runnerKeys reads the dotted yaml keys of the runner's Config struct from
// internal/pkg/config/config.go in a source archive.
func runnerKeys(t *testing.T, archive string) []string {
	t.Helper()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	var src []byte
	for {
		h, err := tr.Next()
		require.NoError(t, err, "internal/pkg/config/config.go is in the archive")
		if strings.HasSuffix(h.Name, "/internal/pkg/config/config.go") {
			src, err = io.ReadAll(tr)
			require.NoError(t, err)
			break
		}
	}
	file, err := parser.ParseFile(token.NewFileSet(), "config.go", src, 0)
	require.NoError(t, err)
	structs := map[string]*ast.StructType{}
	ast.Inspect(file, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok {
			if st, ok := ts.Type.(*ast.StructType); ok {
				structs[ts.Name.Name] = st
			}
		}
		return true
	})
	require.Contains(t, structs, "Config")
	var keys []string
	var walk func(st *ast.StructType, prefix string)
	walk = func(st *ast.StructType, prefix string) {
		for _, field := range st.Fields.List {
			if field.Tag == nil {
				continue
			}
			tag, err := strconv.Unquote(field.Tag.Value)
			require.NoError(t, err)
			name, _, _ := strings.Cut(reflect.StructTag(tag).Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			if id, ok := field.Type.(*ast.Ident); ok && structs[id.Name] != nil {
				walk(structs[id.Name], prefix+name+".")
				continue
			}
			keys = append(keys, prefix+name)
		}
	}
	walk(structs["Config"], "")
	return keys
}
