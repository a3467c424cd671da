package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/enable"
)

// EnableNamespaceCmd is `gitea-runner-scaler enable-namespace NS`: the
// platform's steps to enable a tenant namespace, printed or applied with
// server-side apply, as kubectl users expect of --dry-run and -o.
type EnableNamespaceCmd struct {
	KubeFlags         `embed:""`
	Namespace         string   `arg:"" name:"namespace" help:"The tenant namespace to enable."`
	TenantClusterRole string   `env:"SCALER_TENANT_CLUSTER_ROLE" placeholder:"NAME" help:"The chart's tenant ClusterRole (NOTES name it)."`
	ServiceAccount    string   `env:"SCALER_SERVICE_ACCOUNT" placeholder:"NS:NAME" help:"The scaler's ServiceAccount, namespace:name (NOTES name it)."`
	PodSecurity       string   `default:"privileged" placeholder:"LEVEL" help:"The namespace's pod-security.kubernetes.io/enforce level: privileged for the built-in Docker-in-Docker runner pod, or baseline/restricted for runner templates that need less; empty leaves the label as it is."`
	GiteaURL          []string `name:"grant-gitea-url" placeholder:"URL" help:"Grant this Gitea URL to the namespace's groups (repeat; gitea.bpg.pw/granted-gitea-urls)."`
	Repository        []string `name:"grant-repository" placeholder:"OWNER[/REPO]" help:"Grant this owner or repository, or * for the whole instance (repeat; gitea.bpg.pw/granted-repositories)."`
	TokenSecret       string   `placeholder:"NAME" help:"The namespace's token Secret to label for the scaler (it must exist)."`
	RegistrationKey   []string `name:"registration-token-key" placeholder:"KEY" help:"A key of --token-secret holding a registration token (repeat)."`
	APIKey            []string `name:"api-token-key" placeholder:"KEY" help:"A key of --token-secret holding an API token (repeat)."`
	MintKey           []string `name:"mint-token-key" placeholder:"KEY" help:"A key of --token-secret whose API token may mint registration tokens (repeat; also an API token key)."`
	DryRun            string   `name:"dry-run" enum:"none,client,server" default:"none" help:"none applies; client prints only; server asks the API server to check without persisting."`
	Output            string   `short:"o" enum:",yaml,json" default:"" help:"Print the objects as yaml or json instead of one line each."`
	ForceConflicts    bool     `help:"Take over the fields another manager set (kubectl label, an earlier apply), as kubectl apply --server-side --force-conflicts does; without it such a field is a conflict, and nothing after it is applied."`
}

func (c *EnableNamespaceCmd) request() enable.Request {
	// A mint key is an API token key too (tenancy's key annotations).
	return enable.Request{
		Namespace: c.Namespace, TenantClusterRole: c.TenantClusterRole, ServiceAccount: c.ServiceAccount,
		PodSecurity: c.PodSecurity, GiteaURLs: c.GiteaURL, Repositories: c.Repository, TokenSecret: c.TokenSecret,
		RegistrationKeys: c.RegistrationKey, APIKeys: slices.Concat(c.APIKey, c.MintKey), MintKeys: c.MintKey,
	}
}

// Validate refuses, at parse time, a request that cannot be applied.
func (c *EnableNamespaceCmd) Validate() error { return c.request().Validate() }

func (c *EnableNamespaceCmd) run(streams IO) int {
	if c.DryRun == "client" {
		// Like kubectl's: printed from the flags alone, no cluster asked.
		return c.runWith(context.Background(), nil, streams)
	}
	cl, ok := c.clients(streams.Err)
	if !ok {
		return ExitFailed
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.runWith(ctx, cl.kube, streams)
}

// runWith applies (or prints) each object in order, stopping at the first
// refusal: the RoleBinding, the Namespace, the Secret. A client dry run
// gets no kube and asks nothing.
func (c *EnableNamespaceCmd) runWith(ctx context.Context, kube kubernetes.Interface, streams IO) int {
	r := c.request()
	opts := metav1.ApplyOptions{FieldManager: enable.FieldManager, Force: c.ForceConflicts}
	if c.DryRun == "server" {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var out []any
	say := func(kind, name string, obj any) {
		out = append(out, obj)
		if c.Output == "" {
			fmt.Fprintf(streams.Out, "%s/%s %s\n", kind, name, c.verb())
		}
	}
	fail := func(what string, err error) int {
		if apierrors.IsConflict(err) && !c.ForceConflicts {
			// A namespace labelled by hand before, most often.
			err = fmt.Errorf("%w; --force-conflicts sets these fields as asked, taking them over", err)
		}
		printError(streams.Err, fmt.Errorf("%s: %w", what, err))
		return ExitFailed
	}

	rb := r.RoleBinding()
	if c.DryRun != "client" {
		if _, err := kube.RbacV1().RoleBindings(r.Namespace).Apply(ctx, rb, opts); err != nil {
			return fail("RoleBinding "+r.Namespace+"/"+r.TenantClusterRole, err)
		}
	}
	say("rolebinding.rbac.authorization.k8s.io", r.TenantClusterRole, rb)

	if ns := r.NamespaceObject(); ns != nil {
		if c.DryRun != "client" {
			if _, err := kube.CoreV1().Namespaces().Apply(ctx, ns, opts); err != nil {
				return fail("Namespace "+r.Namespace, err)
			}
		}
		say("namespace", r.Namespace, ns)
	}

	if sec := r.Secret(); sec != nil {
		if c.DryRun != "client" {
			// Apply would create an empty Secret: the tokens are the
			// namespace's to put there first.
			if _, err := kube.CoreV1().Secrets(r.Namespace).Get(ctx, r.TokenSecret, metav1.GetOptions{}); err != nil {
				if apierrors.IsNotFound(err) {
					err = fmt.Errorf("it does not exist: create it with the tokens first (kubectl create secret generic %s --namespace %s --from-literal=KEY=TOKEN ...)", r.TokenSecret, r.Namespace)
				}
				return fail("Secret "+r.Namespace+"/"+r.TokenSecret, err)
			}
			if _, err := kube.CoreV1().Secrets(r.Namespace).Apply(ctx, sec, opts); err != nil {
				return fail("Secret "+r.Namespace+"/"+r.TokenSecret, err)
			}
		}
		say("secret", r.TokenSecret, sec)
	}
	return c.print(streams.Out, out)
}

func (c *EnableNamespaceCmd) verb() string {
	switch c.DryRun {
	case "client":
		return "serverside-applied (dry run)"
	case "server":
		return "serverside-applied (server dry run)"
	}
	return "serverside-applied"
}

// print writes the objects as a kubectl List in yaml or json.
func (c *EnableNamespaceCmd) print(w io.Writer, objs []any) int {
	if c.Output == "" {
		return ExitOK
	}
	list := map[string]any{"apiVersion": "v1", "kind": "List", "items": objs}
	raw, err := json.MarshalIndent(list, "", "  ")
	if err == nil && c.Output == "yaml" {
		raw, err = yaml.JSONToYAML(raw)
	}
	if err != nil {
		printError(w, err)
		return ExitFailed
	}
	if c.Output == "json" {
		raw = append(raw, '\n')
	}
	_, _ = w.Write(raw)
	return ExitOK
}
