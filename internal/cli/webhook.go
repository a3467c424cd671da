package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
)

// WebhookFlags accept Gitea's workflow_job deliveries (a loop's only).
type WebhookFlags struct {
	WebhookAddr       string `env:"SCALER_WEBHOOK_ADDR" placeholder:"HOST:PORT" help:"With --loop, accept Gitea's workflow_job webhook at POST /webhook on this address (e.g. ':8080'): a queued job starts a pass at once. Needs a secret."`
	WebhookSecret     string `env:"SCALER_WEBHOOK_SECRET" placeholder:"SECRET" help:"The webhook's secret (as set in Gitea); prefer the env var or --webhook-secret-file over the flag, which shows in the process list."`
	WebhookSecretFile string `env:"SCALER_WEBHOOK_SECRET_FILE" placeholder:"PATH" help:"A file holding the webhook's secret (surrounding whitespace is trimmed)."`
}

// validate wants the secret once, and an address only with a secret.
func (f *WebhookFlags) validate() error {
	var errs []error
	if f.WebhookSecret != "" && f.WebhookSecretFile != "" {
		errs = append(errs, errors.New("give the webhook secret once: --webhook-secret or --webhook-secret-file"))
	}
	if f.WebhookAddr != "" && f.WebhookSecret == "" && f.WebhookSecretFile == "" {
		errs = append(errs, errors.New("--webhook-addr needs a secret (SCALER_WEBHOOK_SECRET or --webhook-secret-file): unsigned deliveries are refused"))
	}
	return errors.Join(errs...)
}

// webhookSecret is the secret from the env var or the file, never logged.
func (f *WebhookFlags) webhookSecret() ([]byte, error) {
	if f.WebhookSecretFile == "" {
		return []byte(f.WebhookSecret), nil
	}
	raw, err := os.ReadFile(f.WebhookSecretFile)
	if err != nil {
		return nil, fmt.Errorf("cannot read --webhook-secret-file: %w", err)
	}
	secret := bytes.TrimSpace(raw)
	if len(secret) == 0 {
		return nil, fmt.Errorf("--webhook-secret-file %s is empty", f.WebhookSecretFile)
	}
	return secret, nil
}
