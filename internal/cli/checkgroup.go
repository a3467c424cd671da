package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/why"
)

// CheckGroupCmd is `gitea-runner-scaler check-group NS/NAME` or `-f FILE`:
// what a team adding a group checks, by the rules why and the pass share.
type CheckGroupCmd struct {
	Group        string `arg:"" optional:"" name:"group" placeholder:"NAMESPACE/NAME" help:"The RunnerGroup to check, as it is in the cluster."`
	File         string `short:"f" placeholder:"FILE" help:"A RunnerGroup manifest to check before it is created (- reads standard input); its namespace, else the kubeconfig context's."`
	ListenerView `embed:""`
	Output       string `short:"o" enum:"text,json,yaml" default:"text" help:"Output: text, json or yaml."`

	namespace, name string
}

// Validate runs at parse time: one group, named or in a file.
func (c *CheckGroupCmd) Validate() error {
	switch {
	case c.Group != "" && c.File != "":
		return errors.New("give the group as NAMESPACE/NAME or with -f, not both")
	case c.Group == "" && c.File == "":
		return errors.New("give the group as NAMESPACE/NAME, or its manifest with -f FILE")
	case c.Group != "":
		ns, name, ok := strings.Cut(c.Group, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("the group must be NAMESPACE/NAME, got %q", c.Group)
		}
		c.namespace, c.name = ns, name
	}
	if c.AllNamespaces {
		// The listener serves every namespace, as run's with none.
		c.Namespace = nil
	}
	return c.ListenerView.check()
}

func (c *CheckGroupCmd) run(streams IO) int {
	cl, ok := c.clients(streams.Err)
	if !ok {
		return ExitFailed
	}
	target, kube, dyn := cl.target, cl.kube, cl.dyn
	var err error
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rg *v1alpha1.RunnerGroup
	if c.File != "" {
		rg, err = c.readFile(os.Stdin, target.namespace)
	} else {
		rg, err = getGroup(ctx, dyn, c.namespace, c.name)
	}
	if err != nil {
		printError(streams.Err, err)
		return ExitFailed
	}
	return c.runWith(ctx, why.Deps{Kube: kube, Gitea: c.giteaFactory()}, rg, streams)
}

// runWith checks rg with the given clients (tests pass fakes). It exits
// ExitFailed when something is missing, so a script can stop there.
func (c *CheckGroupCmd) runWith(ctx context.Context, deps why.Deps, rg *v1alpha1.RunnerGroup, streams IO) int {
	rep, err := why.CheckGroup(ctx, deps, c.config(), rg)
	if err != nil {
		printError(streams.Err, err)
		return ExitFailed
	}
	if err := why.WriteGroup(streams.Out, rep, c.Output); err != nil {
		printError(streams.Err, err)
		return ExitFailed
	}
	if rep.Missing() > 0 {
		return ExitFailed
	}
	return ExitOK
}

// readFile reads the manifest of -f, strictly, as the API server would
// refuse an unknown field; without a namespace it takes the context's.
func (c *CheckGroupCmd) readFile(stdin io.Reader, contextNamespace string) (*v1alpha1.RunnerGroup, error) {
	var raw []byte
	var err error
	if c.File == "-" {
		raw, err = io.ReadAll(stdin)
	} else {
		raw, err = os.ReadFile(c.File)
	}
	if err != nil {
		return nil, err
	}
	var rg v1alpha1.RunnerGroup
	if err := yaml.UnmarshalStrict(raw, &rg); err != nil {
		return nil, fmt.Errorf("%s: %w", c.File, err)
	}
	if rg.Kind != v1alpha1.Kind || rg.APIVersion != v1alpha1.GroupVersion.String() {
		return nil, fmt.Errorf("%s: not a %s of %s (kind %q, apiVersion %q)", c.File, v1alpha1.Kind, v1alpha1.GroupVersion, rg.Kind, rg.APIVersion)
	}
	if rg.Namespace == "" {
		rg.Namespace = contextNamespace
	}
	if rg.Namespace == "" {
		return nil, fmt.Errorf("%s: set metadata.namespace", c.File)
	}
	// What the manifest's status says, no pass recorded.
	rg.UID, rg.Status = "", v1alpha1.RunnerGroupStatus{}
	return &rg, nil
}

// getGroup reads one RunnerGroup with the user's rights.
func getGroup(ctx context.Context, dyn dynamic.Interface, namespace, name string) (*v1alpha1.RunnerGroup, error) {
	u, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var rg v1alpha1.RunnerGroup
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rg); err != nil {
		return nil, fmt.Errorf("RunnerGroup %s/%s: %w", namespace, name, err)
	}
	return &rg, nil
}
