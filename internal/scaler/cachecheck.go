package scaler

import (
	"context"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/api/v1alpha1"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/runnerjob"
)

// cacheProbeTimeout bounds the one request per namespace and pass.
const cacheProbeTimeout = 3 * time.Second

// cacheProbe asks the cache servers. No proxy: the server is a Service in
// the cluster, which the runners reach directly too (the chart's
// proxy.noProxy must cover it).
var cacheProbe = &http.Client{
	Timeout:   cacheProbeTimeout,
	Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
}

// checkCache is the group's Cache condition, the same for every group of
// its namespace and read once per namespace and pass: one Secret read and
// one HTTP request. What it proves is cheap and honest: the Secret the
// runner pods reference is there, and something answers HTTP at the
// server's URL from the scaler's pod. It cannot prove that runner pods
// reach it (a NetworkPolicy may differ) or that the secrets match; a job
// whose register fails says so in its log (gitea/runner's warning).
func (s *Scaler) checkCache(ctx context.Context, g *groupRun) *metav1.Condition {
	cache := s.cfg.Runner.Cache
	if !cache.Enabled() {
		return nil
	}
	namespace := g.rg.Namespace
	c, _ := g.namespaces.caches.get(ctx, namespace, func(ctx context.Context) (metav1.Condition, error) {
		return s.probeCache(ctx, cache, namespace), nil
	})
	if c.Type == "" {
		// The pass's context ended while another group asked.
		return nil
	}
	return &c
}

func (s *Scaler) probeCache(ctx context.Context, cache runnerjob.CacheOptions, namespace string) metav1.Condition {
	url := cache.URLFor(namespace)
	cond := func(status metav1.ConditionStatus, reason, format string, args ...any) metav1.Condition {
		return metav1.Condition{Type: v1alpha1.ConditionCache, Status: status, Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	// A loop reads the Secret again only as often as the token Secrets
	// (SecretRecheck); a missing one is asked for every pass.
	key := types.NamespacedName{Namespace: namespace, Name: cache.SecretName}
	sec, ok := s.mem.rememberedSecret(key, s.now())
	var err error
	if !ok {
		if sec, err = s.kube.CoreV1().Secrets(namespace).Get(ctx, cache.SecretName, metav1.GetOptions{}); err == nil {
			s.mem.rememberSecret(sec, s.now())
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		return cond(metav1.ConditionFalse, v1alpha1.ReasonCacheSecretMissing,
			"no Secret %q in namespace %s: runners start with the cache off; the chart's runnerCache creates it with the namespace's cache server", cache.SecretName, namespace)
	case err != nil:
		return cond(metav1.ConditionUnknown, v1alpha1.ReasonKubernetesError, "cannot read Secret %q: %v", cache.SecretName, err)
	case len(sec.Data[runnerjob.CacheSecretKey]) == 0:
		return cond(metav1.ConditionFalse, v1alpha1.ReasonCacheSecretMissing,
			"Secret %q has no key %s: runners start with the cache off", cache.SecretName, runnerjob.CacheSecretKey)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return cond(metav1.ConditionFalse, v1alpha1.ReasonCacheUnreachable, "cache server URL %s: %v", url, err)
	}
	resp, err := cacheProbe.Do(req)
	if err != nil {
		return cond(metav1.ConditionFalse, v1alpha1.ReasonCacheUnreachable,
			"the cache server %s does not answer the scaler: %v; runners still start, and their jobs' cache steps miss", url, err)
	}
	resp.Body.Close()
	return cond(metav1.ConditionTrue, v1alpha1.ReasonCacheReachable, "the cache server %s answers; runners use it", url)
}
