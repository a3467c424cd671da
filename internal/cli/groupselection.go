package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/selector"
)

// GroupSelectionFlags pick the RunnerGroups a listener serves.
type GroupSelectionFlags struct {
	Namespace       []string `short:"n" env:"SCALER_NAMESPACES" placeholder:"NS" help:"Namespace to serve (repeat, or comma-separated in the env var); empty serves all namespaces."`
	Selector        string   `env:"SCALER_SELECTOR" placeholder:"SELECTOR" help:"Label selector over RunnerGroups: 'team=infra,tier in (gpu)', or a JSON LabelSelector such as '{\"matchLabels\":{\"team\":\"infra\"}}'."`
	ExcludeSelector []string `env:"SCALER_EXCLUDE_SELECTORS" sep:";" placeholder:"SELECTOR" help:"Skip RunnerGroups this selector matches, in either form of --selector (repeat, or ';'-separated in the env var): those belong to another listener."`
}

// validate parses the selectors and drops blank and repeated namespaces.
func (f *GroupSelectionFlags) validate() error {
	var errs []error
	if _, err := selector.Parse(f.Selector); err != nil {
		errs = append(errs, fmt.Errorf("--selector %q: %w", f.Selector, err))
	}
	for _, s := range f.ExcludeSelector {
		if _, err := selector.ParseExclude(s); err != nil {
			errs = append(errs, fmt.Errorf("--exclude-selector %q: %w", s, err))
		}
	}
	f.Namespace = compact(f.Namespace)
	return errors.Join(errs...)
}

func compact(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range in {
		s = strings.TrimSpace(s)
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
