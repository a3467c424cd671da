package v1alpha1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

// TestValidate runs the Go-side check on specs the CRD admits (it must
// accept every one, or the scaler would refuse a group the API server took)
// and on specs the CRD refuses for a rule the scaler relies on (it must
// refuse them with a message naming the field).
func TestValidate(t *testing.T) {
	base := func() v1alpha1.RunnerGroupSpec {
		return v1alpha1.RunnerGroupSpec{
			Scope:             v1alpha1.ScopeOrg,
			Org:               "acme",
			Gitea:             v1alpha1.GiteaSpec{URL: "https://gitea.example.com"},
			Labels:            []string{"self-hosted", "linux:host", "ubuntu-latest:docker://node:20"},
			MaxActiveRunners:  5,
			RegistrationToken: &v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "tokens", Key: "registration"}},
			AuthToken:         v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "tokens", Key: "api"}},
		}
	}
	tests := map[string]struct {
		change func(s *v1alpha1.RunnerGroupSpec)
		want   string // "" means accepted
	}{
		"org":                  {change: func(*v1alpha1.RunnerGroupSpec) {}},
		"global":               {change: func(s *v1alpha1.RunnerGroupSpec) { s.Scope, s.Org = v1alpha1.ScopeGlobal, "" }},
		"user":                 {change: func(s *v1alpha1.RunnerGroupSpec) { s.Scope, s.Org, s.User = v1alpha1.ScopeUser, "", "alice" }},
		"repo owned by an org": {change: func(s *v1alpha1.RunnerGroupSpec) { s.Scope, s.Repo = v1alpha1.ScopeRepo, "app" }},
		"repo owned by a user": {change: func(s *v1alpha1.RunnerGroupSpec) {
			s.Scope, s.Org, s.User, s.Repo = v1alpha1.ScopeRepo, "", "alice", "dotfiles"
		}},
		"paused":                 {change: func(s *v1alpha1.RunnerGroupSpec) { s.MaxActiveRunners = 0 }},
		"no labels":              {change: func(s *v1alpha1.RunnerGroupSpec) { s.Labels = nil }},
		"own labels only":        {change: func(s *v1alpha1.RunnerGroupSpec) { s.DefaultLabels = ptr(false) }},
		"defaults said out loud": {change: func(s *v1alpha1.RunnerGroupSpec) { s.DefaultLabels, s.Labels = ptr(true), nil }},
		"no labels at all": {
			change: func(s *v1alpha1.RunnerGroupSpec) { s.DefaultLabels, s.Labels = ptr(false), nil },
			want:   "spec.labels must name at least one label when spec.defaultLabels is false",
		},
		"http with a path":      {change: func(s *v1alpha1.RunnerGroupSpec) { s.Gitea.URL = "http://10.0.0.1:3000/gitea" }},
		"scope missing":         {change: func(s *v1alpha1.RunnerGroupSpec) { s.Scope = "" }, want: "spec.scope must be one of"},
		"scope unknown":         {change: func(s *v1alpha1.RunnerGroupSpec) { s.Scope = "team" }, want: `not "team"`},
		"global with org":       {change: func(s *v1alpha1.RunnerGroupSpec) { s.Scope = v1alpha1.ScopeGlobal }, want: "must be empty for scope global"},
		"org without org":       {change: func(s *v1alpha1.RunnerGroupSpec) { s.Org = "" }, want: "spec.org is required for scope org"},
		"org with repo":         {change: func(s *v1alpha1.RunnerGroupSpec) { s.Repo = "app" }, want: "spec.user and spec.repo must be empty for scope org"},
		"user without user":     {change: func(s *v1alpha1.RunnerGroupSpec) { s.Scope = v1alpha1.ScopeUser }, want: "spec.user is required for scope user"},
		"repo without repo":     {change: func(s *v1alpha1.RunnerGroupSpec) { s.Scope = v1alpha1.ScopeRepo }, want: "spec.repo is required for scope repo"},
		"repo with two owners":  {change: func(s *v1alpha1.RunnerGroupSpec) { s.Scope, s.User, s.Repo = v1alpha1.ScopeRepo, "alice", "app" }, want: "exactly one of spec.org or spec.user"},
		"repo without an owner": {change: func(s *v1alpha1.RunnerGroupSpec) { s.Scope, s.Org, s.Repo = v1alpha1.ScopeRepo, "", "app" }, want: "exactly one of spec.org or spec.user"},
		"url relative":          {change: func(s *v1alpha1.RunnerGroupSpec) { s.Gitea.URL = "gitea.example.com" }, want: "spec.gitea.url must be an http or https URL"},
		"url scheme":            {change: func(s *v1alpha1.RunnerGroupSpec) { s.Gitea.URL = "ftp://gitea.example.com" }, want: "spec.gitea.url must be an http or https URL"},
		"url credentials":       {change: func(s *v1alpha1.RunnerGroupSpec) { s.Gitea.URL = "https://bot:secret@gitea.example.com" }, want: "spec.gitea.url must not carry credentials"},
		"max negative":          {change: func(s *v1alpha1.RunnerGroupSpec) { s.MaxActiveRunners = -1 }, want: "spec.maxActiveRunners must be 0 or more"},
		"label empty":           {change: func(s *v1alpha1.RunnerGroupSpec) { s.Labels = []string{""} }, want: "spec.labels[0] must not be empty"},
		"label empty name":      {change: func(s *v1alpha1.RunnerGroupSpec) { s.Labels = []string{":host"} }, want: "spec.labels[0] must not be empty"},
		"label comma":           {change: func(s *v1alpha1.RunnerGroupSpec) { s.Labels = []string{"a,b"} }, want: "spec.labels[0] must not contain commas or spaces"},
		"label space":           {change: func(s *v1alpha1.RunnerGroupSpec) { s.Labels = []string{"linux", "a b"} }, want: "spec.labels[1] must not contain commas or spaces"},
		"label name twice":      {change: func(s *v1alpha1.RunnerGroupSpec) { s.Labels = []string{"linux:host", "linux"} }, want: `spec.labels[1]: label name "linux" is given twice`},
		// Issue 24 item 9: labels are printed to terminals by why and status.
		"label with ESC":     {change: func(s *v1alpha1.RunnerGroupSpec) { s.Labels = []string{"linux", "x\x1b[2Jy"} }, want: "spec.labels[1] must not contain control characters"},
		"label with BEL":     {change: func(s *v1alpha1.RunnerGroupSpec) { s.Labels = []string{"x\a"} }, want: "spec.labels[0] must not contain control characters"},
		"label with C1 CSI":  {change: func(s *v1alpha1.RunnerGroupSpec) { s.Labels = []string{"x\u009b31m"} }, want: "spec.labels[0] must not contain control characters"},
		"label with unicode": {change: func(s *v1alpha1.RunnerGroupSpec) { s.Labels = []string{"gpu-\u00e9t\u00e9:docker://img:1"} }},
		// Issue 24 item 1: one key cannot be both what reaches the runner
		// pod and what the scaler sends to Gitea.
		"registration and API token the same key": {
			change: func(s *v1alpha1.RunnerGroupSpec) { s.RegistrationToken.SecretRef = s.AuthToken.SecretRef },
			want:   "spec.registrationToken and spec.authToken name the same key",
		},
		"registration key missing": {
			change: func(s *v1alpha1.RunnerGroupSpec) { s.RegistrationToken.SecretRef.Key = "" },
			want:   "spec.registrationToken.secretRef needs both name and key",
		},
		"registration token left out: the scaler mints it": {change: func(s *v1alpha1.RunnerGroupSpec) { s.RegistrationToken = nil }},
		// Issue 39: a Host group's jobs run on its pod, without Docker.
		"Host flavour with host labels": {change: func(s *v1alpha1.RunnerGroupSpec) {
			s.Flavour, s.Labels = v1alpha1.FlavourHost, []string{"self-hosted", "linux:host", "a:b:c"}
		}},
		"Host flavour with a docker label": {
			change: func(s *v1alpha1.RunnerGroupSpec) { s.Flavour = v1alpha1.FlavourHost },
			want:   `spec.labels[2] "ubuntu-latest:docker://node:20": spec.flavour Host runs jobs on the runner pod itself`,
		},
		"Host flavour with a bare docker label": {
			change: func(s *v1alpha1.RunnerGroupSpec) { s.Flavour, s.Labels = v1alpha1.FlavourHost, []string{"x:docker"} },
			want:   "spec.flavour Host runs jobs on the runner pod itself",
		},
		"auth name missing": {
			change: func(s *v1alpha1.RunnerGroupSpec) { s.AuthToken.SecretRef.Name = "" },
			want:   "spec.authToken.secretRef needs both name and key",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec := base()
			tc.change(&spec)
			err := spec.Validate()
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestIsDockerLabel(t *testing.T) {
	for l, want := range map[string]bool{
		"ubuntu-latest:docker://node:20": true, "x:docker": true, "x:docker:": true,
		"x": false, "x:host": false, "x:dockerish": false, "a:b:docker": false,
	} {
		assert.Equal(t, want, v1alpha1.IsDockerLabel(l), l)
	}
}

func TestOwner(t *testing.T) {
	assert.Equal(t, "acme", (&v1alpha1.RunnerGroupSpec{Org: "acme"}).Owner())
	assert.Equal(t, "alice", (&v1alpha1.RunnerGroupSpec{User: "alice"}).Owner())
	assert.Empty(t, (&v1alpha1.RunnerGroupSpec{}).Owner())
}

func TestRegistrationTokenRef(t *testing.T) {
	tests := map[string]struct {
		spec  *v1alpha1.SecretKeySelector
		want  v1alpha1.SecretRef
		mints bool
	}{
		"spec.registrationToken set: its Secret": {
			spec: &v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "tokens", Key: "reg"}},
			want: v1alpha1.SecretRef{Name: "tokens", Key: "reg"},
		},
		"left out: the Secret the scaler mints, named for the group": {
			want:  v1alpha1.SecretRef{Name: "build-registration-token", Key: "token"},
			mints: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rg := &v1alpha1.RunnerGroup{}
			rg.Name = "build"
			rg.Spec.RegistrationToken = tc.spec
			assert.Equal(t, tc.want, rg.RegistrationTokenRef())
			assert.Equal(t, tc.mints, rg.MintsRegistrationToken())
		})
	}
}

func ptr[T any](v T) *T { return &v }

// One rule for a paused group: a cap of 0 or spec.suspend, which keeps the
// cap and the warm pool in the spec for when the group is resumed.
func TestPausedGroupsStartNothingAndKeepNoWarmPool(t *testing.T) {
	for _, tc := range []struct {
		name          string
		spec          v1alpha1.RunnerGroupSpec
		paused        bool
		cap, warmPool int32
	}{
		{name: "serving", spec: v1alpha1.RunnerGroupSpec{MaxActiveRunners: 5, MinIdleRunners: 2}, cap: 5, warmPool: 2},
		{name: "a cap of 0", spec: v1alpha1.RunnerGroupSpec{MaxActiveRunners: 0}, paused: true},
		{name: "suspended", spec: v1alpha1.RunnerGroupSpec{MaxActiveRunners: 5, MinIdleRunners: 2, Suspend: true}, paused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.paused, tc.spec.Paused())
			assert.Equal(t, tc.cap, tc.spec.RunnerCap())
			assert.Equal(t, tc.warmPool, tc.spec.WarmPool())
		})
	}
}
