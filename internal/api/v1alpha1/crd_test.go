package v1alpha1_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/jsonpath"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/podtemplate"
)

// crdPath is the CRD the API server enforces, relative to this package.
const crdPath = "../../../crds/gitea.bpg.pw_runnergroups.yaml"

// crdFile holds the parts of the CustomResourceDefinition these tests read.
// The apiextensions Go types are not a dependency of this module, so the
// YAML is read into this small mirror instead.
type crdFile struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Group string `yaml:"group"`
		Scope string `yaml:"scope"`
		Names struct {
			Kind       string   `yaml:"kind"`
			ListKind   string   `yaml:"listKind"`
			Plural     string   `yaml:"plural"`
			Singular   string   `yaml:"singular"`
			ShortNames []string `yaml:"shortNames"`
		} `yaml:"names"`
		Versions []crdVersion `yaml:"versions"`
	} `yaml:"spec"`
}

type crdVersion struct {
	Name                     string                    `yaml:"name"`
	Served                   bool                      `yaml:"served"`
	Storage                  bool                      `yaml:"storage"`
	Subresources             map[string]map[string]any `yaml:"subresources"`
	AdditionalPrinterColumns []printerColumn           `yaml:"additionalPrinterColumns"`
	Schema                   struct {
		OpenAPIV3Schema *schemaNode `yaml:"openAPIV3Schema"`
	} `yaml:"schema"`
}

type printerColumn struct {
	Name     string `yaml:"name"`
	Type     string `yaml:"type"`
	JSONPath string `yaml:"jsonPath"`
	Priority int32  `yaml:"priority"`
}

// schemaNode is the part of an OpenAPI v3 schema these tests walk.
type schemaNode struct {
	Description  string                 `yaml:"description"`
	Properties   map[string]*schemaNode `yaml:"properties"`
	Items        *schemaNode            `yaml:"items"`
	Required     []string               `yaml:"required"`
	XValidations []struct {
		Rule      string `yaml:"rule"`
		FieldPath string `yaml:"fieldPath"`
	} `yaml:"x-kubernetes-validations"`
}

// loadCRD reads the CRD file and returns it with its single version.
func loadCRD(t *testing.T) (*crdFile, crdVersion) {
	t.Helper()
	raw, err := os.ReadFile(crdPath)
	require.NoError(t, err)
	var crd crdFile
	require.NoError(t, yaml.Unmarshal(raw, &crd))
	require.Len(t, crd.Spec.Versions, 1, "the CRD serves one version")
	v := crd.Spec.Versions[0]
	require.NotNil(t, v.Schema.OpenAPIV3Schema, "the version has an openAPIV3Schema")
	return &crd, v
}

// TestCRDDescribesEveryField checks that kubectl explain has something to
// say about every field, that is, that every field in types.go has a doc
// comment: controller-gen turns doc comments into descriptions. metadata is
// the exception: the API server refuses anything but its name's type there.
// The items of a list need none; the list's field describes them.
// spec.template is Kubernetes' own PodTemplateSpec: it is described, and the
// fields below it are not (make generate drops Kubernetes' descriptions
// there to keep the CRD small; TestCRDTemplateIsSlim).
func TestCRDDescribesEveryField(t *testing.T) {
	_, v := loadCRD(t)
	var missing []string
	var walk func(path string, s *schemaNode)
	walk = func(path string, s *schemaNode) {
		if path == ".metadata" {
			return
		}
		if strings.TrimSpace(s.Description) == "" {
			missing = append(missing, path)
		}
		if path == ".spec.template" {
			return
		}
		for name, p := range s.Properties {
			walk(path+"."+name, p)
		}
		if s.Items != nil {
			for name, p := range s.Items.Properties {
				walk(path+"[]."+name, p)
			}
		}
	}
	walk("", v.Schema.OpenAPIV3Schema)
	sort.Strings(missing)
	assert.Empty(t, missing, "schema fields without a description")
}

// TestCRDTemplateIsSlim checks what make generate does to spec.template:
// no descriptions below it, no required containers (a template that sets
// only nodeSelector is whole), and a CRD small enough for a client-side
// kubectl apply, whose last-applied annotation holds at most 256 KiB of
// JSON.
func TestCRDTemplateIsSlim(t *testing.T) {
	_, v := loadCRD(t)
	tmpl := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["template"]
	require.NotNil(t, tmpl)
	var described []string
	var walk func(path string, s *schemaNode)
	walk = func(path string, s *schemaNode) {
		if path != ".spec.template" && s.Description != "" {
			described = append(described, path)
		}
		for name, p := range s.Properties {
			walk(path+"."+name, p)
		}
		if s.Items != nil {
			walk(path+"[]", s.Items)
		}
	}
	walk(".spec.template", tmpl)
	assert.Empty(t, described, "fields below spec.template with a description")
	assert.NotContains(t, tmpl.Properties["spec"].Required, "containers", "a template need not list containers")
	file, err := os.ReadFile(crdPath)
	require.NoError(t, err)
	var whole map[string]any
	require.NoError(t, yaml.Unmarshal(file, &whole))
	raw, err := json.Marshal(whole)
	require.NoError(t, err)
	assert.Less(t, len(raw), 200<<10, "the CRD as JSON, as kubectl's last-applied annotation holds it (at most 256 KiB)")
}

// TestCRDRuleFieldPathsExist checks every CEL rule's fieldPath against the
// schema the way the API server does when the CRD is applied: a path that
// names no declared property makes the whole CRD invalid. It catches a
// mistyped fieldPath in a marker, and a CRD whose top-level metadata lost
// its name (controller-gen writes metadata bare; make generate declares
// name so that the rule on metadata.name can point at it).
func TestCRDRuleFieldPathsExist(t *testing.T) {
	_, v := loadCRD(t)
	var rules int
	var walk func(path string, s *schemaNode)
	walk = func(path string, s *schemaNode) {
		for _, r := range s.XValidations {
			if r.FieldPath == "" {
				continue
			}
			rules++
			target := s
			for _, name := range strings.Split(strings.TrimPrefix(r.FieldPath, "."), ".") {
				target = target.Properties[name]
				if !assert.NotNil(t, target, "rule %q at %q: fieldPath %q names no property", r.Rule, path, r.FieldPath) {
					break
				}
			}
		}
		for name, p := range s.Properties {
			walk(path+"."+name, p)
		}
		if s.Items != nil {
			walk(path+"[]", s.Items)
		}
	}
	walk("", v.Schema.OpenAPIV3Schema)
	assert.GreaterOrEqual(t, rules, 9, "rules with a fieldPath: metadata.name, six on spec, two Secret keys")
}

// TestCRDIsOneDocument reads the file the way kubectl and the e2e suite do,
// split into documents on '---' lines, and expects the CRD as the first and
// only one: a header comment of its own would be an empty first document.
func TestCRDIsOneDocument(t *testing.T) {
	raw, err := os.ReadFile(crdPath)
	require.NoError(t, err)
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var kinds []string
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		obj := &unstructured.Unstructured{}
		require.NoError(t, utilyaml.Unmarshal(doc, &obj.Object))
		kinds = append(kinds, obj.GetKind())
	}
	assert.Equal(t, []string{"CustomResourceDefinition"}, kinds)
}

// TestCRDNames checks the names the scaler, the chart and kubectl rely on
// against the constants in types.go.
func TestCRDNames(t *testing.T) {
	crd, v := loadCRD(t)
	assert.Equal(t, "apiextensions.k8s.io/v1", crd.APIVersion)
	assert.Equal(t, "CustomResourceDefinition", crd.Kind)
	assert.Equal(t, v1alpha1.Resource+"."+v1alpha1.Group, crd.Metadata.Name)
	assert.Equal(t, v1alpha1.Group, crd.Spec.Group)
	assert.Equal(t, "Namespaced", crd.Spec.Scope)
	assert.Equal(t, v1alpha1.Kind, crd.Spec.Names.Kind)
	assert.Equal(t, v1alpha1.Kind+"List", crd.Spec.Names.ListKind)
	assert.Equal(t, v1alpha1.Resource, crd.Spec.Names.Plural)
	assert.Equal(t, "runnergroup", crd.Spec.Names.Singular)
	assert.Contains(t, crd.Spec.Names.ShortNames, "rg")
	assert.Equal(t, v1alpha1.Version, v.Name)
	assert.True(t, v.Served, "v1alpha1 is served")
	assert.True(t, v.Storage, "v1alpha1 is the storage version")
	assert.Contains(t, v.Subresources, "status", "status is a subresource, so spec writers cannot set it")
}

// TestCRDPrinterColumns checks that kubectl get shows the columns people look
// for, and evaluates each JSONPath the way the API server does (first result
// only, missing keys allowed) against sample groups of every scope.
func TestCRDPrinterColumns(t *testing.T) {
	_, v := loadCRD(t)
	cols := map[string]printerColumn{}
	for _, c := range v.AdditionalPrinterColumns {
		cols[c.Name] = c
	}

	now := metav1.Now()
	status := v1alpha1.RunnerGroupStatus{
		ActiveRunners: 2, QueuedJobs: 7, BlockedJobs: 1, RunningJobs: 2, LastCheckTime: &now,
		Conditions: []metav1.Condition{
			{Type: "ScalingActive", Status: metav1.ConditionFalse, Reason: "Paused", LastTransitionTime: now},
			{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Polled", LastTransitionTime: now},
		},
	}
	group := func(scope v1alpha1.Scope, org, user, repo string) *v1alpha1.RunnerGroup {
		return &v1alpha1.RunnerGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "g", CreationTimestamp: now},
			Spec: v1alpha1.RunnerGroupSpec{
				Scope: scope, Org: org, User: user, Repo: repo, MaxActiveRunners: 5,
				Gitea: v1alpha1.GiteaSpec{URL: "https://gitea.example.com"},
			},
			Status: status,
		}
	}

	type want struct {
		jsonPath string
		typ      string
		priority int32
		// values by sample name; "" means the cell is empty
		values map[string]string
	}
	samples := map[string]*v1alpha1.RunnerGroup{
		"global":    group(v1alpha1.ScopeGlobal, "", "", ""),
		"org":       group(v1alpha1.ScopeOrg, "acme", "", ""),
		"user":      group(v1alpha1.ScopeUser, "", "alice", ""),
		"repo-org":  group(v1alpha1.ScopeRepo, "acme", "", "app"),
		"repo-user": group(v1alpha1.ScopeRepo, "", "alice", "dotfiles"),
	}
	all := func(s string) map[string]string {
		return map[string]string{"global": s, "org": s, "user": s, "repo-org": s, "repo-user": s}
	}
	tests := map[string]want{
		"Scope": {".spec.scope", "string", 0, map[string]string{
			"global": "global", "org": "org", "user": "user", "repo-org": "repo", "repo-user": "repo",
		}},
		"Owner": {".spec['org','user']", "string", 0, map[string]string{
			"global": "", "org": "acme", "user": "alice", "repo-org": "acme", "repo-user": "alice",
		}},
		"Repo": {".spec.repo", "string", 0, map[string]string{
			"global": "", "org": "", "user": "", "repo-org": "app", "repo-user": "dotfiles",
		}},
		"Active":  {".status.activeRunners", "integer", 0, all("2")},
		"Max":     {".spec.maxActiveRunners", "integer", 0, all("5")},
		"Queued":  {".status.queuedJobs", "integer", 0, all("7")},
		"Ready":   {`.status.conditions[?(@.type=="Ready")].status`, "string", 0, all("True")},
		"Reason":  {`.status.conditions[?(@.type=="Ready")].reason`, "string", 0, all("Polled")},
		"Suspend": {".spec.suspend", "boolean", 1, all("")},
		"Running": {".status.runningJobs", "integer", 1, all("2")},
		"Blocked": {".status.blockedJobs", "integer", 1, all("1")},
		"Age":     {".metadata.creationTimestamp", "date", 0, all(now.UTC().Format("2006-01-02T15:04:05Z"))},
	}
	for name, w := range tests {
		t.Run(name, func(t *testing.T) {
			c, ok := cols[name]
			require.True(t, ok, "printer column %q is missing", name)
			assert.Equal(t, w.jsonPath, c.JSONPath)
			assert.Equal(t, w.typ, c.Type)
			assert.Equal(t, w.priority, c.Priority)

			jp := jsonpath.New(name).AllowMissingKeys(true)
			require.NoError(t, jp.Parse("{"+c.JSONPath+"}"))
			for sample, g := range samples {
				obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(g)
				require.NoError(t, err)
				results, err := jp.FindResults(obj)
				require.NoError(t, err)
				got := ""
				if len(results) > 0 && len(results[0]) > 0 {
					got = fmt.Sprint(results[0][0].Interface())
				}
				assert.Equal(t, w.values[sample], got, "column %s for the %s sample", name, sample)
			}
		})
	}
}

// TestCRDVolumeAllowList keeps the CEL rule on spec.template's volumes and
// podtemplate.GroupVolumeTypes in step (issue 24 item 7): every volume type
// the schema knows is either on the Go allow list or refused by the rule,
// and none is both. When k8s.io/api brings a new type, this fails until it
// is judged.
func TestCRDVolumeAllowList(t *testing.T) {
	_, v := loadCRD(t)
	tmpl := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["template"]
	volumes := tmpl.Properties["spec"].Properties["volumes"]
	require.NotNil(t, volumes)
	require.NotNil(t, volumes.Items)
	var rules []string
	for _, r := range tmpl.XValidations {
		rules = append(rules, r.Rule)
	}
	rule := strings.Join(rules, "\n")
	require.Contains(t, rule, "!has(v.hostPath)", "the rule that refuses volume types")
	require.Greater(t, len(volumes.Items.Properties), 20, "the schema lists Kubernetes' volume types")
	for name := range volumes.Items.Properties {
		if name == "name" {
			continue
		}
		allowed := slices.Contains(podtemplate.GroupVolumeTypes, name)
		// Refused: a conjunct of a rule ("!has(v.x) ||" only guards a
		// rule about that type).
		refused := strings.Contains(rule, "!has(v."+name+") &&") || strings.Contains(rule, "!has(v."+name+"))")
		assert.True(t, allowed != refused, "volume type %s: allowed by Go %v, refused by CEL %v; it must be exactly one", name, allowed, refused)
	}
}
