package giteaurl

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckAllowsOnlyURLsUnderAnEntry(t *testing.T) {
	p, err := Parse([]string{"https://gitea.example.com", "http://git.internal:3000/gitea/", "http://127.0.0.1:3000"})
	require.NoError(t, err)
	tests := []struct {
		url     string
		allowed bool
	}{
		{"https://gitea.example.com", true},
		{"https://gitea.example.com/", true},
		{"https://GITEA.example.com/sub/path", true},
		{"https://gitea.example.com:443", true},
		{"http://gitea.example.com", false},
		{"https://gitea.example.com:8443", false},
		{"https://gitea.example.com.evil.io", false},
		{"https://evil.io/gitea.example.com", false},
		{"http://git.internal:3000/gitea", true},
		{"http://git.internal:3000/gitea/api/v1/orgs", true},
		{"http://git.internal:3000/gitea2", false},
		{"http://git.internal:3000/gitea/../admin", false},
		{"http://git.internal:3000/gitea/%2e%2e/admin", false},
		{"http://git.internal:3000/", false},
		{"http://git.internal/gitea", false},
		{"http://127.0.0.1:3000", true},
		{"http://127.0.0.1:3001", false},
		{"http://localhost:3000", false},
		{"http://169.254.169.254/latest", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := p.Check(tt.url)
			if tt.allowed {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrNotAllowed)
			assert.Contains(t, err.Error(), "not allowed")
		})
	}
}

func TestCheckWithAnEmptyListRefusesOnlyLocalAndMetadataHosts(t *testing.T) {
	p, err := Parse(nil)
	require.NoError(t, err)
	require.True(t, p.Empty())
	tests := []struct {
		url     string
		allowed bool
	}{
		{"https://gitea.example.com", true},
		{"http://10.0.0.5:3000", true},
		{"http://gitea-http.gitea.svc:3000", true},
		{"http://127.0.0.1:3000", false},
		{"http://127.1.2.3", false},
		{"http://[::1]:3000", false},
		{"http://[::ffff:127.0.0.1]", false},
		{"http://localhost:3000", false},
		{"http://LOCALHOST.:3000", false},
		{"http://gitea.localhost", false},
		{"http://0.0.0.0", false},
		{"http://169.254.169.254", false},
		{"http://[fe80::1]", false},
		{"http://[fd00:ec2::254]", false},
		{"http://100.100.100.200", false},
		{"http://168.63.129.16", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := p.Check(tt.url)
			if tt.allowed {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrNotAllowed)
			}
		})
	}
}

func TestParseRefusesEntriesThatAreNotPlainHTTPURLs(t *testing.T) {
	tests := map[string]string{
		"ftp://gitea.example.com":           "scheme",
		"gitea.example.com":                 "scheme",
		"https://":                          "no host",
		"https://user:pw@gitea.example.com": "credentials",
		"https://gitea.example.com/?x=1":    "query",
		"https://gitea.example.com/#top":    "fragment",
		"https://gitea.example.com:0":       "port",
		"https://gitea.example.com:99999":   "port",
		"https://gitea example.com":         "invalid",
	}
	for raw, want := range tests {
		t.Run(raw, func(t *testing.T) {
			_, err := Parse([]string{"https://ok.example.com", raw})
			require.Error(t, err)
			assert.Contains(t, err.Error(), want)
			assert.NotContains(t, err.Error(), ":pw@", "an entry's credentials are never repeated")
		})
	}
}

func TestParseSkipsBlankEntries(t *testing.T) {
	p, err := Parse([]string{"", "  "})
	require.NoError(t, err)
	assert.True(t, p.Empty())
}

func TestControlRefusesSpecialAddressesNoEntryNames(t *testing.T) {
	empty, err := Parse(nil)
	require.NoError(t, err)
	listed, err := Parse([]string{"http://127.0.0.1:3000", "http://localhost:8080", "https://gitea.example.com"})
	require.NoError(t, err)
	tests := []struct {
		name    string
		p       *Policy
		address string
		allowed bool
	}{
		{"a public address", empty, "203.0.113.7:443", true},
		{"a private address", empty, "10.1.2.3:3000", true},
		{"loopback with an empty list", empty, "127.0.0.1:3000", false},
		{"IPv6 loopback with an empty list", empty, "[::1]:3000", false},
		{"the metadata service", empty, "169.254.169.254:80", false},
		{"the metadata service though other hosts are listed", listed, "169.254.169.254:80", false},
		{"a listed loopback address and port", listed, "127.0.0.1:3000", true},
		{"a listed loopback address on another port", listed, "127.0.0.1:3001", false},
		{"any loopback address on the port of a listed localhost", listed, "[::1]:8080", true},
		{"a name that resolved to loopback on another port", listed, "127.0.0.1:443", false},
		{"no policy at all", nil, "127.0.0.1:80", false},
		{"not an address", empty, "nonsense", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Control("tcp", tt.address, nil)
			if tt.allowed {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrNotAllowed)
			}
		})
	}
}

func TestSpecialCoversMappedAddresses(t *testing.T) {
	assert.True(t, Special(netip.MustParseAddr("::ffff:169.254.169.254")))
	assert.False(t, Special(netip.MustParseAddr("::ffff:203.0.113.7")))
}

// An IPv4 address written in an IPv6 translation prefix reaches that IPv4
// address through a NAT64 gateway or a 6to4 relay: the metadata service,
// loopback and link-local addresses stay special in those spellings, and
// ordinary addresses stay ordinary.
func TestSpecialCoversNAT64And6to4Forms(t *testing.T) {
	tests := []struct {
		addr    string
		special bool
	}{
		{"64:ff9b::a9fe:a9fe", true},       // NAT64 of 169.254.169.254
		{"64:ff9b::169.254.169.254", true}, // the same, dotted
		{"64:ff9b::7f00:1", true},          // NAT64 of 127.0.0.1
		{"64:ff9b::6464:64c8", true},       // NAT64 of 100.100.100.200 (Alibaba)
		{"64:ff9b::a83f:8110", true},       // NAT64 of 168.63.129.16 (Azure)
		{"64:ff9b::0:0", true},             // NAT64 of 0.0.0.0
		{"64:ff9b::cb00:7107", false},      // NAT64 of 203.0.113.7
		{"2002:a9fe:a9fe::", true},         // 6to4 of 169.254.169.254
		{"2002:a9fe:a9fe:1:2:3:4:5", true}, // any host behind it
		{"2002:7f00:1::1", true},           // 6to4 of 127.0.0.1
		{"2002:6464:64c8::", true},         // 6to4 of 100.100.100.200
		{"2002:cb00:7107::1", false},       // 6to4 of 203.0.113.7
		{"64:ff9b:1::a9fe:a9fe", false},    // outside the /96 (local-use NAT64 is not translated to this form)
		{"2001:db8::a9fe:a9fe", false},     // an ordinary address that happens to end like it
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			assert.Equal(t, tt.special, Special(netip.MustParseAddr(tt.addr)))
		})
	}
}

// FuzzCheck: Check never panics, and an allowed URL is always under an
// entry: same scheme, and its path starts with the entry's on a segment
// boundary.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"https://gitea.example.com/sub", "http://127.0.0.1:3000", "https://gitea.example.com/sub2", "http://[::1]", "https://gitea.example.com:443/sub/../x", "https://%zz"} {
		f.Add(s)
	}
	p, err := Parse([]string{"https://gitea.example.com/sub"})
	if err != nil {
		f.Fatal(err)
	}
	empty, _ := Parse(nil)
	f.Fuzz(func(t *testing.T, raw string) {
		_ = empty.Check(raw)
		if p.Check(raw) != nil {
			return
		}
		u, err := parse(raw)
		if err != nil {
			t.Fatalf("%q allowed but does not parse: %v", raw, err)
		}
		if u.scheme != "https" || u.host != "gitea.example.com" || u.port != "443" {
			t.Fatalf("%q allowed with origin %s://%s:%s", raw, u.scheme, u.host, u.port)
		}
		if u.path != "/sub" && !strings.HasPrefix(u.path, "/sub/") {
			t.Fatalf("%q allowed with path %q", raw, u.path)
		}
	})
}
