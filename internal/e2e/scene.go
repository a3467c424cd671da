//go:build e2e

// The usual scene of a scaler or chart test: the chart installed, serving one
// RunnerGroup of a Gitea organisation.

package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// SceneOpts says how servedGroup sets the scene up.
type SceneOpts struct {
	// Name names what the scene makes: the namespace e2e-<name>-<random>,
	// the Gitea organisation and the runner label e2e-<name>-<run suffix>,
	// and the RunnerGroup rg-<name>.
	Name string
	// Group overrides the RunnerGroup's name.
	Group string
	// Max is the group's maxActiveRunners.
	Max int32
	// Values are the release's values; the scene sets watchNamespaces to the
	// group's namespace. Nil means deploymentValues.
	Values map[string]any
	// ListenerNamespace installs the release into a namespace of its own,
	// e2e-<name>-sys-<random>, rather than the group's.
	ListenerNamespace bool
	// Template is the group's spec.template; nil for none.
	Template *corev1.PodTemplateSpec
	// MinIdle is the group's spec.minIdleRunners (the warm pool).
	MinIdle int32
	// MintToken leaves spec.registrationToken out: the scaler mints it.
	MintToken bool
	// RunnerConfig is the group's spec.runnerConfig; nil for none.
	RunnerConfig *v1alpha1.RunnerConfig
}

// Scene is what servedGroup made.
type Scene struct {
	NS    string // the group's namespace
	Sys   string // the release's namespace: ns unless listenerNamespace
	Rel   HelmRelease
	Fx    ScopeFixture // an organisation with the repository "app"
	Group string
	Label string // the label the group offers besides the scaler's defaults
	RG    *v1alpha1.RunnerGroup
	// Dump describes the namespaces and the repository's jobs for a
	// failure message.
	Dump func() string
}

// ServedGroup sets up the usual scene: a namespace, the chart installed
// (watching it), an organisation with one repository, a Secret with the
// organisation's tokens and a RunnerGroup using it. Everything goes when the
// test ends.
func (b *Testbed) ServedGroup(ctx context.Context, t *testing.T, o SceneOpts) Scene {
	t.Helper()
	s := Scene{Group: o.Group, Label: Uniq("e2e-" + o.Name)}
	if s.Group == "" {
		s.Group = "rg-" + o.Name
	}
	s.NS = b.Namespace(ctx, t, "e2e-"+o.Name, nil)
	namespaces := []string{s.NS}
	s.Sys = s.NS
	if o.ListenerNamespace {
		s.Sys = b.Namespace(ctx, t, "e2e-"+o.Name+"-sys", nil)
		namespaces = append([]string{s.Sys}, namespaces...)
	}
	values := o.Values
	if values == nil {
		values = DeploymentValues()
	}
	values["watchNamespaces"] = []string{s.NS}
	s.Rel = b.HelmInstall(ctx, t, s.Sys, "gro", values)
	s.Fx = b.NewOrgScope(ctx, t, Uniq("e2e-"+o.Name))
	secret := GroupSecret(s.Group)
	b.TokenSecret(ctx, t, s.NS, secret, s.Fx.RegToken, s.Fx.APIToken)
	spec := b.GroupSpec(s.Fx, secret, o.Max, s.Label)
	spec.Template = o.Template
	spec.RunnerConfig = o.RunnerConfig
	spec.MinIdleRunners = o.MinIdle
	if o.MintToken {
		spec.RegistrationToken = nil
	}
	s.RG = b.CreateGroup(ctx, t, s.NS, s.Group, nil, spec)
	s.Dump = func() string { return b.DumpNamespaces(namespaces...) + b.Gitea.JobsLine(s.Fx.Repo) }
	return s
}
