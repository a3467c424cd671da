// Package status is `gitea-runner-scaler status`: one line per RunnerGroup,
// read from what the last pass recorded in the group's status, so it needs
// no Gitea token and writes nothing.
package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
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

// Report is what status prints: the selected groups and, for a listener
// that sweeps deleted namespaces, that sweep's state.
type Report struct {
	Groups []Row `json:"groups" yaml:"groups"`
	// DeletedNamespaces is nil unless the mirror was named.
	DeletedNamespaces *Sweep `json:"deletedNamespaces,omitempty" yaml:"deletedNamespaces,omitempty"`
}

// Sweep is the state the sweep of deleted namespaces keeps on the
// registrations mirror (ledger.Sweep): what its passes last reported, and
// since when.
type Sweep struct {
	// Mirror is the ConfigMap, namespace/name.
	Mirror string `json:"mirror" yaml:"mirror"`
	// Recorded is false when no pass has recorded a state there yet.
	Recorded   bool       `json:"recorded" yaml:"recorded"`
	Since      *time.Time `json:"since,omitempty" yaml:"since,omitempty"`
	AgeSeconds *int64     `json:"ageSeconds,omitempty" yaml:"ageSeconds,omitempty"`
	Removed    int        `json:"removed" yaml:"removed"`
	Waiting    int        `json:"waiting" yaml:"waiting"`
	// Left counts, per reason, recorded groups of deleted namespaces that
	// may still have registrations in Gitea.
	Left map[string]int `json:"left,omitempty" yaml:"left,omitempty"`
	// Error says why the mirror could not be read.
	Error string `json:"error,omitempty" yaml:"error,omitempty"`
}

// SweepOf is the state kept on mirror, as LastSweep read it (ok false:
// none kept; err: not read).
func SweepOf(mirror string, kept ledger.Sweep, ok bool, err error, now time.Time) *Sweep {
	s := &Sweep{Mirror: mirror}
	switch {
	case err != nil:
		s.Error = err.Error()
	case ok:
		since := kept.Since.UTC()
		age := int64(now.Sub(since) / time.Second)
		s.Recorded, s.Since, s.AgeSeconds = true, &since, &age
		s.Removed, s.Waiting, s.Left = kept.Removed, kept.Waiting, kept.Left
	}
	return s
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
func Write(w io.Writer, rep Report, format string) error {
	f, err := ParseFormat(format)
	if err != nil {
		return err
	}
	if rep.Groups == nil {
		rep.Groups = []Row{} // scripts get a list, never null
	}
	switch f.kind {
	case FormatJSON:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
		_, err := w.Write(termtext.JSON(buf.Bytes()))
		return err
	case FormatYAML:
		// yaml.v3 escapes control characters in the strings it quotes.
		return yaml.NewEncoder(w).Encode(rep)
	case FormatTable:
		if err := table(w, rep.Groups); err != nil {
			return err
		}
		return sweepLine(w, rep.DeletedNamespaces)
	default:
		return f.write(w, rep)
	}
}

// sweepLine says the sweep's state under the table, when there is one.
func sweepLine(w io.Writer, s *Sweep) error {
	if s == nil {
		return nil
	}
	var state string
	switch {
	case s.Error != "":
		state = "unreadable: " + oneLine(s.Error)
	case !s.Recorded:
		state = "no pass has recorded a sweep yet"
	default:
		left, reasons := 0, make([]string, 0, len(s.Left))
		for _, reason := range slices.Sorted(maps.Keys(s.Left)) {
			left += s.Left[reason]
			reasons = append(reasons, fmt.Sprintf("%s %d", reason, s.Left[reason]))
		}
		state = fmt.Sprintf("%d removed, %d namespace(s) being deleted, %d group(s) may have left registrations", s.Removed, s.Waiting, left)
		if len(reasons) > 0 {
			state += " (" + strings.Join(reasons, ", ") + ")"
		}
		state += fmt.Sprintf("; reported alike since %s (%s ago)", s.Since.Format(time.RFC3339), time.Duration(*s.AgeSeconds)*time.Second)
	}
	_, err := fmt.Fprintf(w, "\nDeleted namespaces (mirror %s): %s.\n", termtext.Escape(s.Mirror), termtext.Escape(state))
	return err
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
