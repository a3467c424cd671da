package webhook

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// MaxConns is how many connections the webhook's listener holds at once
// (LimitListener). Gitea sends one delivery per connection at a time, and
// a push's deliveries come within a second; with MaxHeaderBytes and
// MaxBody this bounds what anonymous clients can pin to about
// MaxConns × 160 KiB (a body buffer may grow to twice MaxBody), some 5 MiB.
const MaxConns = 32

// NewServer serves h with timeouts short enough that a client that stalls
// holds its connection seconds, not half a minute: a delivery is one
// small request, sent at once.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       30 * time.Second,
		// Gitea's delivery headers are under 1 KiB.
		MaxHeaderBytes: 16 << 10,
	}
}

// LimitListener accepts at most n connections at once; one past the limit
// is closed as soon as it is accepted, unread, so a flood costs a
// connection attempt each and waits in no queue (the pass that polls is
// the backstop for a delivery refused so).
func LimitListener(ln net.Listener, n int) net.Listener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n)}
}

type limitListener struct {
	net.Listener
	slots chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			_ = c.Close()
		}
	}
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
