package cli

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
)

// GiteaFlags bound the requests to Gitea.
type GiteaFlags struct {
	GiteaTimeout time.Duration `env:"SCALER_GITEA_TIMEOUT" default:"10s" help:"Timeout of each request to Gitea."`
	GiteaCAFile  string        `env:"SCALER_GITEA_CA_FILE" placeholder:"PATH" help:"PEM bundle of CAs trusted for Gitea besides the system's (a Gitea behind a private CA). HTTPS_PROXY, HTTP_PROXY and NO_PROXY are honoured."`
	// 2 MiB is gitea.DefaultMaxResponseBytes; see there why.
	GiteaMaxResponseBytes int64 `env:"SCALER_GITEA_MAX_RESPONSE_BYTES" default:"2097152" placeholder:"BYTES" help:"Largest answer read from Gitea; a larger one fails its group (GiteaBadResponse)."`
	// Groups with the same Gitea, token and target share one listing per
	// pass; this bounds how many distinct listings are read at once.
	GiteaConcurrency int `env:"SCALER_GITEA_CONCURRENCY" default:"4" help:"Gitea listings (one per distinct Gitea URL, API token and target) read at once in a pass."`

	// giteaTransport sends every Gitea request: built once by validate
	// from --gitea-ca-file and the proxy variables, shared by all clients;
	// nil until then.
	giteaTransport *http.Transport
}

// minGiteaResponseBytes is the smallest --gitea-max-response-bytes: below
// it, ordinary pages of jobs or repositories would be refused.
const minGiteaResponseBytes = 64 << 10

// validate checks the bounds and reads the CA file into the transport.
func (f *GiteaFlags) validate() error {
	var errs []error
	if f.GiteaTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--gitea-timeout must be positive, got %s", f.GiteaTimeout))
	}
	if f.GiteaMaxResponseBytes < minGiteaResponseBytes {
		errs = append(errs, fmt.Errorf("--gitea-max-response-bytes must be at least %d, got %d", minGiteaResponseBytes, f.GiteaMaxResponseBytes))
	}
	if f.GiteaConcurrency < 1 || f.GiteaConcurrency > 64 {
		errs = append(errs, fmt.Errorf("--gitea-concurrency must be between 1 and 64, got %d", f.GiteaConcurrency))
	}
	if f.GiteaCAFile != "" {
		t, err := gitea.NewTransport(f.GiteaCAFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--gitea-ca-file: %w", err))
		}
		f.giteaTransport = t
	}
	return errors.Join(errs...)
}
