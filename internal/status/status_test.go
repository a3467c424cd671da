package status

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/selection"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func obj(t *testing.T, rg *v1alpha1.RunnerGroup) *unstructured.Unstructured {
	t.Helper()
	rg.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rg)
	require.NoError(t, err)
	return &unstructured.Unstructured{Object: m}
}

// served is a group a pass served 40 s ago: 3 queued, 1 blocked, 2 running,
// 2 of 4 runners active, 2 idle of which 1 is warm (a pool of 1), Ready
// and at capacity.
func served() *v1alpha1.RunnerGroup {
	checked := metav1.NewTime(now.Add(-40 * time.Second))
	return &v1alpha1.RunnerGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ci", Generation: 2, Labels: map[string]string{"pool": "a"}},
		Spec:       v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeOrg, Org: "acme", MaxActiveRunners: 4, MinIdleRunners: 1},
		Status: v1alpha1.RunnerGroupStatus{
			QueuedJobs: 3, BlockedJobs: 1, RunningJobs: 2, ActiveRunners: 2, IdleRunners: 2, WarmRunners: 1, StartingRunners: 1,
			LastCheckTime: &checked, ObservedGeneration: 2,
			Conditions: []metav1.Condition{
				{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReconciled, Message: "ok"},
				{Type: v1alpha1.ConditionScalingActive, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonAtCapacity, Message: "4 of 4"},
				{Type: v1alpha1.ConditionCache, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonCacheReachable, Message: "answers"},
			},
		},
	}
}

// failing is a repo group whose token was refused; never passed is a global
// group no pass has seen yet.
func failing() *v1alpha1.RunnerGroup {
	checked := metav1.NewTime(now.Add(-90 * time.Second))
	return &v1alpha1.RunnerGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "app", Generation: 3, Labels: map[string]string{"pool": "b"}},
		Spec:       v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeRepo, User: "alice", Repo: "app", MaxActiveRunners: 1},
		Status: v1alpha1.RunnerGroupStatus{
			LastCheckTime: &checked, ObservedGeneration: 2,
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonGiteaUnauthorized, Message: "401"}},
		},
	}
}

func neverPassed() *v1alpha1.RunnerGroup {
	return &v1alpha1.RunnerGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "all", Labels: map[string]string{"pool": "b"}},
		Spec:       v1alpha1.RunnerGroupSpec{Scope: v1alpha1.ScopeGlobal, MaxActiveRunners: 2},
	}
}

// listener is the flags of `run` that pick RunnerGroups.
type listener struct {
	namespaces []string
	selector   string
	excludes   []string
}

func selected(t *testing.T, l listener) selection.Listed {
	t.Helper()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource: "RunnerGroupList"},
		obj(t, served()), obj(t, failing()), obj(t, neverPassed()))
	rule, err := selection.New(l.namespaces, l.selector, l.excludes)
	require.NoError(t, err)
	sel, err := selection.List(context.Background(), runnergroups.Client{Dynamic: dyn}, rule, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	return sel
}

func names(rows []Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Namespace+"/"+r.Name)
	}
	return out
}

func TestRowsFollowRunsSelection(t *testing.T) {
	tests := []struct {
		name string
		l    listener
		want []string
	}{
		{"every namespace", listener{}, []string{"team-a/ci", "team-b/all", "team-b/app"}},
		{"one namespace", listener{namespaces: []string{"team-b"}}, []string{"team-b/all", "team-b/app"}},
		{"a selector", listener{selector: "pool=a"}, []string{"team-a/ci"}},
		{"a JSON selector and an exclusion", listener{selector: `{"matchLabels":{"pool":"b"}}`, excludes: []string{"pool=b"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, names(Rows(selected(t, tt.l), now)))
		})
	}
}

func TestRowsCarryTheRecordedStatus(t *testing.T) {
	rows := Rows(selected(t, listener{}), now)
	require.Len(t, rows, 3)
	ci, all, app := rows[0], rows[1], rows[2]

	assert.Equal(t, "org", ci.Scope)
	assert.Equal(t, "acme", ci.Target)
	assert.Equal(t, [10]int32{3, 1, 2, 2, 4, 2, 1, 1, 1, 0}, [10]int32{ci.Queued, ci.Blocked, ci.Running, ci.Active, ci.Max, ci.Idle, ci.Warm, ci.MinIdle, ci.Starting, ci.LeftToOtherGroups})
	require.NotNil(t, ci.AgeSeconds)
	assert.Equal(t, int64(40), *ci.AgeSeconds)
	assert.False(t, ci.Stale)
	assert.Equal(t, Condition{Status: "True", Reason: "Reconciled", Message: "ok"}, ci.Ready)
	assert.Equal(t, Condition{Status: "False", Reason: "AtCapacity", Message: "4 of 4"}, ci.ScalingActive)
	assert.Equal(t, &Condition{Status: "True", Reason: "CacheReachable", Message: "answers"}, ci.Cache, "the shared cache's condition, when there is one")

	assert.Equal(t, "", all.Target, "global has no target")
	assert.Nil(t, all.LastPass, "no pass yet")
	assert.Equal(t, Condition{}, all.Ready)
	assert.Nil(t, all.Cache, "no shared cache, no cache field")

	assert.Equal(t, "alice/app", app.Target)
	assert.True(t, app.Stale, "generation 3 was never passed: the numbers are of generation 2")
	assert.Equal(t, "GiteaUnauthorized", app.Ready.Reason)
}

func TestTableHasOneLinePerGroup(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, Report{Groups: Rows(selected(t, listener{}), now)}, FormatTable))
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	require.Len(t, lines, 4)
	assert.Regexp(t, `^RUNNERGROUP\s+SCOPE\s+QUEUED\s+BLOCKED\s+RUNNING\s+ACTIVE/MAX\s+IDLE/WARM\s+LAST PASS\s+READY\s+SCALING$`, lines[0])
	assert.Regexp(t, `^team-a/ci\s+org acme\s+3\s+1\s+2\s+2/4\s+2/1\s+2026-03-01T11:59:20Z \(40s ago\)\s+True/Reconciled\s+False/AtCapacity$`, lines[1])
	assert.Regexp(t, `^team-b/all\s+global\s+0\s+0\s+0\s+0/2\s+0/0\s+never\s+-\s+-$`, lines[2])
	assert.Regexp(t, `^team-b/app\s+repo alice/app\s+.*\(1m30s ago\), spec changed since\s+False/GiteaUnauthorized\s+-$`, lines[3])
}

func TestTableSaysWhenNothingIsSelected(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, Report{}, FormatTable))
	assert.Equal(t, "No RunnerGroups selected.\n", buf.String())
}

func TestJSONAndYAMLCarryTheSameRows(t *testing.T) {
	rows := Rows(selected(t, listener{}), now)
	var j, y bytes.Buffer
	require.NoError(t, Write(&j, Report{Groups: rows}, FormatJSON))
	require.NoError(t, Write(&y, Report{Groups: rows}, FormatYAML))

	var fromJSON, fromYAML struct {
		Groups []map[string]any `json:"groups" yaml:"groups"`
	}
	require.NoError(t, json.Unmarshal(j.Bytes(), &fromJSON))
	require.NoError(t, yaml.Unmarshal(y.Bytes(), &fromYAML))
	require.Len(t, fromJSON.Groups, 3)
	require.Len(t, fromYAML.Groups, 3)
	for i, g := range fromJSON.Groups {
		assert.Equal(t, g["name"], fromYAML.Groups[i]["name"])
		assert.EqualValues(t, g["queued"], fromYAML.Groups[i]["queued"])
	}
	assert.EqualValues(t, 3, fromJSON.Groups[0]["queued"])
	assert.Equal(t, "AtCapacity", fromJSON.Groups[0]["scalingActive"].(map[string]any)["reason"])
	assert.Equal(t, "2026-03-01T11:59:20Z", fromJSON.Groups[0]["lastPass"])

	var empty bytes.Buffer
	require.NoError(t, Write(&empty, Report{}, FormatJSON))
	assert.JSONEq(t, `{"groups":[]}`, empty.String(), "scripts get a list, never null")
}

func TestWriteRefusesAnUnknownFormat(t *testing.T) {
	err := Write(&bytes.Buffer{}, Report{}, "xml")
	assert.EqualError(t, err, `unknown output format "xml" (want table, json, yaml, name, jsonpath=TEMPLATE or custom-columns=HEADER:PATH,...)`)
}

func TestUnreadableGroupGetsALineWithItsError(t *testing.T) {
	var buf bytes.Buffer
	sel := selection.Listed{Broken: []runnergroups.Broken{{Namespace: "x", Name: "bad", Err: assert.AnError}}}
	require.NoError(t, Write(&buf, Report{Groups: Rows(sel, now)}, FormatTable))
	assert.Contains(t, buf.String(), "x/bad")
	assert.Contains(t, buf.String(), "unreadable: "+assert.AnError.Error())
}

// rawControl is what a terminal would act on: C0 (ESC, BEL, CR), DEL and
// C1 (CSI as UTF-8).
func rawControl(s string) []rune {
	var out []rune
	for _, r := range s {
		if (r < 0x20 && r != '\n') || (r >= 0x7f && r <= 0x9f) {
			out = append(out, r)
		}
	}
	return out
}

// What a group's writer or Gitea put in a name, target, reason or error is
// printed with its control characters escaped, in every format, and JSON
// and YAML still carry the same values.
func TestOutputEscapesTerminalControlCharacters(t *testing.T) {
	evil := "x\x1b]0;owned\x07\x1b[2K\r\u009b31m\x7f"
	rows := []Row{
		{Namespace: "team-a", Name: "ci", Scope: "org", Target: evil, Ready: Condition{Status: "False", Reason: evil, Message: evil}},
		{Namespace: "x", Name: "bad", Error: evil},
	}
	for _, format := range []string{FormatTable, FormatJSON, FormatYAML, "jsonpath={range .groups[*]}{.target}{.ready.message}{.error}{\"\\n\"}{end}", "custom-columns=T:.target,R:.ready.reason"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, Write(&buf, Report{Groups: rows}, format))
			assert.Empty(t, rawControl(buf.String()), "%q", buf.String())
			var back struct {
				Groups []Row `json:"groups" yaml:"groups"`
			}
			switch format {
			case FormatJSON:
				require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
			case FormatYAML:
				require.NoError(t, yaml.Unmarshal(buf.Bytes(), &back))
			default:
				assert.Contains(t, buf.String(), `x\x1b]0;owned\x07\x1b[2K\r\u009b31m\x7f`)
				return
			}
			assert.Equal(t, evil, back.Groups[0].Target)
			assert.Equal(t, evil, back.Groups[0].Ready.Message)
			assert.Equal(t, evil, back.Groups[1].Error)
		})
	}
}

// Issue 37: status shows the state the sweep of deleted namespaces keeps
// on the registrations mirror, under the table and in the scripts' forms.
func TestTheSweepsStateShowsWithTheGroups(t *testing.T) {
	kept := ledger.Sweep{Since: now.Add(-5 * time.Minute), Removed: 1, Waiting: 2, Left: map[string]int{"running": 1, "no_token": 3}}
	tests := []struct {
		name  string
		sweep *Sweep
		line  string // the line under the table; "" for none
		json  string // the JSON form's deletedNamespaces; "" for none
	}{
		{name: "a listener that does not sweep"},
		{name: "a recorded state",
			sweep: SweepOf("platform/rel-registrations", kept, true, nil, now),
			line:  "Deleted namespaces (mirror platform/rel-registrations): 1 removed, 2 namespace(s) being deleted, 4 group(s) may have left registrations (no_token 3, running 1); reported alike since 2026-03-01T11:55:00Z (5m0s ago).",
			json:  `{"mirror":"platform/rel-registrations","recorded":true,"since":"2026-03-01T11:55:00Z","ageSeconds":300,"removed":1,"waiting":2,"left":{"no_token":3,"running":1}}`},
		{name: "no state recorded yet",
			sweep: SweepOf("platform/rel-registrations", ledger.Sweep{}, false, nil, now),
			line:  "Deleted namespaces (mirror platform/rel-registrations): no pass has recorded a sweep yet.",
			json:  `{"mirror":"platform/rel-registrations","recorded":false,"removed":0,"waiting":0}`},
		{name: "a mirror the user may not read",
			sweep: SweepOf("platform/rel-registrations", ledger.Sweep{}, false, errors.New("configmaps \"rel-registrations\" is forbidden"), now),
			line:  `Deleted namespaces (mirror platform/rel-registrations): unreadable: configmaps "rel-registrations" is forbidden.`,
			json:  `{"mirror":"platform/rel-registrations","recorded":false,"removed":0,"waiting":0,"error":"configmaps \"rel-registrations\" is forbidden"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := Report{Groups: Rows(selected(t, listener{}), now), DeletedNamespaces: tt.sweep}
			var table, js, path bytes.Buffer
			require.NoError(t, Write(&table, rep, FormatTable))
			lines := strings.Split(strings.TrimRight(table.String(), "\n"), "\n")
			if tt.line == "" {
				assert.Len(t, lines, 4, "the groups' lines alone")
			} else {
				require.Len(t, lines, 6)
				assert.Empty(t, lines[4])
				assert.Equal(t, tt.line, lines[5])
			}

			require.NoError(t, Write(&js, rep, FormatJSON))
			var doc map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(js.Bytes(), &doc))
			assert.Contains(t, doc, "groups")
			if tt.json == "" {
				assert.NotContains(t, doc, "deletedNamespaces")
			} else {
				assert.JSONEq(t, tt.json, string(doc["deletedNamespaces"]))
			}

			require.NoError(t, Write(&path, rep, "jsonpath={.deletedNamespaces.left.no_token}"))
			if tt.sweep != nil && tt.sweep.Recorded {
				assert.Equal(t, "3", path.String(), "jsonpath reaches the state")
			}
		})
	}
}
