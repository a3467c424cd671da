package why

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"
)

// Write prints the report: "text" in sentences, "json" or "yaml" for scripts.
func Write(w io.Writer, rep *Report, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	case "yaml":
		// Through JSON, so the keys are the JSON names.
		raw, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		return yaml.NewEncoder(w).Encode(v)
	case "", "text":
		var b strings.Builder
		for _, l := range rep.Explanation {
			b.WriteString(l + "\n")
		}
		if len(rep.Groups) > 0 {
			b.WriteString("\nGroups on this Gitea:\n")
			for _, g := range rep.Groups {
				fmt.Fprintf(&b, "  %s: %s\n", g.Group, groupLine(g))
			}
		}
		for _, n := range rep.Notes {
			b.WriteString("note: " + n + "\n")
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
