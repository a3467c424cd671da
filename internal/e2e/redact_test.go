//go:build e2e

// Redaction: every token a test sees is kept here, so that no failure
// message or dump shows it.

package e2e

import (
	"slices"
	"strings"
	"sync"
)

// secretSet holds every token the tests see, so dumps can redact them.
type secretSet struct {
	mu     sync.Mutex
	values []string
}

var secrets = &secretSet{}

func (s *secretSet) add(v string) {
	if len(v) < 6 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.values, v) {
		s.values = append(s.values, v)
	}
}

// redact replaces every known token in s.
func redact(s string) string {
	secrets.mu.Lock()
	defer secrets.mu.Unlock()
	for _, v := range secrets.values {
		s = strings.ReplaceAll(s, v, "<redacted>")
	}
	return s
}
