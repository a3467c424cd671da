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

// sceneOpts says how servedGroup sets the scene up.
type sceneOpts struct {
	// name names what the scene makes: the namespace e2e-<name>-<random>,
	// the Gitea organisation and the runner label e2e-<name>-<run suffix>,
	// and the RunnerGroup rg-<name>.
	name string
	// group overrides the RunnerGroup's name.
	group string
	// max is the group's maxActiveRunners.
	max int32
	// values are the release's values; the scene sets watchNamespaces to the
	// group's namespace. Nil means deploymentValues.
	values map[string]any
	// listenerNamespace installs the release into a namespace of its own,
	// e2e-<name>-sys-<random>, rather than the group's.
	listenerNamespace bool
	// template is the group's spec.template; nil for none.
	template *corev1.PodTemplateSpec
	// minIdle is the group's spec.minIdleRunners (the warm pool).
	minIdle int32
	// mintToken leaves spec.registrationToken out: the scaler mints it.
	mintToken bool
	// runnerConfig is the group's spec.runnerConfig; nil for none.
	runnerConfig *v1alpha1.RunnerConfig
}

// scene is what servedGroup made.
type scene struct {
	ns    string // the group's namespace
	sys   string // the release's namespace: ns unless listenerNamespace
	rel   helmRelease
	fx    scopeFixture // an organisation with the repository "app"
	group string
	label string // the label the group offers besides the scaler's defaults
	rg    *v1alpha1.RunnerGroup
	// dump describes the namespaces and the repository's jobs for a
	// failure message.
	dump func() string
}

// servedGroup sets up the usual scene: a namespace, the chart installed
// (watching it), an organisation with one repository, a Secret with the
// organisation's tokens and a RunnerGroup using it. Everything goes when the
// test ends.
func (b *bed) servedGroup(ctx context.Context, t *testing.T, o sceneOpts) scene {
	t.Helper()
	s := scene{group: o.group, label: uniq("e2e-" + o.name)}
	if s.group == "" {
		s.group = "rg-" + o.name
	}
	s.ns = b.namespace(ctx, t, "e2e-"+o.name, nil)
	namespaces := []string{s.ns}
	s.sys = s.ns
	if o.listenerNamespace {
		s.sys = b.namespace(ctx, t, "e2e-"+o.name+"-sys", nil)
		namespaces = append([]string{s.sys}, namespaces...)
	}
	values := o.values
	if values == nil {
		values = deploymentValues()
	}
	values["watchNamespaces"] = []string{s.ns}
	s.rel = b.helmInstall(ctx, t, s.sys, "gro", values)
	s.fx = b.newOrgScope(ctx, t, uniq("e2e-"+o.name))
	secret := groupSecret(s.group)
	b.tokenSecret(ctx, t, s.ns, secret, s.fx.regToken, s.fx.apiToken)
	spec := b.groupSpec(s.fx, secret, o.max, s.label)
	spec.Template = o.template
	spec.RunnerConfig = o.runnerConfig
	spec.MinIdleRunners = o.minIdle
	if o.mintToken {
		spec.RegistrationToken = nil
	}
	s.rg = b.createGroup(ctx, t, s.ns, s.group, nil, spec)
	s.dump = func() string { return b.dumpNamespaces(namespaces...) + b.gitea.jobsLine(s.fx.repo) }
	return s
}
