package gitea

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gitea-runner-operator/gitea-runner-operator/internal/scope"
)

// privateCA is a CA made for one test, and a server certificate for
// 127.0.0.1 that it signed.
type privateCA struct {
	pem    []byte
	server tls.Certificate
}

func newPrivateCA(t *testing.T) privateCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test private CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "gitea"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	return privateCA{
		pem:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		server: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
	}
}

// tlsGitea serves the fake Gitea over TLS with the CA's certificate.
func tlsGitea(t *testing.T, ca privateCA) string {
	t.Helper()
	f := newFake(t, fixtureScene())
	upstream, err := url.Parse(f.URL)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(upstream))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.server}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL
}

func writeFile(t *testing.T, content []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(p, content, 0o600))
	return p
}

func TestGiteaBehindAPrivateCA(t *testing.T) {
	ca := newPrivateCA(t)
	base := tlsGitea(t, ca)
	target := scope.New("", ScopeOrg, "acme", "")

	t.Run("is refused without the CA bundle", func(t *testing.T) {
		tr, err := NewTransport("")
		require.NoError(t, err)
		c := newTestClient(t, base, adminToken, Options{HTTPClient: &http.Client{Transport: tr}})
		_, err = c.Snapshot(context.Background(), target)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "certificate signed by unknown authority")
	})
	t.Run("is served with the CA bundle", func(t *testing.T) {
		tr, err := NewTransport(writeFile(t, ca.pem))
		require.NoError(t, err)
		c := newTestClient(t, base, adminToken, Options{HTTPClient: &http.Client{Transport: tr}})
		snap, err := c.Snapshot(context.Background(), target)
		require.NoError(t, err)
		assert.Equal(t, []int64{2, 3, 4}, ids(snap.Queued))
	})
	t.Run("trusts only the bundle's CA, not any other private one", func(t *testing.T) {
		tr, err := NewTransport(writeFile(t, newPrivateCA(t).pem))
		require.NoError(t, err)
		c := newTestClient(t, base, adminToken, Options{HTTPClient: &http.Client{Transport: tr}})
		_, err = c.Snapshot(context.Background(), target)
		require.Error(t, err)
	})
}

func TestNewTransportRefusesABadBundle(t *testing.T) {
	tests := []struct {
		name    string
		file    func(t *testing.T) string
		wantErr string
	}{
		{"missing file", func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope.crt") }, "cannot read the Gitea CA bundle"},
		{"no certificate in it", func(t *testing.T) string { return writeFile(t, []byte("not a certificate\n")) }, "holds no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewTransport(tt.file(t))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestNewTransportHonoursTheProxyVariables(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		url       string
		wantProxy string
	}{
		{"HTTPS_PROXY for https", map[string]string{"HTTPS_PROXY": "http://proxy.corp:3128"}, "https://gitea.example.com/api/v1/version", "http://proxy.corp:3128"},
		{"HTTP_PROXY for http", map[string]string{"HTTP_PROXY": "http://proxy.corp:3128"}, "http://gitea.example.com/api/v1/version", "http://proxy.corp:3128"},
		{"HTTPS_PROXY is not for http", map[string]string{"HTTPS_PROXY": "http://proxy.corp:3128"}, "http://gitea.example.com/", ""},
		{"NO_PROXY by domain", map[string]string{"HTTPS_PROXY": "http://proxy.corp:3128", "NO_PROXY": ".example.com"}, "https://gitea.example.com/", ""},
		{"lower case names", map[string]string{"https_proxy": "http://proxy.corp:3128"}, "https://gitea.example.com/", "http://proxy.corp:3128"},
		{"nothing set", nil, "https://gitea.example.com/", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "REQUEST_METHOD"} {
				t.Setenv(k, "")
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			tr, err := NewTransport("")
			require.NoError(t, err)
			req, err := http.NewRequest(http.MethodGet, tt.url, nil)
			require.NoError(t, err)
			got, err := tr.Proxy(req)
			require.NoError(t, err)
			if tt.wantProxy == "" {
				assert.Nil(t, got)
			} else {
				require.NotNil(t, got)
				assert.Equal(t, tt.wantProxy, got.String())
			}
		})
	}
}
