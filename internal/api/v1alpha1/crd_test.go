package v1alpha1_test

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/jsonpath"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
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

// schemaNode is the part of an OpenAPI v3 schema that describes shape:
// what the Go types must agree with.
type schemaNode struct {
	Type        string                 `yaml:"type"`
	Format      string                 `yaml:"format"`
	Description string                 `yaml:"description"`
	Required    []string               `yaml:"required"`
	Properties  map[string]*schemaNode `yaml:"properties"`
	Items       *schemaNode            `yaml:"items"`
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

// Go types whose schema is not derived from their fields.
var (
	timeType       = reflect.TypeFor[metav1.Time]()
	objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()
	listMetaType   = reflect.TypeFor[metav1.ListMeta]()
)

// requiredExempt lists the schema paths whose required list may differ from
// the Go fields without omitempty. The scaler always writes every status
// counter, but the schema keeps them optional so that a status written by an
// older scaler, or a partial status patch, is still accepted.
var requiredExempt = map[string]bool{".status": true}

// compareSchema walks the Go type t and the schema node s side by side and
// returns every difference it finds, each naming its path. An empty result
// means both describe the same fields with the same types.
func compareSchema(path string, t reflect.Type, s *schemaNode) []string {
	if s == nil {
		return []string{fmt.Sprintf("%s: in the Go types but not in the schema", path)}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var diffs []string
	want := func(typ, format string) {
		if s.Type != typ {
			diffs = append(diffs, fmt.Sprintf("%s: schema type %q, Go type %s wants %q", path, s.Type, t, typ))
		}
		if format != "" && s.Format != format {
			diffs = append(diffs, fmt.Sprintf("%s: schema format %q, Go type %s wants %q", path, s.Format, t, format))
		}
	}
	switch {
	case t == timeType:
		want("string", "date-time")
	case t == objectMetaType || t == listMetaType:
		// The API server owns metadata's schema; only its type is declared.
		want("object", "")
	case t.Kind() == reflect.String:
		want("string", "")
	case t.Kind() == reflect.Bool:
		want("boolean", "")
	case t.Kind() == reflect.Int32:
		want("integer", "int32")
	case t.Kind() == reflect.Int64:
		want("integer", "int64")
	case t.Kind() == reflect.Int:
		want("integer", "")
	case t.Kind() == reflect.Slice:
		want("array", "")
		if s.Items == nil {
			diffs = append(diffs, fmt.Sprintf("%s: array without items in the schema", path))
		} else {
			diffs = append(diffs, compareSchema(path+"[]", t.Elem(), s.Items)...)
		}
	case t.Kind() == reflect.Struct:
		want("object", "")
		fields := jsonFields(t)
		names := make([]string, 0, len(fields))
		for name := range fields {
			names = append(names, name)
		}
		sort.Strings(names)
		var goRequired []string
		for _, name := range names {
			f := fields[name]
			if !f.omitempty {
				goRequired = append(goRequired, name)
			}
			diffs = append(diffs, compareSchema(path+"."+name, f.typ, s.Properties[name])...)
		}
		for name := range s.Properties {
			if _, ok := fields[name]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: in the schema but not in the Go type %s", path, name, t))
			}
		}
		if !requiredExempt[path] {
			schemaRequired := slices.Sorted(slices.Values(s.Required))
			if !slices.Equal(goRequired, schemaRequired) {
				diffs = append(diffs, fmt.Sprintf("%s: schema requires %v, Go fields without omitempty are %v", path, schemaRequired, goRequired))
			}
		}
	default:
		diffs = append(diffs, fmt.Sprintf("%s: Go kind %s has no schema mapping in this test", path, t.Kind()))
	}
	sort.Strings(diffs)
	return diffs
}

type jsonField struct {
	typ       reflect.Type
	omitempty bool
}

// jsonFields returns the fields encoding/json would write for struct t, by
// JSON name: inline (anonymous, untagged or tagged ",inline") structs are
// flattened, `json:"-"` and unexported fields are left out.
func jsonFields(t reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = jsonField{typ: f.Type, omitempty: slices.Contains(strings.Split(opts, ","), "omitempty")}
	}
	return out
}

// TestCRDSchemaMatchesGoTypes keeps types.go and the CRD schema in step.
//
// It walks RunnerGroup by reflection (JSON names from the tags, inline
// embeds flattened, metav1.Time as a date-time string, metav1.Condition by
// its own fields, ObjectMeta left to the API server) and the CRD's
// openAPIV3Schema side by side. At every object it compares the property
// names both ways, so a field added to or removed from either side shows up
// as "in the Go types but not in the schema" or "in the schema but not in
// the Go type"; at every leaf it compares string/integer/boolean/array/object
// and the integer format (int32 or int64). At every object except .status,
// the schema's required list must equal the Go fields without omitempty, so
// making a field optional on one side only fails too.
//
// TestCompareSchemaCatchesDrift runs the same comparison against altered
// copies of both sides, showing that each kind of drift is reported.
func TestCRDSchemaMatchesGoTypes(t *testing.T) {
	_, v := loadCRD(t)
	diffs := compareSchema("", reflect.TypeFor[v1alpha1.RunnerGroup](), v.Schema.OpenAPIV3Schema)
	assert.Empty(t, diffs, "types.go and %s disagree:\n%s", crdPath, strings.Join(diffs, "\n"))
}

// TestCompareSchemaCatchesDrift proves that compareSchema reports drift in
// either direction, so that TestCRDSchemaMatchesGoTypes cannot pass by
// comparing nothing.
func TestCompareSchemaCatchesDrift(t *testing.T) {
	type specWithExtra struct {
		v1alpha1.RunnerGroupSpec `json:",inline"`
		Extra                    string `json:"extra"`
	}
	type groupWithExtraSpecField struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata,omitempty"`
		Spec              specWithExtra              `json:"spec"`
		Status            v1alpha1.RunnerGroupStatus `json:"status,omitempty"`
	}
	group := reflect.TypeFor[v1alpha1.RunnerGroup]()

	tests := map[string]struct {
		goType reflect.Type
		alter  func(root *schemaNode)
		want   string
	}{
		"schema loses a field": {
			goType: group,
			alter:  func(root *schemaNode) { delete(root.Properties["spec"].Properties, "repo") },
			want:   ".spec.repo: in the Go types but not in the schema",
		},
		"schema gains a field": {
			goType: group,
			alter: func(root *schemaNode) {
				root.Properties["status"].Properties["idleRunners"] = &schemaNode{Type: "integer"}
			},
			want: ".status.idleRunners: in the schema but not in the Go type",
		},
		"Go type gains a field": {
			goType: reflect.TypeFor[groupWithExtraSpecField](),
			alter:  func(*schemaNode) {},
			want:   ".spec.extra: in the Go types but not in the schema",
		},
		"type differs": {
			goType: group,
			alter:  func(root *schemaNode) { root.Properties["spec"].Properties["maxActiveRunners"].Type = "string" },
			want:   `.spec.maxActiveRunners: schema type "string"`,
		},
		"integer format differs": {
			goType: group,
			alter: func(root *schemaNode) {
				root.Properties["status"].Properties["observedGeneration"].Format = "int32"
			},
			want: `.status.observedGeneration: schema format "int32"`,
		},
		"nested condition field lost": {
			goType: group,
			alter: func(root *schemaNode) {
				delete(root.Properties["status"].Properties["conditions"].Items.Properties, "reason")
			},
			want: ".status.conditions[].reason: in the Go types but not in the schema",
		},
		"schema stops requiring a field": {
			goType: group,
			alter: func(root *schemaNode) {
				sr := root.Properties["spec"].Properties["authToken"].Properties["secretRef"]
				sr.Required = []string{"name"}
			},
			want: ".spec.authToken.secretRef: schema requires [name], Go fields without omitempty are [key name]",
		},
		"schema requires an optional field": {
			goType: group,
			alter: func(root *schemaNode) {
				spec := root.Properties["spec"]
				spec.Required = append(slices.Clone(spec.Required), "labels")
			},
			want: ".spec: schema requires",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, v := loadCRD(t) // a fresh copy for every case
			root := v.Schema.OpenAPIV3Schema
			tc.alter(root)
			diffs := compareSchema("", tc.goType, root)
			require.NotEmpty(t, diffs, "the altered copy must not match")
			assert.Contains(t, strings.Join(diffs, "\n"), tc.want)
		})
	}
}

// TestCRDDescribesEveryField checks that kubectl explain has something to
// say about every field. metadata is the exception: the API server refuses
// anything but its type there.
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
		for name, p := range s.Properties {
			walk(path+"."+name, p)
		}
		if s.Items != nil {
			walk(path+"[]", s.Items)
		}
	}
	walk("", v.Schema.OpenAPIV3Schema)
	sort.Strings(missing)
	assert.Empty(t, missing, "schema fields without a description")
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
