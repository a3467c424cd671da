package cli

import (
	"fmt"
	"net/http"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/gitea"
	"github.com/gitea-runner-operator/gitea-runner-operator/internal/giteaurl"
)

// giteaPolicy reads --allowed-gitea-urls for every command that sends a
// group's API token (run, why), so they follow one rule. Behind a proxy
// the dial check sees only the proxy's address and the proxy resolves the
// group's host, so a name that resolves to a metadata or loopback address
// would be fetched with the token: there only a list protects, and an
// empty one is refused.
func giteaPolicy(urls []string) (*giteaurl.Policy, error) {
	p, err := giteaurl.Parse(urls)
	if err != nil {
		return nil, fmt.Errorf("--allowed-gitea-urls: %w", err)
	}
	if v := gitea.ProxyVariable(); v != "" && p.Empty() {
		return nil, fmt.Errorf("a proxy is configured (%s) and --allowed-gitea-urls (SCALER_ALLOWED_GITEA_URLS, the chart's allowedGiteaURLs) is empty: "+
			"the proxy, not this process, resolves a group's Gitea host, so only a list keeps API tokens from loopback and metadata addresses", v)
	}
	return p, nil
}

// giteaClients makes the Gitea clients of run and why: a group's URL is
// checked against p before a client exists, and the one shared HTTP client
// checks every dial and redirect (giteaurl.Policy.HTTPClient), so a token
// goes only where the listener would send it. wrap, when not nil, wraps
// the transport (the metrics count requests there).
func giteaClients(p *giteaurl.Policy, base *http.Transport, wrap func(http.RoundTripper) http.RoundTripper, opts gitea.Options) gitea.Factory {
	hc := p.HTTPClient(base)
	if wrap != nil {
		hc.Transport = wrap(hc.Transport)
	}
	opts.HTTPClient = hc
	return func(baseURL, token string) (gitea.Client, error) {
		if err := p.Check(baseURL); err != nil {
			return nil, fmt.Errorf("%w; the platform team lists the allowed Gitea URLs (--allowed-gitea-urls, the chart's allowedGiteaURLs)", err)
		}
		return gitea.NewClient(baseURL, token, opts)
	}
}
