package tenancy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

func namespaceWith(annotations map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Annotations: annotations}}
}

func TestGrant(t *testing.T) {
	const gitea = "https://gitea.example.com"
	teamB := map[string]string{
		AnnotationGrantedGiteaURLs:    "https://gitea.example.com, https://other.example.com/gitea",
		AnnotationGrantedRepositories: "fabrikam, contoso/Tools",
	}
	tests := []struct {
		name        string
		annotations map[string]string
		url         string
		target      scope.Place
		wantErr     string
	}{
		{"no annotation: the namespace may claim anything, as before", nil, gitea, scope.New("", "global", "", ""), ""},
		{"an owner of its own", teamB, gitea, scope.New("", "org", "fabrikam", ""), ""},
		{"a repository of a granted owner", teamB, gitea, scope.New("", "repo", "Fabrikam", "web"), ""},
		{"a granted repository, names compared without case as Gitea does", teamB, gitea, scope.New("", "repo", "CONTOSO", "tools"), ""},
		{"a path under a granted URL", teamB, "https://other.example.com/gitea/", scope.New("", "user", "fabrikam", ""), ""},
		{"another team's repository", teamB, gitea, scope.New("", "repo", "contoso", "web"), `repository contoso/web is not granted to namespace team-b`},
		{"the owner of a granted repository is not granted whole", teamB, gitea, scope.New("", "org", "contoso", ""), `owner contoso is not granted to namespace team-b`},
		{"global needs *", teamB, gitea, scope.New("", "global", "", ""), `every repository (scope global) is not granted to namespace team-b`},
		{"a Gitea not granted", teamB, "https://evil.example.com", scope.New("", "org", "fabrikam", ""), `Gitea https://evil.example.com is not granted to namespace team-b`},
		{"* grants every repository", map[string]string{AnnotationGrantedRepositories: "*"}, gitea, scope.New("", "global", "", ""), ""},
		{"URLs only: any repository there", map[string]string{AnnotationGrantedGiteaURLs: gitea}, gitea, scope.New("", "repo", "x", "y"), ""},
		{"present but empty grants nothing", map[string]string{AnnotationGrantedRepositories: " "}, gitea, scope.New("", "org", "fabrikam", ""), `owner fabrikam is not granted to namespace team-b (granted: none;`},
		{"present but empty URLs grant no Gitea", map[string]string{AnnotationGrantedGiteaURLs: ""}, gitea, scope.New("", "org", "fabrikam", ""), `Gitea https://gitea.example.com is not granted to namespace team-b (granted: none;`},
		{"a malformed entry grants nothing and says so", map[string]string{AnnotationGrantedRepositories: "a/b/c"}, gitea, scope.New("", "org", "a", ""), `annotation gitea.bpg.pw/granted-repositories of namespace team-b: entry "a/b/c"`},
		{"a malformed URL grants nothing and says so", map[string]string{AnnotationGrantedGiteaURLs: "ftp://x"}, gitea, scope.New("", "org", "a", ""), `annotation gitea.bpg.pw/granted-gitea-urls of namespace team-b`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckGrant(namespaceWith(tt.annotations), tt.url, tt.target)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}
