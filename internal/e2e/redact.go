//go:build e2e

// Redaction: every token a test sees is kept here, so that no failure
// message or dump shows it.

package e2e

import (
	"slices"
	"strings"
	"sync"
)

// SecretSet holds every token the tests see, so dumps can redact them.
type SecretSet struct {
	mu     sync.Mutex
	values []string
}

var Secrets = &SecretSet{}

func (s *SecretSet) Add(v string) {
	if len(v) < 6 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.values, v) {
		s.values = append(s.values, v)
	}
}

// Redact replaces every known token in s.
func Redact(s string) string {
	Secrets.mu.Lock()
	defer Secrets.mu.Unlock()
	for _, v := range Secrets.values {
		s = strings.ReplaceAll(s, v, "<redacted>")
	}
	return s
}
