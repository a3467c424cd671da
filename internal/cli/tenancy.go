package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/giteaurl"
)

// TenancyFlags say what a RunnerGroup's writer may make the scaler do.
type TenancyFlags struct {
	AllowedGiteaURLs          []string `name:"allowed-gitea-urls" env:"SCALER_ALLOWED_GITEA_URLS" placeholder:"URL" help:"Gitea URLs a group's API token may be sent to (repeat, or comma-separated in the env var): a group's URL needs an entry's scheme, host and port and a path under the entry's. Empty: any host but loopback, link-local and metadata addresses."`
	TenantClusterRole         string   `env:"SCALER_TENANT_CLUSTER_ROLE" placeholder:"NAME" help:"The ClusterRole that enables a namespace when bound there; named in the message of a group whose namespace is not enabled."`
	ServiceAccount            string   `env:"SCALER_SERVICE_ACCOUNT" placeholder:"NS:NAME" help:"The scaler's ServiceAccount (namespace:name); named in the message of a group whose namespace is not enabled."`
	TrustUnlabelledNamespaces bool     `env:"SCALER_TRUST_UNLABELLED_NAMESPACES" help:"Take a namespace without a pod-security.kubernetes.io/enforce label to admit privileged runner pods (the cluster's default level is privileged)."`
	// The scaler cannot read the API server's feature gates, so the
	// platform says this one: without it the pre-check refuses the
	// user-namespaced pods such an API server admits.
	UserNamespacesPodSecurityStandards bool          `env:"SCALER_USER_NAMESPACES_POD_SECURITY_STANDARDS" help:"The API server (before Kubernetes 1.35) runs with the feature gate UserNamespacesPodSecurityStandards (alpha, off by default): judge runner pods with hostUsers: false as its Pod Security does, which admits any procMount and, at restricted, any user id for them. Set it only when the gate is on; from 1.35 the scaler does so by the API server's version, without it."`
	AssignmentHold                     time.Duration `env:"SCALER_ASSIGNMENT_HOLD" default:"10m" help:"How long the groups of one namespace keep a queued job that groups of other namespaces could also run, before it goes in turn to those (give every listener and why the same)."`
	RightsRecheck                      time.Duration `env:"SCALER_RIGHTS_RECHECK" default:"0s" help:"With --loop: how long a namespace's rights review that found it enabled is trusted, at most (each for a random half to all of it). 0 reviews every namespace every pass, so a removed RoleBinding is seen by the next pass; more saves one review per namespace per pass, and a removed RoleBinding then waits for the next review."`
}

// validate checks the durations, the allowed Gitea URLs and the
// ServiceAccount's form.
func (f *TenancyFlags) validate() error {
	var errs []error
	if f.RightsRecheck < 0 {
		errs = append(errs, fmt.Errorf("--rights-recheck must be 0 or more, got %s", f.RightsRecheck))
	}
	if f.AssignmentHold <= 0 {
		errs = append(errs, fmt.Errorf("--assignment-hold must be positive, got %s", f.AssignmentHold))
	}
	if _, err := giteaPolicy(f.AllowedGiteaURLs); err != nil {
		errs = append(errs, err)
	}
	if f.ServiceAccount != "" {
		if ns, name, ok := strings.Cut(f.ServiceAccount, ":"); !ok || ns == "" || name == "" {
			errs = append(errs, fmt.Errorf("--service-account must be namespace:name, got %q", f.ServiceAccount))
		}
	}
	return errors.Join(errs...)
}

// allowedGiteaURLs is --allowed-gitea-urls as a policy; validate has
// refused a list that does not parse.
func (f *TenancyFlags) allowedGiteaURLs() *giteaurl.Policy {
	p, _ := giteaurl.Parse(f.AllowedGiteaURLs)
	return p
}
