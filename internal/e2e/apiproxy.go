//go:build e2e

// A proxy in front of the bed's kube-apiserver, on loopback, for the
// scaler's kubeconfig: it lets a test lose the answer to a request the API
// server carried out, slow some writes down, or act between a write and its
// answer. Everything else passes through untouched.

package e2e

import (
	"bytes"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// APIHook may take over a request the proxy got. It returns false to let
// the request through as it is. forward carries a request out to the API
// server and records the answer, which the hook may then pass on (copyTo),
// change or drop.
type APIHook func(w http.ResponseWriter, r *http.Request, forward func(*http.Request) *httptest.ResponseRecorder) bool

// APIProxy is the proxy. It authenticates to the API server with the bed's
// admin credentials, so its clients need none.
type APIProxy struct {
	rp         *httputil.ReverseProxy
	srv        *http.Server
	Kubeconfig string // a kubeconfig that points at the proxy

	mu   sync.Mutex
	hook APIHook
}

// NewAPIProxy starts a proxy to the bed's API server and stops it when the
// test ends. Its clients speak HTTP/1.1 to it, one connection per watch.
func (b *Testbed) NewAPIProxy(t *testing.T) *APIProxy {
	t.Helper()
	return b.startAPIProxy(t, false)
}

// NewTLSAPIProxy is newAPIProxy serving TLS and HTTP/2 as the API server
// does (up to its default 1,000 streams per connection), so a client's
// watches share connections as they do in a cluster: what a loop's
// memory is measured with.
func (b *Testbed) NewTLSAPIProxy(t *testing.T) *APIProxy {
	t.Helper()
	return b.startAPIProxy(t, true)
}

func (b *Testbed) startAPIProxy(t *testing.T, useTLS bool) *APIProxy {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", b.Kubeconfig)
	require.NoError(t, err)
	rt, err := rest.TransportFor(cfg)
	require.NoError(t, err)
	up, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	p := &APIProxy{rp: &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(up) },
		Transport:     rt,
		FlushInterval: -1,
	}}
	kc := clientcmdapi.NewConfig()
	if useTLS {
		srv := httptest.NewUnstartedServer(p)
		srv.EnableHTTP2 = true
		srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1000}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: srv.URL,
			CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
	} else {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = p.srv.Serve(ln) }()
		t.Cleanup(func() { _ = p.srv.Close() })
		kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: "http://" + ln.Addr().String()}
	}
	kc.AuthInfos["anonymous"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "anonymous"}
	kc.CurrentContext = "proxy"
	p.Kubeconfig = filepath.Join(t.TempDir(), "kubeconfig-proxy")
	require.NoError(t, clientcmd.WriteToFile(*kc, p.Kubeconfig))
	return p
}

// Set installs the hook; nil lets every request through.
func (p *APIProxy) Set(h APIHook) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hook = h
}

func (p *APIProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	h := p.hook
	p.mu.Unlock()
	if h != nil && h(w, r, p.forward) {
		return
	}
	p.rp.ServeHTTP(w, r)
}

// forward sends r to the API server and records its answer.
func (p *APIProxy) forward(r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	p.rp.ServeHTTP(rec, r)
	return rec
}

// CopyTo passes a recorded answer on.
func CopyTo(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// JobCreate reports whether r creates a Job in ns, and returns its body,
// which it puts back for the API server.
func JobCreate(r *http.Request, ns string) ([]byte, bool) {
	if r.Method != http.MethodPost || r.URL.Path != "/apis/batch/v1/namespaces/"+ns+"/jobs" {
		return nil, false
	}
	raw, _ := io.ReadAll(r.Body)
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(raw))
	return raw, true
}

// ConfigMapWrite reports whether r creates or replaces a ConfigMap in ns.
func ConfigMapWrite(r *http.Request, ns string) bool {
	base := "/api/v1/namespaces/" + ns + "/configmaps"
	return (r.Method == http.MethodPost && r.URL.Path == base) ||
		(r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, base+"/"))
}

// ConfigMapRead says whether r reads ns's ConfigMaps (a get or a list).
func ConfigMapRead(r *http.Request, ns string) bool {
	base := "/api/v1/namespaces/" + ns + "/configmaps"
	return r.Method == http.MethodGet && !strings.Contains(r.URL.RawQuery, "watch=") &&
		(r.URL.Path == base || strings.HasPrefix(r.URL.Path, base+"/"))
}

// StatusTimeout is the API server's own answer when a request outlives its
// deadline: the write may or may not have happened.
const StatusTimeout = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
	`"message":"the server was unable to return a response in the time allotted, but may still be processing the request",` +
	`"reason":"Timeout","code":504}`
