package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/giteaurl"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerlabels"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/why"
)

// WhyCmd is `gitea-runner-scaler why`.
type WhyCmd struct {
	Job          string `arg:"" name:"job" help:"The Gitea job: its URL (https://gitea.example.com/OWNER/REPO/actions/runs/RUN/jobs/JOB) or its ID."`
	ListenerView `embed:""`
	Output       string `short:"o" enum:"text,json,yaml" default:"text" help:"Output: text, json or yaml."`

	ref why.Ref
}

// ListenerView is the listener's settings the read-only commands that
// judge as a pass does (why, check-group) take, by the names and variables
// of run's flags, so the listener's environment gives the answer its
// passes would.
type ListenerView struct {
	Selection     `embed:""`
	DefaultLabels []string      `env:"SCALER_DEFAULT_LABELS" placeholder:"LABEL" help:"The scaler's default runner labels, as run takes them (comma-separated)."`
	GiteaTimeout  time.Duration `env:"SCALER_GITEA_TIMEOUT" default:"10s" help:"Timeout of each request to Gitea."`
	GiteaCAFile   string        `env:"SCALER_GITEA_CA_FILE" placeholder:"PATH" help:"PEM bundle of CAs trusted for Gitea besides the system's."`
	// A group's API token goes only where the listener would send it.
	AllowedGiteaURLs []string      `name:"allowed-gitea-urls" env:"SCALER_ALLOWED_GITEA_URLS" placeholder:"URL" help:"Gitea URLs a group's API token may be sent to, as run takes them (the chart's allowedGiteaURLs); required, unless --any-gitea-url."`
	AnyGiteaURL      bool          `help:"Without --allowed-gitea-urls, send a group's token to any Gitea URL but loopback, link-local and metadata addresses, as a listener with an empty allowedGiteaURLs does."`
	AssignmentHold   time.Duration `env:"SCALER_ASSIGNMENT_HOLD" default:"10m" help:"The listeners' --assignment-hold, as run takes it."`
	// A pass sends a group's API token only from a namespace enabled for
	// the scaler: these commands ask whether it is, for the scaler's
	// ServiceAccount.
	ServiceAccount    string `env:"SCALER_SERVICE_ACCOUNT" placeholder:"NS:NAME" help:"The scaler's ServiceAccount (namespace:name), as run takes it: a group's API token is sent only from a namespace where that ServiceAccount holds the tenant rights, as a pass does; required."`
	TenantClusterRole string `env:"SCALER_TENANT_CLUSTER_ROLE" placeholder:"NAME" help:"The tenant ClusterRole, as run takes it; named in the advice on a namespace that is not enabled."`

	transport *http.Transport
	policy    *giteaurl.Policy
}

// Validate runs at parse time: a bad job reference or flag exits with
// ExitUsage before anything is asked.
func (c *WhyCmd) Validate() error {
	ref, err := why.ParseRef(c.Job)
	if err != nil {
		return err
	}
	c.ref = ref
	return c.ListenerView.check()
}

// check refuses, at parse time, settings a listener would refuse, and
// settles the Gitea transport and URL policy.
func (c *ListenerView) check() error {
	var err error
	if c.GiteaTimeout <= 0 {
		return fmt.Errorf("--gitea-timeout must be positive, got %s", c.GiteaTimeout)
	}
	if c.AssignmentHold <= 0 {
		return fmt.Errorf("--assignment-hold must be positive, got %s", c.AssignmentHold)
	}
	for _, l := range c.DefaultLabels {
		if strings.TrimSpace(l) == "" || strings.ContainsAny(l, " \t") || runnerlabels.Name(l) == "" {
			return fmt.Errorf("--default-labels: invalid label %q", l)
		}
	}
	if c.transport, err = gitea.NewTransport(c.GiteaCAFile); err != nil {
		return fmt.Errorf("--gitea-ca-file: %w", err)
	}
	if c.policy, err = giteaPolicy(c.AllowedGiteaURLs); err != nil {
		return err
	}
	if c.policy.Empty() && !c.AnyGiteaURL {
		return errors.New("a group's API token is sent to the group's Gitea URL: give the allowed Gitea URLs the listener has " +
			"(--allowed-gitea-urls or SCALER_ALLOWED_GITEA_URLS, the chart's allowedGiteaURLs), or --any-gitea-url when that list is empty")
	}
	if c.ServiceAccount == "" {
		return errors.New("a group's API token is sent only where a pass would, and a pass sends it only from a namespace enabled for the scaler: " +
			"give the scaler's ServiceAccount (--service-account or SCALER_SERVICE_ACCOUNT, namespace:name; the chart sets it in the listener's environment)")
	}
	if _, err := tenancy.ServiceAccountIdentity(c.ServiceAccount); err != nil {
		return fmt.Errorf("--service-account: %w", err)
	}
	return c.Selection.Validate()
}

// config is why's Config from the listener's settings.
func (c *ListenerView) config() why.Config {
	return why.Config{
		Namespaces: c.Namespace, Selector: c.Selector, ExcludeSelectors: c.ExcludeSelector,
		DefaultLabels: c.DefaultLabels, AssignmentHold: c.AssignmentHold,
		// The rule a pass applies before it sends a group's token
		// (tokenrule.Refusal), with the listener's settings.
		AllowedGiteaURLs: c.policy,
		Tenancy:          tenancy.Names{TenantClusterRole: c.TenantClusterRole, ServiceAccount: c.ServiceAccount},
	}
}

func (c *WhyCmd) run(streams IO) int {
	cl, ok := c.clients(streams.Err)
	if !ok {
		return ExitFailed
	}
	// Which group serves a job is decided across namespaces, so why looks
	// at all of them unless told otherwise, whatever the context says.
	c.namespacesFor(cl.target, false)
	return c.runWith(context.Background(), why.Deps{
		Kube: cl.kube, Groups: runnergroups.Client{Dynamic: cl.dyn}, Gitea: c.giteaFactory(),
	}, streams)
}

// giteaFactory makes the Gitea clients by run's rule (giteaClients).
func (c *ListenerView) giteaFactory() gitea.Factory {
	return giteaClients(c.policy, c.transport, nil, gitea.Options{Timeout: c.GiteaTimeout, UserAgent: userAgent()})
}

// runWith answers with the given clients (tests pass fakes).
func (c *WhyCmd) runWith(ctx context.Context, deps why.Deps, streams IO) int {
	rep, err := why.Explain(ctx, deps, c.config(), c.ref)
	if err != nil {
		printError(streams.Err, err)
		return ExitFailed
	}
	if err := why.Write(streams.Out, rep, c.Output); err != nil {
		printError(streams.Err, err)
		return ExitFailed
	}
	return ExitOK
}
