// Command mdlinks checks the links of every Markdown file under a directory:
// a relative link must name a file or folder that exists, and a #fragment
// into a Markdown file (or the same file) must name one of its headings, by
// GitHub's anchor rule (internal/ghslug), or an HTML id/name in it. Links
// with a scheme (https:, mailto:) are not fetched: the check must pass
// offline and not flake.
//
// It exists because the docs are split over several files that move: a
// heading renamed or a section moved breaks links elsewhere silently.
//
// Usage: mdlinks ROOT
package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/gitea-runner-operator/gitea-runner-operator/scripts/tools/docs/internal/ghslug"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mdlinks ROOT")
		os.Exit(2)
	}
	problems, files, err := check(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "mdlinks: %v\n", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "mdlinks: %d broken links in %d Markdown files\n", len(problems), files)
		os.Exit(1)
	}
	fmt.Printf("mdlinks: every link in %d Markdown files resolves\n", files)
}

// skipDirs are build outputs, caches and VCS data: not the project's docs.
var skipDirs = map[string]bool{".git": true, ".cache": true, ".testbed": true, "bin": true, "node_modules": true}

// doc is what a Markdown file offers to links and what it links to.
type doc struct {
	anchors map[string]bool
	links   []link
}

type link struct {
	line   int
	target string
}

func check(root string) (problems []string, files int, err error) {
	docs := map[string]*doc{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".md") {
			pd, err := parseFile(path)
			if err != nil {
				return err
			}
			docs[filepath.Clean(path)] = pd
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	var paths []string
	for p := range docs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		for _, l := range docs[p].links {
			if msg := resolve(root, p, l.target, docs); msg != "" {
				rel, _ := filepath.Rel(root, p)
				problems = append(problems, fmt.Sprintf("%s:%d: %s", rel, l.line, msg))
			}
		}
	}
	return problems, len(paths), nil
}

var scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// resolve returns why target, linked from file from, does not resolve, or "".
func resolve(root, from, target string, docs map[string]*doc) string {
	if scheme.MatchString(target) {
		return ""
	}
	pathPart, frag, _ := strings.Cut(target, "#")
	if p, err := url.PathUnescape(pathPart); err == nil {
		pathPart = p
	}
	dest := from
	if pathPart != "" {
		if strings.HasPrefix(pathPart, "/") {
			dest = filepath.Join(root, pathPart)
		} else {
			dest = filepath.Join(filepath.Dir(from), pathPart)
		}
		if _, err := os.Stat(dest); err != nil {
			return fmt.Sprintf("%s: no such file or folder", target)
		}
	}
	if frag == "" {
		return ""
	}
	d, ok := docs[filepath.Clean(dest)]
	if !ok {
		// A fragment into another kind of file (#L10 of a Go file) is the
		// host's business.
		return ""
	}
	if !d.anchors[frag] {
		return fmt.Sprintf("%s: no heading or anchor #%s in %s", target, frag, filepath.Base(dest))
	}
	return ""
}

var (
	atxHeading  = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*))?$`)
	setextLine  = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	fence       = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})")
	htmlID      = regexp.MustCompile(`<[a-zA-Z][^>]*\s(?:id|name)="([^"]+)"`)
	codeSpan    = regexp.MustCompile("(`+)(?:.+?)`+")
	inlineLink  = regexp.MustCompile(`\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	refDef      = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	nonParagrph = regexp.MustCompile(`^\s*([|>#*+-]|\d+[.)]\s|$)`)
)

func parseFile(path string) (*doc, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d := &doc{anchors: map[string]bool{}}
	var slugs ghslug.Slugger
	var open string // the fence that opened the code block we are in
	prev := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case open == "":
				open = m[1]
			case m[1][0] == open[0] && len(m[1]) >= len(open) && strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), string(open[0]))) == "":
				open = ""
			}
			prev = ""
			continue
		}
		if open != "" {
			continue
		}
		if m := atxHeading.FindStringSubmatch(line); m != nil {
			d.anchors[slugs.Next(ghslug.Text(m[2]))] = true
		} else if setextLine.MatchString(line) && prev != "" && !nonParagrph.MatchString(prev) {
			d.anchors[slugs.Next(ghslug.Text(prev))] = true
		}
		for _, m := range htmlID.FindAllStringSubmatch(line, -1) {
			d.anchors[m[1]] = true
		}
		text := codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
			d.links = append(d.links, link{line: n, target: strings.Trim(m[1], "<>")})
		}
		if m := refDef.FindStringSubmatch(text); m != nil {
			d.links = append(d.links, link{line: n, target: strings.Trim(m[1], "<>")})
		}
		prev = line
	}
	return d, sc.Err()
}
