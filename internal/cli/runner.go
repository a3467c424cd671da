package cli

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/podtemplate"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerconfig"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerlabels"
)

// RunnerFlags shape every runner pod: the built-in pod's settings, the
// install-wide template and runner config layers over it.
type RunnerFlags struct {
	RunnerImage   string   `env:"SCALER_RUNNER_IMAGE" default:"gitea/runner:3.1.0-dind-rootless" help:"Image of the runner container in the built-in runner pod (a runner template may set another)."`
	DefaultLabels []string `env:"SCALER_DEFAULT_LABELS" placeholder:"LABEL" help:"Labels every group gets unless it sets a label of the same name (comma-separated). Default: act_runner's defaults (ubuntu-latest, ubuntu-24.04, ubuntu-22.04)."`
	RunnerJobTTL  int32    `env:"SCALER_RUNNER_JOB_TTL" default:"600" help:"ttlSecondsAfterFinished of runner Jobs."`
	// runnerjob.DefaultTerminationGracePeriodSeconds: the runner's 3h job
	// timeout and 2 minutes to report.
	RunnerTerminationGracePeriod int64 `env:"SCALER_RUNNER_TERMINATION_GRACE_PERIOD" default:"10920" placeholder:"SECONDS" help:"terminationGracePeriodSeconds of the built-in runner pod: how long a runner may finish its job after SIGTERM (a drain, an eviction, a deleted Job); keep it above the runner's shutdown_timeout. runnerTemplate and a group's spec.template may set another."`
	RunnerSelfRegistration       bool  `env:"SCALER_RUNNER_SELF_REGISTRATION" default:"false" negatable:"" help:"Runner pods get the scope's registration token and register themselves, for a runner image whose entrypoint must register. Off (the default): the scaler registers each runner and its pod gets only that runner's own credentials."`
	// The install-wide runner pod template (the chart's runnerTemplate,
	// mounted from a ConfigMap) and the fields groups may not change.
	RunnerTemplate       string   `env:"SCALER_RUNNER_TEMPLATE" placeholder:"PATH" type:"path" help:"YAML file with a pod template (metadata and spec) merged over the built-in runner pod and under each group's spec.template; empty for none."`
	RunnerTemplatePinned []string `env:"SCALER_RUNNER_TEMPLATE_PINNED" placeholder:"FIELD" help:"Fields a group's spec.template may not set, spec.<pod field> or runner.<container field>, e.g. spec.runtimeClassName,runner.image (repeat, or comma-separated)."`
	// The install-wide layers of every group's runner config (the chart's
	// runnerConfig.defaults and runnerConfig.pinned), as JSON or YAML text.
	RunnerConfigDefaults string `env:"SCALER_RUNNER_CONFIG_DEFAULTS" placeholder:"YAML" help:"Runner config (gitea/runner's keys, the subset of spec.runnerConfig) merged under each group's spec.runnerConfig; empty for none."`
	RunnerConfigPinned   string `env:"SCALER_RUNNER_CONFIG_PINNED" placeholder:"YAML" help:"Runner config merged over each group's spec.runnerConfig; a group that sets one of its fields fails with InvalidRunnerConfig; empty for none."`
	// The flavour of groups that set none, and whether they may (the
	// chart's runnerFlavour).
	DefaultFlavour string `env:"SCALER_DEFAULT_FLAVOUR" default:"Auto" enum:"Auto,Privileged,UserNamespaced" help:"Flavour of the runner pods of a group that leaves spec.flavour unset: Auto (privileged where the namespace admits it, else user-namespaced where set up), Privileged or UserNamespaced."`
	FlavourPinned  bool   `env:"SCALER_FLAVOUR_PINNED" help:"A group that sets spec.flavour to another than --default-flavour fails with InvalidSpec."`
	// The UserNamespaced flavour's setup (the chart's userNamespacedRunners).
	UserNamespacedRunnerImage    string `env:"SCALER_USER_NAMESPACED_RUNNER_IMAGE" placeholder:"IMAGE" help:"Image of the runner container in user-namespaced runner pods (spec.flavour UserNamespaced, and Auto in a namespace that refuses privileged pods): dind-rootless made ready for a user namespace (the chart's docs/runner-pods.md). Empty (the default): that flavour is not set up."`
	UserNamespacedSeccompProfile string `env:"SCALER_USER_NAMESPACED_SECCOMP_PROFILE" default:"rootless-dind.json" placeholder:"PATH" help:"Localhost seccomp profile of user-namespaced runner pods, relative to the kubelet's seccomp folder on every node (policies/seccomp/rootless-dind.json, installed there)."`
	UserNamespacedTunResource    string `env:"SCALER_USER_NAMESPACED_TUN_RESOURCE" placeholder:"RESOURCE" help:"Extended resource by which a device plugin hands pods /dev/net/tun (for example squat.ai/tun), which user-namespaced runner pods ask one of; required with --user-namespaced-runner-image."`
}

// validate checks the built-in pod's settings and the default labels, and
// reads the template and the runner config layers as a pass would.
func (f *RunnerFlags) validate() error {
	var errs []error
	if strings.TrimSpace(f.RunnerImage) == "" {
		errs = append(errs, errors.New("--runner-image must not be empty"))
	}
	for _, l := range f.DefaultLabels {
		if strings.TrimSpace(l) == "" || strings.ContainsAny(l, " \t") || runnerlabels.Name(l) == "" {
			errs = append(errs, fmt.Errorf("--default-labels: invalid label %q", l))
		}
	}
	if f.RunnerJobTTL < 0 {
		errs = append(errs, fmt.Errorf("--runner-job-ttl must be 0 or more, got %d", f.RunnerJobTTL))
	}
	if f.RunnerTerminationGracePeriod < 1 {
		errs = append(errs, fmt.Errorf("--runner-termination-grace-period must be at least 1 second, got %d: a runner pod killed at once cannot report its job to Gitea", f.RunnerTerminationGracePeriod))
	}
	errs = append(errs, f.validateUserNamespaced())
	if f.DefaultFlavour == string(v1alpha1.FlavourUserNamespaced) && f.UserNamespacedRunnerImage == "" {
		errs = append(errs, errors.New("--default-flavour UserNamespaced needs --user-namespaced-runner-image: the flavour is not set up"))
	}
	if _, err := f.runnerOptions(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validateUserNamespaced checks the UserNamespaced flavour's setup: all of
// it or none, a tun resource a pod may ask for, a profile path the kubelet
// reads below its seccomp folder.
func (f *RunnerFlags) validateUserNamespaced() error {
	image, tun := strings.TrimSpace(f.UserNamespacedRunnerImage), strings.TrimSpace(f.UserNamespacedTunResource)
	if image == "" {
		if tun != "" {
			return errors.New("--user-namespaced-tun-resource is set without --user-namespaced-runner-image: set the image too, or neither")
		}
		return nil
	}
	var errs []error
	if tun == "" {
		errs = append(errs, errors.New("--user-namespaced-runner-image needs --user-namespaced-tun-resource: the rootless Docker daemon gives job containers a network through /dev/net/tun, which an unprivileged pod gets only from a device plugin's extended resource"))
	} else if msgs := validation.IsQualifiedName(tun); len(msgs) > 0 || !strings.Contains(tun, "/") || strings.HasSuffix(strings.SplitN(tun, "/", 2)[0], "kubernetes.io") {
		errs = append(errs, fmt.Errorf("--user-namespaced-tun-resource %q is not an extended resource name (domain/name, outside kubernetes.io, such as squat.ai/tun)", tun))
	}
	p := f.UserNamespacedSeccompProfile
	if p == "" || path.IsAbs(p) || slices.Contains(strings.Split(p, "/"), "..") {
		errs = append(errs, fmt.Errorf("--user-namespaced-seccomp-profile %q must be a path relative to the kubelet's seccomp folder, without '..'", p))
	}
	return errors.Join(errs...)
}

// runnerOptions are the runner Jobs' settings from the flags (the shared
// cache's apart: RunnerCacheFlags), with the runner template read and
// checked: strictly decoded (a misplaced key such as tolerations under a
// container is an error, not silently dropped), nothing reserved, and a
// runner pod that Build accepts.
func (f *RunnerFlags) runnerOptions() (runnerjob.Options, error) {
	opts := runnerjob.DefaultOptions()
	opts.Image = f.RunnerImage
	opts.TTLSecondsAfterFinished = f.RunnerJobTTL
	opts.TerminationGracePeriodSeconds = f.RunnerTerminationGracePeriod
	opts.SelfRegistration = f.RunnerSelfRegistration
	opts.DefaultFlavour = v1alpha1.RunnerFlavour(f.DefaultFlavour)
	opts.FlavourPinned = f.FlavourPinned
	if f.UserNamespacedRunnerImage != "" {
		opts.UserNamespaced = runnerjob.UserNamespacedPod{
			Image:          strings.TrimSpace(f.UserNamespacedRunnerImage),
			SeccompProfile: f.UserNamespacedSeccompProfile,
			TunResource:    corev1.ResourceName(strings.TrimSpace(f.UserNamespacedTunResource)),
		}
	}
	if len(f.DefaultLabels) > 0 {
		opts.DefaultLabels = f.DefaultLabels
	}
	pinned, err := podtemplate.ParsePinned(f.RunnerTemplatePinned)
	if err != nil {
		return opts, fmt.Errorf("--runner-template-pinned: %w", err)
	}
	opts.Pinned = pinned
	if opts.Config.Defaults, err = runnerconfig.ParseLayer([]byte(f.RunnerConfigDefaults), "--runner-config-defaults"); err != nil {
		return opts, err
	}
	if opts.Config.Pinned, err = runnerconfig.ParseLayer([]byte(f.RunnerConfigPinned), "--runner-config-pinned"); err != nil {
		return opts, err
	}
	if f.RunnerTemplate == "" {
		return opts, nil
	}
	raw, err := os.ReadFile(f.RunnerTemplate)
	if err != nil {
		return opts, fmt.Errorf("--runner-template: %w", err)
	}
	var tmpl corev1.PodTemplateSpec
	if err := yaml.UnmarshalStrict(raw, &tmpl); err != nil {
		return opts, fmt.Errorf("--runner-template %s: not a pod template (metadata, spec): %w", f.RunnerTemplate, err)
	}
	opts.Template = &tmpl
	if err := runnerjob.CheckInstallTemplate(opts); err != nil {
		return opts, fmt.Errorf("--runner-template %s: %w", f.RunnerTemplate, err)
	}
	return opts, nil
}
