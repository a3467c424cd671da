package scope

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
)

const (
	global = v1alpha1.ScopeGlobal
	org    = v1alpha1.ScopeOrg
	user   = v1alpha1.ScopeUser
	repo   = v1alpha1.ScopeRepo
)

func TestNewKeepsWhatEachScopeTakes(t *testing.T) {
	tests := []struct {
		place    Place
		want     string
		wantName string
		wantErr  bool
	}{
		{place: New("", global, "", ""), want: "global", wantName: ""},
		{place: New("", org, "acme", ""), want: "org acme", wantName: "acme"},
		{place: New("", user, "alice", ""), want: "user alice", wantName: "alice"},
		{place: New("", repo, "acme", "app"), want: "repo acme/app", wantName: "acme/app"},
		{place: New("", global, "acme", "app"), want: "global", wantName: ""},
		{place: New("", org, "acme", "app"), want: "org acme", wantName: "acme"},
		{place: New("", org, "", ""), want: "org ", wantName: "", wantErr: true},
		{place: New("", user, "", ""), want: "user ", wantName: "", wantErr: true},
		{place: New("", repo, "acme", ""), want: "repo acme/", wantName: "acme/", wantErr: true},
		{place: New("", "team", "x", ""), want: "team x", wantName: "x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.place.String())
			assert.Equal(t, tt.wantName, tt.place.Name())
			err := tt.place.Check()
			if tt.wantErr {
				assert.ErrorContains(t, err, "invalid target")
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

func TestOfReadsTheSpec(t *testing.T) {
	spec := func(s v1alpha1.Scope, org, user, repo string) *v1alpha1.RunnerGroupSpec {
		return &v1alpha1.RunnerGroupSpec{Gitea: v1alpha1.GiteaSpec{URL: "HTTPS://Gitea.example.com:443/"}, Scope: s, Org: org, User: user, Repo: repo}
	}
	const url = "https://gitea.example.com"
	assert.Equal(t, New(url, global, "", ""), Of(spec(global, "acme", "", "")), "the instance has no owner")
	assert.Equal(t, New(url, org, "acme", ""), Of(spec(org, "acme", "", "")))
	assert.Equal(t, New(url, user, "alice", ""), Of(spec(user, "", "alice", "")))
	assert.Equal(t, New(url, repo, "alice", "tool"), Of(spec(repo, "", "alice", "tool")), "a user's repository")
	assert.Equal(t, url, Of(spec(org, "acme", "", "")).URL(), "the URL is normalised")
}

func TestContains(t *testing.T) {
	const url = "https://gitea.example.com"
	acme := New(url, org, "acme", "")
	app := New(url, repo, "acme", "app")
	lib := New(url, repo, "acme", "lib")
	alice := New(url, user, "alice", "")
	tool := New(url, repo, "alice", "tool")
	instance := New(url, global, "", "")
	tests := []struct {
		name string
		p, o Place
		want bool
	}{
		{"itself", app, app, true},
		{"the instance contains every scope", instance, app, true},
		{"the instance contains an org", instance, acme, true},
		{"an org contains its repositories", acme, app, true},
		{"a user contains its repositories", alice, tool, true},
		{"an org does not contain another owner's repository", acme, tool, false},
		{"a repository does not contain its sibling", app, lib, false},
		{"a repository does not contain its org", app, acme, false},
		{"an org does not contain the instance", acme, instance, false},
		{"an org does not contain a user", acme, alice, false},
		{"another Gitea's instance contains nothing here", New("https://other.example.com", global, "", ""), app, false},
		{"a URL spelt another way is the same Gitea", New("HTTPS://gitea.example.com:443/", org, "acme", ""), app, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.p.Contains(tt.o))
		})
	}
}

func TestHoldsRepo(t *testing.T) {
	const url = "https://gitea.example.com"
	tests := []struct {
		name string
		p    Place
		repo string
		want bool
	}{
		{"the instance holds every repository", New(url, global, "", ""), "acme/app", true},
		{"an org holds its repositories", New(url, org, "acme", ""), "acme/app", true},
		{"names compare without case, as Gitea's", New(url, org, "Acme", ""), "ACME/app", true},
		{"a user holds its repositories", New(url, user, "alice", ""), "alice/tool", true},
		{"an org holds no other owner's", New(url, org, "acme", ""), "alice/tool", false},
		{"a repository holds itself", New(url, repo, "acme", "app"), "Acme/App", true},
		{"a repository holds no sibling", New(url, repo, "acme", "app"), "acme/lib", false},
		{"no owner is held by no org", New(url, org, "", ""), "/app", false},
		{"no place holds nothing", Place{}, "acme/app", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.p.HoldsRepo(tt.repo))
		})
	}
}

func TestParseReadsBackWhatStoredWrote(t *testing.T) {
	tests := []struct {
		name   string
		place  Place
		stored string
	}{
		{"the instance", New("https://gitea.example.com", global, "", ""), "https://gitea.example.com global"},
		{"an org", New("https://gitea.example.com", org, "acme", ""), "https://gitea.example.com org acme"},
		{"a user", New("https://gitea.example.com:3000/sub", user, "alice", ""), "https://gitea.example.com:3000/sub user alice"},
		{"a repository", New("http://127.0.0.1:3000", repo, "acme", "app"), "http://127.0.0.1:3000 repo acme/app"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.stored, tt.place.Stored())
			got, ok := Parse(tt.place.Stored())
			require.True(t, ok)
			assert.Equal(t, tt.place, got)
		})
	}
	for _, bad := range []string{"", "https://x", "https://x org", "https://x repo acme", "https://x repo /app", "https://x team acme", "https://x org acme/app", "https://x global acme", "a b c d"} {
		_, ok := Parse(bad)
		assert.False(t, ok, "%q", bad)
	}
}

// What scalers stored before Place was one type is in users' clusters: a
// runner Job's runner-scope annotation (the same string) and a ledger's
// place (a JSON object of its parts). Both read as the place they named,
// and are written back in the one stored form.
func TestOldStoredPlacesRoundTrip(t *testing.T) {
	tests := []struct {
		name, old string
		want      Place
		stored    string
	}{
		{"a runner Job's annotation", `"https://gitea.example.com org acme"`, New("https://gitea.example.com", org, "acme", ""), `"https://gitea.example.com org acme"`},
		{"a ledger's repository", `{"url":"http://127.0.0.1:3000","scope":"repo","owner":"acme","repo":"app"}`, New("http://127.0.0.1:3000", repo, "acme", "app"), `"http://127.0.0.1:3000 repo acme/app"`},
		{"a ledger's instance", `{"url":"https://gitea.example.com","scope":"global"}`, New("https://gitea.example.com", global, "", ""), `"https://gitea.example.com global"`},
		{"a ledger's user", `{"url":"https://gitea.example.com","scope":"user","owner":"alice"}`, New("https://gitea.example.com", user, "alice", ""), `"https://gitea.example.com user alice"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Place
			require.NoError(t, json.Unmarshal([]byte(tt.old), &p))
			assert.Equal(t, tt.want, p)
			raw, err := json.Marshal(p)
			require.NoError(t, err)
			assert.JSONEq(t, tt.stored, string(raw))
			var again Place
			require.NoError(t, json.Unmarshal(raw, &again))
			assert.Equal(t, p, again)
		})
	}
	var p Place
	assert.Error(t, json.Unmarshal([]byte(`"https://x team acme"`), &p), "a string no scaler wrote")
}

func TestInstance(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://gitea.example.com", "https://gitea.example.com"},
		{"https://gitea.example.com/", "https://gitea.example.com"},
		{"HTTPS://GITEA.example.com:443", "https://gitea.example.com"},
		{"http://gitea.example.com:80/git/", "http://gitea.example.com/git"},
		{"http://gitea.example.com:3000", "http://gitea.example.com:3000"},
		{"https://gitea.example.com:80", "https://gitea.example.com:80"},
		{"http://[::1]:3000/", "http://[::1]:3000"},
		{"not a url", "not a url"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Instance(tt.in), tt.in)
	}
}
