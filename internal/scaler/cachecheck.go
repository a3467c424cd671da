package scaler

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strings"
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
// one request. It proves what a runner needs: the Secret the runner pods
// reference is there, and the server at the URL the runners use answers,
// from the scaler's pod, the call each runner makes for each job (register
// a job token, here a random one, revoked at once) with that Secret. It
// cannot prove that runner pods reach it (a NetworkPolicy may differ).
//
// The condition says only whether that call succeeded: a namespace admin
// can point the cache Service anywhere, and the status must not tell them
// how the scaler's pod sees another address (refused, timed out, what it
// answered). The secret goes only where the namespace's runners send it
// for every job, and only a server that holds it answers yes. The
// platform's log says why at debug level.
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
	if err := callCache(ctx, url, string(sec.Data[runnerjob.CacheSecretKey])); err != nil {
		s.log.Debug("the cache server does not answer as the namespace's", "namespace", namespace, "url", url, "error", err)
		return cond(metav1.ConditionFalse, v1alpha1.ReasonCacheUnreachable,
			"the cache server %s does not answer the scaler as this namespace's cache server (with Secret %q); runners still start, and their jobs' cache steps miss; the scaler's debug log says why", url, cache.SecretName)
	}
	return cond(metav1.ConditionTrue, v1alpha1.ReasonCacheReachable, "the cache server %s answers with the namespace's Secret %q; runners use it", url, cache.SecretName)
}

// callCache makes the runners' own call to the cache server at url: it
// revokes a random job token, which registers nothing and which only a
// server holding secret accepts. Neither the secret nor the server's
// answer is part of the error.
func callCache(ctx context.Context, url, secret string) error {
	token := make([]byte, 16)
	_, _ = rand.Read(token)
	body, _ := json.Marshal(map[string]string{"token": hex.EncodeToString(token)})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(url, "/")+cacheRevokePath, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("the URL does not parse")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := cacheProbe.Do(req)
	if err != nil {
		var uerr *neturl.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}

// cacheRevokePath is the cache server's call that forgets a job token
// (gitea-runner's cache server, since 1.0).
const cacheRevokePath = "/_internal/revoke"
