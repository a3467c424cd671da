// Package termtext makes text the read-only commands print safe for an
// operator's terminal. Labels, condition messages and Gitea's errors come
// from RunnerGroup writers and from Gitea, neither trusted: written raw, a
// control character could recolour, retitle, move the cursor over earlier
// output or fake a line such as "verdict: Running".
package termtext

import (
	"bytes"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s with each control character (C0, newline and tab
// included, DEL and C1) written as a Go escape (\x1b, \u009b) and each
// byte that is not UTF-8 as \xNN; everything else is left as it is.
func Escape(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || unicode.IsControl(r) {
			return true
		}
		i += n
	}
	return false
}

// JSON rewrites the DEL and C1 characters that encoding/json leaves raw
// inside strings as \u escapes, so the document decodes to the same
// values. raw must come from encoding/json (which escapes C0 and replaces
// invalid UTF-8): outside strings it holds only JSON's own whitespace.
func JSON(raw []byte) []byte {
	if !bytes.ContainsFunc(raw, isC1OrDEL) {
		return raw
	}
	var b bytes.Buffer
	for i := 0; i < len(raw); {
		r, n := utf8.DecodeRune(raw[i:])
		if isC1OrDEL(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.Write(raw[i : i+n])
		}
		i += n
	}
	return b.Bytes()
}

func isC1OrDEL(r rune) bool { return r >= 0x7f && r <= 0x9f }
