package why

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/termtext"
)

// Write prints the report: "text" in sentences, "json" or "yaml" for scripts.
func Write(w io.Writer, rep *Report, format string) error {
	switch format {
	case "json", "yaml":
		return writeData(w, rep, format)
	case "", "text":
		// Sentences, labels, notes and group names carry what group
		// writers and Gitea wrote: each line is escaped (termtext).
		var b strings.Builder
		for _, l := range rep.Explanation {
			b.WriteString(termtext.Escape(l) + "\n")
		}
		if len(rep.Groups) > 0 {
			b.WriteString("\nGroups on this Gitea:\n")
			for _, g := range rep.Groups {
				fmt.Fprintf(&b, "  %s: %s\n", termtext.Escape(g.Group), termtext.Escape(groupLine(g)))
			}
		}
		for _, n := range rep.Notes {
			b.WriteString("note: " + termtext.Escape(n) + "\n")
		}
		fmt.Fprintf(&b, "verdict: %s\n", rep.Verdict)
		_, err := io.WriteString(w, b.String())
		return err
	default:
		return fmt.Errorf("unknown output %q: want text, json or yaml", format)
	}
}

func groupLine(g GroupVerdict) string {
	var parts []string
	switch {
	case !g.InScope:
		parts = append(parts, "scope does not contain the repository")
	case len(g.MissingLabels) > 0:
		parts = append(parts, "lacks "+strings.Join(g.MissingLabels, ", "))
	default:
		parts = append(parts, "can run it")
	}
	if !g.Eligible {
		parts = append(parts, "cannot serve now (paused or failing)")
	}
	if g.Assigned {
		parts = append(parts, "ASSIGNED")
	}
	return strings.Join(parts, "; ") + " [labels: " + strings.Join(g.Labels, ", ") + "]"
}

// WriteGroup prints a group's check: "text" a line per check with the fix
// under each that does not hold, "json" or "yaml" for scripts.
func WriteGroup(w io.Writer, rep *GroupReport, format string) error {
	switch format {
	case "json", "yaml":
		return writeData(w, rep, format)
	case "", "text":
		// Messages carry what group writers and Gitea wrote: escaped.
		var b strings.Builder
		fmt.Fprintf(&b, "group %s\n", termtext.Escape(rep.Group))
		for _, f := range rep.Findings {
			mark := "ok     "
			switch {
			case f.Skipped:
				mark = "skipped"
			case !f.OK:
				mark = "MISSING"
			}
			line := f.Check
			if f.Message != "" {
				line += ": " + f.Message
			}
			if f.Reason != "" && !f.OK {
				line += " (" + f.Reason + ")"
			}
			fmt.Fprintf(&b, "  %s  %s\n", mark, termtext.Escape(line))
			if f.Fix != "" {
				fmt.Fprintf(&b, "           fix: %s\n", termtext.Escape(f.Fix))
			}
		}
		fmt.Fprintf(&b, "missing: %d\n", rep.Missing())
		_, err := io.WriteString(w, b.String())
		return err
	default:
		return fmt.Errorf("unknown output %q: want text, json or yaml", format)
	}
}

// writeData prints v as json or yaml, safe for a terminal.
func writeData(w io.Writer, v any, format string) error {
	if format == "json" {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return err
		}
		_, err := w.Write(termtext.JSON(buf.Bytes()))
		return err
	}
	// Through JSON, so the keys are the JSON names; yaml.v3 escapes
	// control characters in the strings it quotes.
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var data any
	if err := json.Unmarshal(raw, &data); err != nil {
		return err
	}
	return yaml.NewEncoder(w).Encode(data)
}
