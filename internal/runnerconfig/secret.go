package runnerconfig

import (
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"
)

// SecretEnv is the env var of a runner pod's config init container that
// holds cache.external_secret, set from the cache Secret by secretKeyRef.
// gitea/runner reads the secret only from its config file, and Secrets
// reach pods only through secretKeyRef, so the file with the secret is
// written in the pod, from the ConfigMap the scaler renders (which never
// holds it) and this env, by WithSecret.
const SecretEnv = "GITEA_RUNNER_CACHE_SECRET"

// WithSecret returns the runner config template (YAML, as Render writes
// it) with cache.external_secret set to secret. An empty secret (the
// namespace has no cache Secret: its secretKeyRef is optional) turns the
// cache off instead, since the runner refuses cache.external_server
// without a secret and would never start. Errors name what is wrong with
// the template, never the secret.
func WithSecret(template []byte, secret string) ([]byte, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal(template, &cfg); err != nil {
		return nil, errors.New("runner config template is not a YAML mapping")
	}
	if cfg == nil {
		return nil, errors.New("runner config template is empty")
	}
	cache := map[string]any{}
	if v, ok := cfg["cache"]; ok && v != nil {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, errors.New("runner config template: cache is not a mapping")
		}
		cache = m
	}
	if secret == "" {
		cache = map[string]any{"enabled": false}
	} else {
		cache["external_secret"] = secret
	}
	cfg["cache"] = cache
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("runner config: %w", err)
	}
	return out, nil
}
