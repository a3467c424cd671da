// Package status is `gitea-runner-scaler status`: one line per RunnerGroup,
// read from what the last pass recorded in the group's status, so it needs
// no Gitea token and writes nothing.
package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/selection"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/termtext"
)

// Row is one RunnerGroup as status shows it. The JSON and YAML forms use
// these field names; they are for scripts, so they only ever grow.
type Row struct {
	Namespace string `json:"namespace" yaml:"namespace"`
	Name      string `json:"name" yaml:"name"`
	// Scope is spec.scope; Target the org, user or owner/repo ("" for
	// global).
	Scope  string `json:"scope" yaml:"scope"`
	Target string `json:"target" yaml:"target"`

	Queued  int32 `json:"queued" yaml:"queued"`
	Blocked int32 `json:"blocked" yaml:"blocked"`
	Running int32 `json:"running" yaml:"running"`
	Active  int32 `json:"active" yaml:"active"`
	Max     int32 `json:"max" yaml:"max"`
	Idle    int32 `json:"idle" yaml:"idle"`
	// Warm counts the idle runners the warm pool keeps (spec.minIdleRunners
	// at most); MinIdle is that spec.
	Warm     int32 `json:"warm" yaml:"warm"`
	MinIdle  int32 `json:"minIdle" yaml:"minIdle"`
	Starting int32 `json:"starting" yaml:"starting"`
	// LeftToOtherGroups counts queued jobs the group could run that the
	// assignment rule gives to another group.
	LeftToOtherGroups int32 `json:"leftToOtherGroups" yaml:"leftToOtherGroups"`

	// LastPass is when a pass last asked Gitea for the group's jobs; nil
	// when none has. AgeSeconds is how long ago, at the time of the call.
	LastPass   *time.Time `json:"lastPass,omitempty" yaml:"lastPass,omitempty"`
	AgeSeconds *int64     `json:"ageSeconds,omitempty" yaml:"ageSeconds,omitempty"`
	// Stale is true when the spec changed after the last pass: the numbers
	// are of the old spec.
	Stale bool `json:"stale" yaml:"stale"`

	Ready         Condition `json:"ready" yaml:"ready"`
	ScalingActive Condition `json:"scalingActive" yaml:"scalingActive"`
	// Cache is the Cache condition: whether the namespace's shared cache
	// server answers (the chart's runnerCache); absent without one.
	Cache *Condition `json:"cache,omitempty" yaml:"cache,omitempty"`

	// Error says why the object could not be read as a RunnerGroup; the
	// other fields are then empty.
	Error string `json:"error,omitempty" yaml:"error,omitempty"`
}

// Condition is one condition's status, reason and message; all empty when
// the group has no such condition yet.
type Condition struct {
	Status  string `json:"status" yaml:"status"`
	Reason  string `json:"reason" yaml:"reason"`
	Message string `json:"message,omitempty" yaml:"message,omitempty"`
}

// Rows makes one row per selected group, in the selection's order, then
// one per object that could not be read.
func Rows(sel selection.Listed, now time.Time) []Row {
	rows := make([]Row, 0, len(sel.Served)+len(sel.Broken))
	for _, rg := range sel.Served {
		rows = append(rows, rowOf(rg, now))
	}
	for _, b := range sel.Broken {
		rows = append(rows, Row{Namespace: b.Namespace, Name: b.Name, Error: b.Err.Error()})
	}
	return rows
}

func rowOf(rg *v1alpha1.RunnerGroup, now time.Time) Row {
	st := rg.Status
	r := Row{
		Namespace: rg.Namespace, Name: rg.Name,
		Scope: string(rg.Spec.Scope), Target: scope.Of(&rg.Spec).Name(),
		Queued: st.QueuedJobs, Blocked: st.BlockedJobs, Running: st.RunningJobs,
		Active: st.ActiveRunners, Max: rg.Spec.MaxActiveRunners,
		Idle: st.IdleRunners, Warm: st.WarmRunners, MinIdle: rg.Spec.MinIdleRunners, Starting: st.StartingRunners, LeftToOtherGroups: st.JobsLeftToOtherGroups,
		Stale:         st.LastCheckTime != nil && st.ObservedGeneration != rg.Generation,
		Ready:         condition(rg, v1alpha1.ConditionReady),
		ScalingActive: condition(rg, v1alpha1.ConditionScalingActive),
	}
	if c := condition(rg, v1alpha1.ConditionCache); c.Status != "" {
		r.Cache = &c
	}
	if st.LastCheckTime != nil {
		t := st.LastCheckTime.UTC()
		age := int64(now.Sub(t) / time.Second)
		r.LastPass, r.AgeSeconds = &t, &age
	}
	return r
}

func condition(rg *v1alpha1.RunnerGroup, typ string) Condition {
	c := meta.FindStatusCondition(rg.Status.Conditions, typ)
	if c == nil {
		return Condition{}
	}
	return Condition{Status: string(c.Status), Reason: c.Reason, Message: c.Message}
}

// Formats of Write.
const (
	FormatTable = "table"
	FormatJSON  = "json"
	FormatYAML  = "yaml"
)

// Write prints the rows in format: a table; {"groups": [...]} in JSON or
// YAML; or, as kubectl's -o does, name, jsonpath=TEMPLATE or
// custom-columns=HEADER:PATH,... (ParseFormat).
func Write(w io.Writer, rows []Row, format string) error {
	f, err := ParseFormat(format)
	if err != nil {
		return err
	}
	switch f.kind {
	case FormatJSON:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string][]Row{"groups": nonNil(rows)}); err != nil {
			return err
		}
		_, err := w.Write(termtext.JSON(buf.Bytes()))
		return err
	case FormatYAML:
		// yaml.v3 escapes control characters in the strings it quotes.
		return yaml.NewEncoder(w).Encode(map[string][]Row{"groups": nonNil(rows)})
	case FormatTable:
		return table(w, rows)
	default:
		return f.write(w, rows)
	}
}

func nonNil(rows []Row) []Row {
	if rows == nil {
		return []Row{}
	}
	return rows
}

func table(w io.Writer, rows []Row) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "No RunnerGroups selected.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUNNERGROUP\tSCOPE\tQUEUED\tBLOCKED\tRUNNING\tACTIVE/MAX\tIDLE/WARM\tLAST PASS\tREADY\tSCALING")
	for _, r := range rows {
		// Names, targets, reasons and errors are written by others
		// (termtext says why they are escaped).
		name := termtext.Escape(r.Namespace + "/" + r.Name)
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\tunreadable: %s\t-\n", name, termtext.Escape(oneLine(r.Error)))
			continue
		}
		scope := r.Scope
		if r.Target != "" {
			scope += " " + r.Target
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d/%d\t%d/%d\t%s\t%s\t%s\n", name, termtext.Escape(scope),
			r.Queued, r.Blocked, r.Running, r.Active, r.Max, r.Idle, r.Warm, lastPass(r), termtext.Escape(cond(r.Ready)), termtext.Escape(cond(r.ScalingActive)))
	}
	return tw.Flush()
}

func lastPass(r Row) string {
	if r.LastPass == nil {
		return "never"
	}
	s := fmt.Sprintf("%s (%s ago)", r.LastPass.Format(time.RFC3339), time.Duration(*r.AgeSeconds)*time.Second)
	if r.Stale {
		s += ", spec changed since"
	}
	return s
}

func cond(c Condition) string {
	if c.Status == "" {
		return "-"
	}
	return c.Status + "/" + c.Reason
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
