package cli

import (
	"fmt"
	"io"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// KubeFlags reach a cluster as kubectl does, through client-go's own
// loading rules: --kubeconfig, else $KUBECONFIG (a list of files, merged),
// else ~/.kube/config, else the pod's in-cluster config; --context picks a
// context of that config instead of its current one.
type KubeFlags struct {
	Kubeconfig string `placeholder:"PATH" help:"Kubeconfig file; empty reads $KUBECONFIG (a ':'-separated list), then ~/.kube/config, then the pod's in-cluster config."`
	Context    string `name:"context" placeholder:"NAME" help:"Kubeconfig context to use instead of its current one."`
}

// kubeTarget is a loaded client config and what it says of namespaces.
type kubeTarget struct {
	config *rest.Config
	// namespace is the context's namespace ("default" when it names
	// none), as kubectl would use it; "" with the in-cluster config,
	// where the scaler's own flags name the namespaces.
	namespace string
}

func (f KubeFlags) load() (kubeTarget, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.Kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.Context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return kubeTarget{}, err
	}
	cfg.UserAgent = userAgent()
	t := kubeTarget{config: cfg}
	// With no kubeconfig at all, client-go falls back to the in-cluster
	// config, whose namespace (the pod's) is not a choice of the user.
	if raw, err := cc.RawConfig(); err == nil && len(raw.Contexts) > 0 {
		if t.namespace, _, err = cc.Namespace(); err != nil {
			return kubeTarget{}, err
		}
	}
	return t, nil
}

// kubeClients is what a read-only command talks to the cluster with.
type kubeClients struct {
	target kubeTarget
	kube   kubernetes.Interface
	dyn    dynamic.Interface
}

// clients loads the config and makes both clients (neither asks the
// cluster anything yet); on failure it says so on errOut and ok is false.
func (f KubeFlags) clients(errOut io.Writer) (c kubeClients, ok bool) {
	var err error
	if c.target, err = f.load(); err != nil {
		fmt.Fprintf(errOut, "gitea-runner-scaler: cannot load Kubernetes client config: %v\n", err)
		return c, false
	}
	if c.kube, err = kubernetes.NewForConfig(c.target.config); err == nil {
		c.dyn, err = dynamic.NewForConfig(c.target.config)
	}
	if err != nil {
		fmt.Fprintf(errOut, "gitea-runner-scaler: cannot create Kubernetes client: %v\n", err)
		return c, false
	}
	return c, true
}
