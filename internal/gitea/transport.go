package gitea

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"

	"golang.org/x/net/http/httpproxy"
)

// NewTransport returns the HTTP transport for Gitea requests:
// http.DefaultTransport's settings, with
//
//   - the proxy from HTTPS_PROXY, HTTP_PROXY and NO_PROXY (or their lower
//     case forms), read now, with the rules of http.ProxyFromEnvironment
//     (which reads them once per process, so a test could not vary them);
//     as there, requests to localhost and loopback addresses never go
//     through a proxy;
//   - the system's CAs and, when caFile is set, the PEM certificates in it,
//     so a Gitea behind a private CA is trusted without trusting it for
//     everything else in the image.
//
// A caFile that cannot be read or holds no certificate is an error: a
// silently ignored bundle would surface only as TLS failures on every pass.
func NewTransport(caFile string) (*http.Transport, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	proxy := httpproxy.FromEnvironment().ProxyFunc()
	t.Proxy = func(req *http.Request) (*url.URL, error) { return proxy(req.URL) }
	if caFile == "" {
		return t, nil
	}
	pool, err := CertPool(caFile)
	if err != nil {
		return nil, err
	}
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}

// ProxyVariable names the proxy variable NewTransport would use, or ""
// when none is set (NO_PROXY is not weighed: a proxy for some hosts is a
// proxy).
func ProxyVariable() string {
	for _, v := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
		if os.Getenv(v) != "" {
			return v
		}
	}
	return ""
}

// CertPool is the system's CAs plus the PEM certificates in caFile.
func CertPool(caFile string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("cannot read the Gitea CA bundle: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		// An image without a system bundle still trusts the given one.
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("the Gitea CA bundle " + caFile + " holds no PEM certificate")
	}
	return pool, nil
}
