package runnerlabels

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

func TestName(t *testing.T) {
	tests := map[string]string{
		"ubuntu-latest":                        "ubuntu-latest",
		"ubuntu-latest:docker://node:20":       "ubuntu-latest",
		"self-hosted:host":                     "self-hosted",
		"gpu:docker://registry:5000/cuda:12.1": "gpu",
		"":                                     "",
	}
	for in, want := range tests {
		assert.Equal(t, want, Name(in), in)
	}
}

func TestEffective(t *testing.T) {
	defaults := []string{"ubuntu-latest:docker://a", "ubuntu-22.04:docker://b"}
	tests := []struct {
		name  string
		group []string
		want  []string
	}{
		{name: "no group labels gives the defaults", want: defaults},
		{
			name:  "group labels come first, defaults follow",
			group: []string{"gpu"},
			want:  []string{"gpu", "ubuntu-latest:docker://a", "ubuntu-22.04:docker://b"},
		},
		{
			name:  "a group label replaces the default of the same name",
			group: []string{"ubuntu-latest:docker://mine"},
			want:  []string{"ubuntu-latest:docker://mine", "ubuntu-22.04:docker://b"},
		},
		{
			name:  "a bare name replaces the default too",
			group: []string{"ubuntu-22.04"},
			want:  []string{"ubuntu-22.04", "ubuntu-latest:docker://a"},
		},
		{
			name:  "duplicate names in the group keep the first",
			group: []string{"x:host", "x:docker://y", " ", ""},
			want:  []string{"x:host", "ubuntu-latest:docker://a", "ubuntu-22.04:docker://b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Effective(tt.group, defaults))
		})
	}
}

// The fixtures README records that a runner whose label name was
// "ubuntu-latest:docker://node:20-bookworm" got no ubuntu-latest job while one
// named "ubuntu-latest" got it at once: matching is on names, exactly.
func TestCanRun(t *testing.T) {
	runner := NewSet(Effective([]string{"self-hosted", "gpu:docker://cuda"}, DefaultLabels))
	tests := []struct {
		name string
		job  []string
		want bool
	}{
		{"default label", []string{"ubuntu-latest"}, true},
		{"every job label is served", []string{"self-hosted", "gpu"}, true},
		{"one job label missing", []string{"self-hosted", "arm64"}, false},
		{"unknown label", []string{"linux-arm64"}, false},
		{"a job asking for the image form never matches", []string{"ubuntu-latest:docker://node:20"}, false},
		{"names are case sensitive", []string{"Ubuntu-Latest"}, false},
		{"a job without labels matches nothing", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, runner.CanRun(tt.job))
		})
	}
}

func TestForGroup(t *testing.T) {
	defaults := []string{"ubuntu-latest:docker://img", "ubuntu-22.04:docker://img2"}
	no, yes := false, true
	tests := []struct {
		name          string
		labels        []string
		defaultLabels *bool
		want          []string
	}{
		{"defaults added when unset", []string{"gpu"}, nil, []string{"gpu", "ubuntu-latest:docker://img", "ubuntu-22.04:docker://img2"}},
		{"defaults added when true", []string{"gpu"}, &yes, []string{"gpu", "ubuntu-latest:docker://img", "ubuntu-22.04:docker://img2"}},
		{"own labels only when false", []string{"gpu"}, &no, []string{"gpu"}},
		{"a Host group's defaults are host labels of the same names", []string{"gpu:host"}, nil, []string{"gpu:host", "ubuntu-latest:host", "ubuntu-22.04:host"}},
		{"a Host group's own label of a default's name wins", []string{"ubuntu-latest"}, nil, []string{"ubuntu-latest", "ubuntu-22.04:host"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &v1alpha1.RunnerGroupSpec{Labels: tt.labels, DefaultLabels: tt.defaultLabels}
			if strings.HasPrefix(tt.name, "a Host group") {
				spec.Flavour = v1alpha1.FlavourHost
			}
			assert.Equal(t, tt.want, ForGroup(spec, defaults))
		})
	}
}

func TestMissingNamesTheJobLabelsTheRunnerLacks(t *testing.T) {
	set := NewSet([]string{"ubuntu-latest:docker://img", "gpu"})
	tests := []struct {
		name string
		job  []string
		want []string
	}{
		{name: "every label offered", job: []string{"gpu", "ubuntu-latest"}, want: nil},
		{name: "one label lacking", job: []string{"ubuntu-latest", "arm64"}, want: []string{"arm64"}},
		{name: "the image part is not a name", job: []string{"docker://img"}, want: []string{"docker://img"}},
		{name: "names compare exactly", job: []string{"GPU", "gpu"}, want: []string{"GPU"}},
		{name: "no labels lack nothing", job: nil, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, set.Missing(tt.job))
			assert.Equal(t, len(tt.job) > 0 && tt.want == nil, set.CanRun(tt.job))
		})
	}
}

func TestNamesAreSorted(t *testing.T) {
	assert.Equal(t, []string{"gpu", "ubuntu-latest", "x"}, NewSet([]string{"x:host", "ubuntu-latest:docker://a", "gpu"}).Names())
	assert.Empty(t, NewSet(nil).Names())
}
