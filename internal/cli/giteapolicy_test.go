package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea/giteatest"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnergroups"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/tenancy"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/why"
)

// catcher is a server a group's writer controls: it counts the requests
// that reach it (each would carry the group's token).
func catcher(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// whyWorld is namespace ci, enabled for the scaler (scalerSA) and
// annotated with grant, with one org group whose Gitea URL is giteaURL
// and whose labelled Secret holds the API token.
func whyWorld(t *testing.T, giteaURL string, grant ...map[string]string) why.Deps {
	t.Helper()
	rg := &v1alpha1.RunnerGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "g", UID: "u"},
		Spec: v1alpha1.RunnerGroupSpec{
			Scope: v1alpha1.ScopeOrg, Org: "acme", MaxActiveRunners: 1,
			Gitea:             v1alpha1.GiteaSpec{URL: giteaURL},
			AuthToken:         v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "tokens", Key: "api"}},
			RegistrationToken: &v1alpha1.SecretKeySelector{SecretRef: v1alpha1.SecretRef{Name: "tokens", Key: "reg"}},
		},
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rg)
	require.NoError(t, err)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource: "RunnerGroupList"}, &unstructured.Unstructured{Object: m})
	kube := fake.NewClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "tokens", Labels: map[string]string{tenancy.SecretLabel: "true"},
			Annotations: map[string]string{tenancy.AnnotationRegistrationKeys: "reg", tenancy.AnnotationAPIKeys: "api"}},
		Data: map[string][]byte{"api": []byte(whyToken), "reg": []byte("reg")},
	}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ci", Annotations: firstOr(grant)}})
	kube.PrependReactor("create", "localsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.LocalSubjectAccessReview).DeepCopy()
		r.Status.Allowed = r.Spec.User == "system:serviceaccount:gitea-runner:scaler"
		return true, r, nil
	})
	return why.Deps{Kube: kube, Groups: runnergroups.Client{Dynamic: dyn}}
}

// scalerSA is the scaler's ServiceAccount in whyWorld, and whyToken its
// group's API token, distinctive so a test can tell it never shows.
const (
	scalerSA = "gitea-runner:scaler"
	whyToken = "why-cli-s3cr3t-9931"
)

func firstOr(m []map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m[0]
}

// why asks Gitea with a group's API token, read with the user's own
// rights: it sends it only where the listener would, by the same rule
// (the allowed Gitea URLs, checked before a client exists, on every dial
// and on every redirect), and without a list it refuses to run unless told
// to take the empty list's rule.
func TestWhySendsTokensOnlyWhereTheListenerWould(t *testing.T) {
	attacker, attackerHits := catcher(t)
	allowed := giteatest.New()
	t.Cleanup(allowed.Close)
	allowed.AddToken(whyToken, "bot", false)
	require.NoError(t, allowed.Load(giteatest.Scene{
		Orgs: []giteatest.Org{{Name: "acme", Members: []string{"bot"}}}, Users: []string{"bot"},
		Repos: []giteatest.Repo{{Owner: "acme", Name: "app"}},
	}))
	// redirector is allowed, and sends every request to the attacker.
	redirector := httptest.NewServer(http.RedirectHandler(attacker.URL+"/api/v1/orgs/acme/actions/jobs", http.StatusTemporaryRedirect))
	t.Cleanup(redirector.Close)

	// A group a pass refuses before it sends the token is not asked, and
	// the answer (exit 0, verdict NotAsked) says why; a refusal met while
	// asking (a redirect) fails the command.
	tests := []struct {
		name     string
		groupURL string
		grant    map[string]string
		args     []string
		wantCode int
		want     string
	}{
		{"a URL under none of the allowed ones", attacker.URL, nil, []string{"--allowed-gitea-urls", allowed.URL}, ExitOK, "is under none of the allowed Gitea URLs"},
		{"the empty list's rule refuses loopback", attacker.URL, nil, []string{"--any-gitea-url"}, ExitOK, "loopback"},
		{"a redirect out of the allowed URLs", redirector.URL, nil, []string{"--allowed-gitea-urls", allowed.URL + "," + redirector.URL}, ExitFailed, "under none of the allowed Gitea URLs"},
		// Issue 36: allowed for the install, but not granted to the
		// namespace: the scaler refuses the group, and so does why.
		{"a URL the namespace is not granted", attacker.URL, map[string]string{tenancy.AnnotationGrantedGiteaURLs: allowed.URL},
			[]string{"--allowed-gitea-urls", allowed.URL + "," + attacker.URL}, ExitOK, tenancy.AnnotationGrantedGiteaURLs},
		{"a namespace not granted the group's owner", attacker.URL, map[string]string{tenancy.AnnotationGrantedRepositories: "someone-else"},
			[]string{"--allowed-gitea-urls", attacker.URL}, ExitOK, "owner acme is not granted to namespace ci"},
		{"a namespace not enabled for the scaler", attacker.URL, nil,
			[]string{"--allowed-gitea-urls", attacker.URL, "--service-account", "gitea-runner:another-scaler"}, ExitOK, "namespace ci is not enabled for this scaler"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseWhy(t, append([]string{"42", "-n", "ci", "--service-account", scalerSA}, tt.args...)...)
			require.NoError(t, err)
			deps := whyWorld(t, tt.groupURL, tt.grant)
			deps.Gitea = c.giteaFactory()
			var out, errOut bytes.Buffer
			code := c.runWith(context.Background(), deps, IO{Out: &out, Err: &errOut})
			assert.Equal(t, tt.wantCode, code, errOut.String())
			assert.Contains(t, out.String()+errOut.String(), tt.want)
			if tt.wantCode == ExitOK {
				assert.Contains(t, out.String(), "verdict: NotAsked")
			}
			assert.NotContains(t, out.String()+errOut.String(), whyToken, "the API token must never show")
			assert.Zero(t, attackerHits.Load(), "the token reached a URL the listener would not send it to")
		})
	}
	t.Run("an allowed URL is asked", func(t *testing.T) {
		c, err := parseWhy(t, "42", "-n", "ci", "--allowed-gitea-urls", allowed.URL, "--service-account", scalerSA)
		require.NoError(t, err)
		deps := whyWorld(t, allowed.URL)
		deps.Gitea = c.giteaFactory()
		var out, errOut bytes.Buffer
		assert.Equal(t, ExitOK, c.runWith(context.Background(), deps, IO{Out: &out, Err: &errOut}), errOut.String())
		assert.Contains(t, out.String(), "verdict: NotFound")
	})
}

// Without a list of allowed Gitea URLs why does not start: it would
// otherwise send a token wherever a group's writer pointed it, which the
// listener may refuse. --any-gitea-url takes the empty list's rule
// knowingly; behind a proxy nothing but a list is accepted (item 10).
func TestWhyNeedsTheAllowedGiteaURLs(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, ExitUsage, Main([]string{"why", "42"}, IO{Out: &out, Err: &errOut}))
	assert.Contains(t, errOut.String(), "--allowed-gitea-urls")

	t.Setenv("SCALER_ALLOWED_GITEA_URLS", "https://gitea.example.com")
	t.Setenv("SCALER_SERVICE_ACCOUNT", scalerSA)
	c, err := parseWhy(t, "42")
	require.NoError(t, err)
	assert.NoError(t, c.policy.Check("https://gitea.example.com/"))
	assert.Error(t, c.policy.Check("https://evil.example.com/"))
}

// With a proxy configured the dial check sees only the proxy, so a host
// name that resolves to a metadata or loopback address would be fetched by
// the proxy, token and all: run and why then need a non-empty list.
func TestAProxyNeedsAllowedGiteaURLs(t *testing.T) {
	for _, env := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
		t.Run(env, func(t *testing.T) {
			for _, v := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "SCALER_ALLOWED_GITEA_URLS"} {
				t.Setenv(v, "")
			}
			t.Setenv(env, "http://proxy.example.com:3128")
			for _, cmd := range [][]string{{"run"}, {"why", "42", "--any-gitea-url"}} {
				var out, errOut bytes.Buffer
				assert.Equal(t, ExitUsage, Main(cmd, IO{Out: &out, Err: &errOut}), "%v", cmd)
				assert.Contains(t, errOut.String(), "a proxy is configured ("+env+")", "%v", cmd)
				assert.Contains(t, errOut.String(), "--allowed-gitea-urls", "%v", cmd)
			}
			_, err := parse(t, "--allowed-gitea-urls", "https://gitea.example.com")
			assert.NoError(t, err, "a list makes the proxy acceptable")
			_, err = parseWhy(t, "42", "--allowed-gitea-urls", "https://gitea.example.com", "--service-account", scalerSA)
			assert.NoError(t, err)
		})
	}
}
