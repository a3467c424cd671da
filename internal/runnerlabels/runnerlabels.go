// Package runnerlabels computes a runner group's effective labels and
// decides, the way Gitea does, whether a runner with those labels can take a
// job. (Runner labels are act_runner's, not Kubernetes labels: hence the
// name, which also keeps it apart from k8s.io/apimachinery/pkg/labels.)
package runnerlabels

import (
	"sort"
	"strings"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// DefaultLabels are the labels act_runner registers when it is given none
// (act_runner 0.2.11 and later). The original operator's defaults ran jobs
// in node:16 images, which reached their end of life, so we follow
// act_runner's current defaults instead.
var DefaultLabels = []string{
	"ubuntu-latest:docker://docker.gitea.com/runner-images:ubuntu-latest",
	"ubuntu-24.04:docker://docker.gitea.com/runner-images:ubuntu-24.04",
	"ubuntu-22.04:docker://docker.gitea.com/runner-images:ubuntu-22.04",
}

// Name returns the part of a runner label that Gitea compares with a job's
// runs-on labels: everything before the first ':'. The rest
// (":docker://image", ":host") tells act_runner how to run the job and is
// never seen by Gitea's matching.
func Name(label string) string {
	name, _, _ := strings.Cut(label, ":")
	return name
}

// Effective returns the group's labels followed by the defaults whose names
// the group does not already use: a group label replaces the default of the
// same name (a group that sets "ubuntu-latest:docker://my/image" runs
// ubuntu-latest jobs in its own image). The order is stable so the Job's
// GITEA_RUNNER_LABELS does not change from pass to pass.
func Effective(group, defaults []string) []string {
	out := make([]string, 0, len(group)+len(defaults))
	seen := make(map[string]bool, len(group)+len(defaults))
	for _, list := range [][]string{group, defaults} {
		for _, l := range list {
			l = strings.TrimSpace(l)
			if l == "" || seen[Name(l)] {
				continue
			}
			seen[Name(l)] = true
			out = append(out, l)
		}
	}
	return out
}

// Set is the set of label names a runner declares to Gitea.
type Set map[string]struct{}

// NewSet returns the names of the given runner labels.
func NewSet(runnerLabels []string) Set {
	s := make(Set, len(runnerLabels))
	for _, l := range runnerLabels {
		s[Name(l)] = struct{}{}
	}
	return s
}

// CanRun reports whether Gitea would give a job with these runs-on labels to
// a runner with this set: every job label must be one of the runner's label
// names, compared exactly. A job with no labels matches nothing, because
// Gitea never assigns such a job to any runner.
func (s Set) CanRun(jobLabels []string) bool {
	return len(jobLabels) > 0 && len(s.Missing(jobLabels)) == 0
}

// Missing returns the job's runs-on labels that are not among the set's
// names, in the job's order: what keeps Gitea from giving the job to such a
// runner (for a job with labels; see CanRun for one without).
func (s Set) Missing(jobLabels []string) []string {
	var out []string
	for _, l := range jobLabels {
		if _, ok := s[l]; !ok {
			out = append(out, l)
		}
	}
	return out
}

// Names returns the set's label names, sorted.
func (s Set) Names() []string {
	out := make([]string, 0, len(s))
	for n := range s {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ForGroup returns a group's effective labels: its own, then the defaults
// unless the group opted out of them (spec.defaultLabels: false). A group
// of spec.flavour Host runs jobs on its runner pod, without Docker: its
// default labels are host labels of the same names, so the jobs that ask
// for them still find it.
func ForGroup(spec *v1alpha1.RunnerGroupSpec, defaults []string) []string {
	if !spec.UsesDefaultLabels() {
		defaults = nil
	}
	if spec.Flavour == v1alpha1.FlavourHost && len(defaults) > 0 {
		host := make([]string, len(defaults))
		for i, d := range defaults {
			host[i] = d
			if v1alpha1.IsDockerLabel(d) {
				host[i] = Name(d) + ":host"
			}
		}
		defaults = host
	}
	return Effective(spec.Labels, defaults)
}
