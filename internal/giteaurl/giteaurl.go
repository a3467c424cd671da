// Package giteaurl decides where the scaler may send a RunnerGroup's API
// token. The Gitea URL is written by a tenant, who is not trusted; the
// places a token may go are the platform team's decision (the chart's
// allowedGiteaURLs).
//
// A Policy answers twice: before any request (Check, on the group's URL and
// on every redirect) and when a connection is dialled (Control, on the
// address DNS gave), so a host name that resolves to a loopback or metadata
// address cannot slip past the first check (DNS rebinding).
package giteaurl

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNotAllowed is what every refusal wraps.
var ErrNotAllowed = errors.New("not allowed")

// entry is one allowed URL, normalised.
type entry struct {
	scheme, host, port string
	// path has no trailing slash; "" allows every path.
	path string
}

// Policy is the list of allowed Gitea URLs. The zero Policy (an empty
// list) allows any host except the special addresses (see Special).
type Policy struct {
	entries []entry
	// dialable are the special addresses (ip:port) an entry names
	// explicitly, so the dial check lets them through.
	dialable map[netip.AddrPort]bool
	// loopbackPorts are the ports of entries whose host is "localhost":
	// any loopback address may be dialled on them.
	loopbackPorts map[string]bool
}

// Parse reads the allowed URLs. Each must be an absolute http or https URL
// with a host and no credentials, query or fragment; empty strings are
// skipped.
func Parse(urls []string) (*Policy, error) {
	p := &Policy{dialable: map[netip.AddrPort]bool{}, loopbackPorts: map[string]bool{}}
	var errs []error
	for _, raw := range urls {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		e, err := parseEntry(raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.entries = append(p.entries, e)
		if ip, err := netip.ParseAddr(e.host); err == nil {
			port, _ := strconv.ParseUint(e.port, 10, 16)
			p.dialable[netip.AddrPortFrom(ip.Unmap(), uint16(port))] = true
		} else if isLocalhostName(e.host) {
			p.loopbackPorts[e.port] = true
		}
	}
	return p, errors.Join(errs...)
}

func parseEntry(raw string) (entry, error) {
	u, err := parse(raw)
	if err != nil {
		return entry{}, fmt.Errorf("allowed Gitea URL %q: %w", redacted(raw), err)
	}
	return u, nil
}

// parse normalises an http(s) URL into an entry: lower-case scheme and host,
// the port made explicit, the path without its trailing slash.
func parse(raw string) (entry, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return entry{}, err
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return entry{}, errors.New("scheme must be http or https")
	case u.Hostname() == "":
		return entry{}, errors.New("no host")
	case u.User != nil:
		return entry{}, errors.New("must not carry credentials")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return entry{}, errors.New("no query or fragment allowed")
	}
	// A server or proxy may resolve dot segments, and "/gitea/../admin"
	// would then leave the allowed path.
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return entry{}, errors.New("no . or .. path segments allowed")
		}
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return entry{}, fmt.Errorf("invalid port %q", port)
	}
	host := strings.ToLower(u.Hostname())
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().String()
	}
	return entry{scheme: u.Scheme, host: host, port: port, path: strings.TrimRight(u.EscapedPath(), "/")}, nil
}

// Empty reports whether no URL is listed: any host is then allowed but the
// special addresses.
func (p *Policy) Empty() bool { return p == nil || len(p.entries) == 0 }

// Check says whether a request may go to raw (a group's base URL, or where
// Gitea redirected a request). With entries, raw must have the scheme, host
// and port of one of them and a path that starts with its path at a
// segment boundary ("/gitea" allows "/gitea/api", not "/gitea2"). Without,
// any http(s) URL whose host is not a special address or localhost.
func (p *Policy) Check(raw string) error {
	u, err := parse(raw)
	if err != nil {
		return fmt.Errorf("the Gitea URL %s is %w: %v", redacted(raw), ErrNotAllowed, err)
	}
	if p.Empty() {
		if isLocalhostName(u.host) {
			return fmt.Errorf("the Gitea URL host %s is %w: it is a loopback name, and the list of allowed Gitea URLs is empty", u.host, ErrNotAllowed)
		}
		if ip, err := netip.ParseAddr(u.host); err == nil && Special(ip) {
			return fmt.Errorf("the Gitea URL host %s is %w: it is a loopback, link-local or metadata address, and the list of allowed Gitea URLs is empty", u.host, ErrNotAllowed)
		}
		return nil
	}
	for _, e := range p.entries {
		if e.scheme == u.scheme && e.host == u.host && e.port == u.port && underPath(u.path, e.path) {
			return nil
		}
	}
	return fmt.Errorf("the Gitea URL %s is %w: it is under none of the allowed Gitea URLs", redacted(raw), ErrNotAllowed)
}

// underPath reports whether path is prefix or below it, on a segment
// boundary. Both have no trailing slash.
func underPath(path, prefix string) bool {
	return prefix == "" || path == prefix || strings.HasPrefix(path, prefix+"/")
}

// Control is a net.Dialer Control function: it refuses a connection to a
// special address unless an entry names it (an IP literal with its port, or
// localhost with its port). It sees the address DNS resolved to, so a name
// that passed Check cannot lead to a metadata service.
func (p *Policy) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w: cannot read the address", address, ErrNotAllowed)
	}
	ip := ap.Addr().Unmap()
	if !Special(ip) {
		return nil
	}
	if p != nil && (p.dialable[netip.AddrPortFrom(ip, ap.Port())] ||
		(ip.IsLoopback() && p.loopbackPorts[strconv.Itoa(int(ap.Port()))])) {
		return nil
	}
	return fmt.Errorf("dial %s: %w: a loopback, link-local or metadata address that no allowed Gitea URL names", ap, ErrNotAllowed)
}

// metadata are cloud metadata and host services outside the link-local
// range: Alibaba Cloud's metadata, Azure's WireServer, AWS's IPv6 IMDS.
var metadata = []netip.Addr{
	netip.MustParseAddr("100.100.100.200"),
	netip.MustParseAddr("168.63.129.16"),
	netip.MustParseAddr("fd00:ec2::254"),
}

// Prefixes that carry an IPv4 address inside an IPv6 one: a connection to
// them reaches that IPv4 address through a NAT64 gateway (RFC 6052's
// well-known prefix, the IPv4 address in the last 32 bits) or a 6to4 relay
// (RFC 3056, the IPv4 address in bits 16 to 47).
var (
	nat64  = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4 = netip.MustParsePrefix("2002::/16")
)

// embeddedIPv4 is the IPv4 address a NAT64 or 6to4 address reaches.
func embeddedIPv4(ip netip.Addr) (netip.Addr, bool) {
	b := ip.As16()
	switch {
	case nat64.Contains(ip):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixTo4.Contains(ip):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// Special reports whether ip is a loopback, unspecified ("0.0.0.0" reaches
// the local host), link-local (169.254.169.254, the usual metadata
// service, is one) or known metadata address, also when written as an
// IPv4-mapped, NAT64 or 6to4 IPv6 address.
func Special(ip netip.Addr) bool {
	ip = ip.Unmap()
	if v4, ok := embeddedIPv4(ip); ok {
		return Special(v4)
	}
	if ip.IsLoopback() || ip.IsUnspecified() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() {
		return true
	}
	for _, m := range metadata {
		if ip == m {
			return true
		}
	}
	return false
}

// isLocalhostName is "localhost" and its subdomains, which resolvers answer
// with loopback addresses (RFC 6761).
func isLocalhostName(host string) bool {
	host = strings.TrimSuffix(host, ".")
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// redacted is raw without any credentials, for messages.
func redacted(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}

// Dialer is a net.Dialer that applies p's Control, with the timeouts of
// http.DefaultTransport's own dialer.
func (p *Policy) Dialer() *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: p.Control}
}

// maxRedirects is what http.Client follows by default.
const maxRedirects = 10

// HTTPClient sends requests through a clone of base (nil: Go's default
// transport) that applies p's dial check, and checks every redirect with
// Check, so Gitea (or whatever answers) cannot send the token's requests
// somewhere the list does not allow. Proxies of base still apply: the dial
// check then sees the proxy's address, and the proxy decides where it
// connects. Share one client: its transport keeps connections for reuse.
func (p *Policy) HTTPClient(base *http.Transport) *http.Client {
	if base == nil {
		base = http.DefaultTransport.(*http.Transport)
	}
	t := base.Clone()
	t.DialContext = p.Dialer().DialContext
	return &http.Client{
		Transport: t,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			u := *req.URL
			u.RawQuery, u.ForceQuery, u.Fragment = "", false, ""
			return p.Check(u.String())
		},
	}
}
