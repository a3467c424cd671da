package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/ledger"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/selection"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/selector"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/status"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/termtext"
)

// Selection are the flags that pick RunnerGroups, as `run` reads them (same
// names, same environment variables), for the read-only commands: with the
// listener's environment they show what that listener serves.
type Selection struct {
	KubeFlags       `embed:""`
	Namespace       []string `short:"n" env:"SCALER_NAMESPACES" placeholder:"NS" help:"Namespace to look at (repeat, or comma-separated in the env var); empty means the kubeconfig context's namespace for status, all namespaces for why and inside the listener's pod."`
	AllNamespaces   bool     `short:"A" help:"Look at every namespace, whatever --namespace says."`
	Selector        string   `env:"SCALER_SELECTOR" placeholder:"SELECTOR" help:"Label selector over RunnerGroups, in either form run takes."`
	ExcludeSelector []string `env:"SCALER_EXCLUDE_SELECTORS" sep:";" placeholder:"SELECTOR" help:"Leave out RunnerGroups this selector matches (repeat, or ';'-separated in the env var)."`
}

// Validate runs at parse time, as RunCmd's does.
func (s *Selection) Validate() error {
	if _, err := selector.Parse(s.Selector); err != nil {
		return fmt.Errorf("--selector %q: %w", s.Selector, err)
	}
	for _, x := range s.ExcludeSelector {
		if _, err := selector.ParseExclude(x); err != nil {
			return fmt.Errorf("--exclude-selector %q: %w", x, err)
		}
	}
	s.Namespace = compact(s.Namespace)
	return nil
}

// namespacesFor settles the namespaces to look at as kubectl does: -A all,
// else --namespace, else the kubeconfig context's namespace when
// contextDefault (status, like kubectl get). Inside a pod, with the
// in-cluster config, an empty --namespace means all, as it does for the
// listener whose environment the command then reads.
func (s *Selection) namespacesFor(t kubeTarget, contextDefault bool) {
	switch {
	case s.AllNamespaces:
		s.Namespace = nil
	case len(s.Namespace) == 0 && contextDefault && t.namespace != "":
		s.Namespace = []string{t.namespace}
	}
}

// rule is the listener's choice of groups these flags say.
func (s *Selection) rule() (selection.Rule, error) {
	return selection.New(s.Namespace, s.Selector, s.ExcludeSelector)
}

// printError writes an error of the read-only commands, which may quote
// Gitea or a group's writer, escaped for the terminal (termtext).
func printError(w io.Writer, err error) {
	fmt.Fprintf(w, "gitea-runner-scaler: %s\n", termtext.Escape(err.Error()))
}

// StatusCmd is `gitea-runner-scaler status`.
type StatusCmd struct {
	Selection `embed:""`
	Output    string `short:"o" default:"table" placeholder:"FORMAT" help:"Output, as kubectl's -o: table, json, yaml, name, jsonpath=TEMPLATE (over {\"groups\": [...], \"deletedNamespaces\": {...}}) or custom-columns=HEADER:PATH,... (over one group)."`
	// The listener's variable, so status in its pod shows the sweep.
	DeletedNamespacesMirror string `env:"SCALER_DELETED_NAMESPACES_MIRROR" placeholder:"NS/NAME" help:"Also show the state of the sweep of deleted namespaces kept on this ConfigMap (the chart's cleanup.deletedNamespaces; NOTES name it)."`

	kube kubernetes.Interface
}

// Validate refuses an output format or template that cannot work before
// anything is read.
func (c *StatusCmd) Validate() error {
	if _, err := status.ParseFormat(c.Output); err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	if m := c.DeletedNamespacesMirror; m != "" {
		if ns, name, ok := strings.Cut(m, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("--deleted-namespaces-mirror must be namespace/name, got %q", m)
		}
	}
	return c.Selection.Validate()
}

func (c *StatusCmd) run(streams IO) int {
	cl, ok := c.clients(streams.Err)
	if !ok {
		return ExitFailed
	}
	c.namespacesFor(cl.target, true)
	c.kube = cl.kube
	return c.runWith(context.Background(), runnergroups.Client{Dynamic: cl.dyn}, streams, time.Now())
}

// runWith prints the status of the selected groups. It exits ExitFailed
// when a namespace could not be listed or a group could not be read, after
// printing the rest.
func (c *StatusCmd) runWith(ctx context.Context, groups selection.Lister, streams IO, now time.Time) int {
	rule, err := c.rule()
	if err != nil {
		printError(streams.Err, err)
		return ExitFailed
	}
	sel, err := selection.List(ctx, groups, rule, slog.New(slog.DiscardHandler))
	if err != nil {
		printError(streams.Err, err)
		return ExitFailed
	}
	rep := status.Report{Groups: status.Rows(sel, now)}
	if m := c.DeletedNamespacesMirror; m != "" {
		ns, name, _ := strings.Cut(m, "/")
		kept, ok, err := ledger.Mirror{Client: c.kube, Namespace: ns, Name: name}.LastSweep(ctx)
		rep.DeletedNamespaces = status.SweepOf(m, kept, ok, err, now)
	}
	if err := status.Write(streams.Out, rep, c.Output); err != nil {
		printError(streams.Err, err)
		return ExitFailed
	}
	for _, ns := range sel.FailedNamespaces {
		printError(streams.Err, fmt.Errorf("cannot list the RunnerGroups of namespace %s", ns))
	}
	if len(sel.FailedNamespaces) > 0 || len(sel.Broken) > 0 {
		return ExitFailed
	}
	return ExitOK
}
