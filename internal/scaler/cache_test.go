package scaler

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// cacheServer answers as gitea-runner's cache server holding secret does:
// 200 to the runners' revoke call with it, 401 without.
func cacheServer(t *testing.T, secret string, asked *int) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*asked++
		if r.Method != http.MethodPost || r.URL.Path != "/runners/_internal/revoke" && r.URL.Path != "/_internal/revoke" {
			http.NotFound(w, r)
			return
		}
		var body struct{ Token string }
		if r.Header.Get("Authorization") != "Bearer "+secret || json.NewDecoder(r.Body).Decode(&body) != nil || body.Token == "" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestTheCacheConditionSaysWhetherTheNamespacesCacheAnswers: with the
// shared cache on, each group's Cache condition says whether its
// namespace's cache server answers the runners' call with the namespace's
// Secret; it never carries the secret, and goes when the cache is turned
// off.
func TestTheCacheConditionSaysWhetherTheNamespacesCacheAnswers(t *testing.T) {
	var asked int
	srv := cacheServer(t, "hunter2", &asked)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()

	withCache := func(url string) setup {
		return func(_ *Deps, c *Config) {
			c.Runner.Cache = runnerjob.CacheOptions{URL: url + "/{namespace}/", SecretName: "gitea-runner-cache", Image: "scaler:1"}
		}
	}
	e := newEnv(t, newGroup("ci", 5), newGroup("web", 5))
	cond := func(name string) *metav1.Condition {
		return meta.FindStatusCondition(e.group(name).Status.Conditions, v1alpha1.ConditionCache)
	}

	e.pass(withCache(srv.URL))
	c := cond("ci")
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, v1alpha1.ReasonCacheSecretMissing, c.Reason)
	assert.Contains(t, c.Message, `Secret "gitea-runner-cache"`)

	_, err := e.kube.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "gitea-runner-cache", Namespace: ns},
		Data:       map[string][]byte{"external_secret": []byte("hunter2")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	asked = 0
	e.pass(withCache(srv.URL))
	for _, g := range []string{"ci", "web"} {
		c = cond(g)
		require.NotNil(t, c, g)
		assert.Equal(t, metav1.ConditionTrue, c.Status, g)
		assert.Equal(t, v1alpha1.ReasonCacheReachable, c.Reason, g)
		assert.Contains(t, c.Message, srv.URL+"/runners/")
		assert.NotContains(t, c.Message, "hunter2")
	}
	assert.Equal(t, 1, asked, "one probe per namespace and pass, however many groups")

	e.pass(withCache(downURL))
	c = cond("ci")
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, v1alpha1.ReasonCacheUnreachable, c.Reason)
	assert.Contains(t, c.Message, downURL+"/runners/")
	assert.Equal(t, v1alpha1.ReasonReconciled, meta.FindStatusCondition(e.group("ci").Status.Conditions, v1alpha1.ConditionReady).Reason,
		"a cache that does not answer does not stop the group: its jobs run, without a cache")

	e.pass()
	assert.Nil(t, cond("ci"), "no shared cache, no condition")
}

// TestASteadyLoopReadsTheCacheSecretAsRarelyAsTheTokens: with the shared
// cache, a loop's steady passes send the API server no read for it either
// (the Secret is remembered as the token Secrets are); only the probe of
// the server goes out, once per namespace and pass.
func TestASteadyLoopReadsTheCacheSecretAsRarelyAsTheTokens(t *testing.T) {
	var asked int
	srv := cacheServer(t, "hunter2", &asked)
	e := newEnv(t, newGroup("ci", 5), newGroup("web", 5))
	require.NoError(t, e.kube.Tracker().Add(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "gitea-runner-cache", Namespace: ns},
		Data:       map[string][]byte{"external_secret": []byte("hunter2")},
	}))
	sc, _ := watchingScaler(t, e, func(_ *Deps, c *Config) {
		c.Runner.Cache = runnerjob.CacheOptions{URL: srv.URL + "/", SecretName: "gitea-runner-cache", Image: "scaler:1"}
	})
	_, err := sc.Pass(context.Background())
	require.NoError(t, err)
	e.kube.ClearActions()
	asked = 0

	for range 3 {
		_, err := sc.Pass(context.Background())
		require.NoError(t, err)
	}
	for _, a := range e.kube.Actions() {
		assert.False(t, a.GetResource().Resource == "secrets", "steady passes read no Secret: %s", a.GetVerb())
	}
	assert.Equal(t, 3, asked, "one probe per namespace and pass")
	assert.Equal(t, v1alpha1.ReasonCacheReachable, meta.FindStatusCondition(e.group("ci").Status.Conditions, v1alpha1.ConditionCache).Reason)
}

// A namespace admin can point the cache Service at any address; the
// condition must not tell them how the scaler's pod sees it. Refused, an
// HTTP answer of any other kind, or a server with another secret: the
// condition says the same, and never carries the secret.
func TestTheCacheProbeIsNoReachabilityOracle(t *testing.T) {
	var asked int
	other := cacheServer(t, "another-secret", &asked)
	teapot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	t.Cleanup(teapot.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()

	messages := map[string]bool{}
	for _, url := range []string{other.URL, teapot.URL, downURL} {
		e := newEnv(t, newGroup("ci", 5))
		require.NoError(t, e.kube.Tracker().Add(&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "gitea-runner-cache", Namespace: ns},
			Data:       map[string][]byte{"external_secret": []byte("hunter2")},
		}))
		e.pass(func(_ *Deps, c *Config) {
			c.Runner.Cache = runnerjob.CacheOptions{URL: url + "/", SecretName: "gitea-runner-cache", Image: "scaler:1"}
		})
		c := meta.FindStatusCondition(e.group("ci").Status.Conditions, v1alpha1.ConditionCache)
		require.NotNil(t, c, url)
		assert.Equal(t, v1alpha1.ReasonCacheUnreachable, c.Reason, url)
		assert.NotContains(t, c.Message, "hunter2")
		messages[strings.ReplaceAll(c.Message, url, "URL")] = true
	}
	assert.Len(t, messages, 1, "one message whatever is at the address: %v", messages)
}
