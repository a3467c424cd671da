package scaler

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// TestTheCacheConditionSaysWhetherTheNamespacesCacheAnswers: with the
// shared cache on, each group's Cache condition says whether its
// namespace's cache server answers and its Secret is there; it never
// carries the secret, and goes when the cache is turned off.
func TestTheCacheConditionSaysWhetherTheNamespacesCacheAnswers(t *testing.T) {
	var asked int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked++
		assert.Empty(t, r.Header.Get("Authorization"), "the probe sends no secret")
		w.WriteHeader(http.StatusNotFound) // any answer is an answer
	}))
	t.Cleanup(srv.Close)
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
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { asked++ }))
	t.Cleanup(srv.Close)
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
