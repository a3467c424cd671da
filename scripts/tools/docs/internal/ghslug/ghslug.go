// Package ghslug computes the anchors GitHub gives Markdown headings, so
// that generated documents can link to headings and the link checker can
// tell a working #anchor from a dead one.
//
// GitHub's rule (github-slugger, which github.com follows): take the
// heading's text as rendered (no Markdown syntax), lower-case it, drop every
// character that is not a letter, digit, mark, space, '-' or '_', and turn
// each space into '-'. A heading whose slug was already used in the document
// gets "-1", "-2", ... appended.
package ghslug

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Slug is the anchor of a heading's rendered text, before de-duplication.
func Slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_':
			b.WriteRune(r)
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Slugger hands out the anchors of one document's headings in order,
// de-duplicated as GitHub does.
type Slugger struct{ seen map[string]int }

// Next returns the anchor of the next heading with the given rendered text.
func (s *Slugger) Next(text string) string {
	if s.seen == nil {
		s.seen = map[string]int{}
	}
	base := Slug(text)
	slug := base
	for {
		if _, used := s.seen[slug]; !used {
			break
		}
		s.seen[base]++
		slug = base + "-" + strconv.Itoa(s.seen[base])
	}
	s.seen[slug] = 0
	return slug
}

var (
	inlineLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	refLink    = regexp.MustCompile(`!?\[([^\]]*)\]\[[^\]]*\]`)
	htmlTag    = regexp.MustCompile(`<[^>]+>`)
	emphasis   = regexp.MustCompile(`(^|[^\w])[*_]{1,3}([^*_]+?)[*_]{1,3}([^\w]|$)`)
)

// Text is the rendered text of a heading's Markdown source (after the #s):
// links become their text, and code spans, emphasis and HTML tags lose
// their markup. Enough for headings as people write them, not a full
// CommonMark renderer.
func Text(md string) string {
	md = strings.TrimSpace(md)
	// A closing sequence of #s is not part of the heading.
	if t := strings.TrimRight(md, "#"); t != md && (t == "" || strings.HasSuffix(t, " ")) {
		md = strings.TrimSpace(t)
	}
	md = inlineLink.ReplaceAllString(md, "$1")
	md = refLink.ReplaceAllString(md, "$1")
	md = htmlTag.ReplaceAllString(md, "")
	md = strings.ReplaceAll(md, "`", "")
	for {
		next := emphasis.ReplaceAllString(md, "$1$2$3")
		if next == md {
			break
		}
		md = next
	}
	return md
}
