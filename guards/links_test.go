package guards

import (
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The pages link to each other and to the repository's files. These tests
// fail when a link of README.md or docs/*.md points at a file that is not
// there or at a heading a page does not have.

// mdLink matches a Markdown link or image: its target, up to a space or
// the closing parenthesis.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// headingText matches an ATX heading and its text.
var headingText = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)

// inlineLink matches a link inside a heading, whose text alone makes the
// anchor.
var inlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// slug is the anchor GitHub gives a heading: its text, links reduced to
// their words, lower-cased, without the characters that are not letters,
// digits, spaces, hyphens or underscores, and with each space a hyphen.
func slug(heading string) string {
	heading = inlineLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// proseLine is a line of a Markdown text outside its fenced blocks, with
// its inline code spans blanked out: what a reader sees as prose, links
// and headings.
type proseLine struct {
	n    int // 1-based
	text string
}

// proseLines returns the prose lines of md, in order.
func proseLines(md string) []proseLine {
	var out []proseLine
	fenced := false
	code := regexp.MustCompile("`[^`\n]*`")
	for i, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, proseLine{i + 1, code.ReplaceAllString(l, "``")})
		}
	}
	return out
}

// anchors returns the anchors of the headings of md, a repeated one
// numbered as GitHub numbers it ("name", "name-1", ...).
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	lines := strings.Split(md, "\n")
	for _, p := range proseLines(md) {
		if !strings.HasPrefix(p.text, "#") {
			continue
		}
		// The anchor is made of the heading's whole text, code included.
		m := headingText.FindStringSubmatch(lines[p.n-1])
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n, dup := seen[s]; dup {
			seen[s] = n + 1
			s = fmt.Sprintf("%s-%d", s, n+1)
		} else {
			seen[s] = 0
		}
		out[s] = true
	}
	return out
}

// TestSlug checks the anchors made of headings of the kinds the pages have.
func TestSlug(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"The suite", "the-suite"},
		{"Rules the tests keep", "rules-the-tests-keep"},
		{"1. redis-gc-pause — A client paused past its TTL writes", "1-redis-gc-pause--a-client-paused-past-its-ttl-writes"},
		{"rueidislock (`redis`)", "rueidislock-redis"},
		{"Apache Curator 5.4.0: two leaders, two holders", "apache-curator-540-two-leaders-two-holders"},
		{"NATS JetStream KV: Jepsen's 2025 finding as a lock experiment", "nats-jetstream-kv-jepsens-2025-finding-as-a-lock-experiment"},
		{"etcd-mutex: a retried Unlock deletes the session's newer lock (etcd-io/etcd#22082)", "etcd-mutex-a-retried-unlock-deletes-the-sessions-newer-lock-etcd-ioetcd22082"},
		{"A link to [faults](faults.md) in a heading", "a-link-to-faults-in-a-heading"},
		{"snake_case stays", "snake_case-stays"},
	}
	for _, tt := range tests {
		if got := slug(tt.heading); got != tt.want {
			t.Errorf("slug(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
	if got := anchors("# A\n\n## Notes\n\n```\n## not a heading\n```\n\n## Notes\n"); !got["notes"] || !got["notes-1"] || got["not-a-heading"] {
		t.Errorf("anchors: %v, want a, notes and notes-1", got)
	}
}

// TestDocsLinksResolve fails when a link of README.md or docs/*.md points
// at a file of the repository that is not there, or at an anchor that the
// page it names has no heading for. Links to other sites are not followed.
func TestDocsLinksResolve(t *testing.T) {
	docs := readDocs(t)
	pages := map[string]map[string]bool{}
	for _, d := range docs {
		pages[d.path] = anchors(d.text)
	}
	checked := 0
	for _, d := range docs {
		for _, l := range proseLines(d.text) {
			for _, m := range mdLink.FindAllStringSubmatch(l.text, -1) {
				target := m[1]
				if regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(target) {
					continue // another site, or mailto:
				}
				where := fmt.Sprintf("%s:%d", d.path, l.n)
				file, anchor, _ := strings.Cut(target, "#")
				dest := d.path
				if file != "" {
					dest = path.Clean(path.Join(path.Dir(d.path), file))
					if strings.HasPrefix(dest, "../") {
						t.Errorf("%s links to %s, outside the repository", where, target)
						continue
					}
					if _, err := os.Stat(path.Join(repoRoot, dest)); err != nil {
						t.Errorf("%s links to %s: %v", where, target, err)
						continue
					}
				}
				checked++
				if anchor == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				a, ok := pages[dest]
				if !ok {
					b, err := os.ReadFile(path.Join(repoRoot, dest))
					if err != nil {
						t.Fatal(err)
					}
					a = anchors(string(b))
					pages[dest] = a
				}
				if !a[anchor] {
					t.Errorf("%s links to %s, but %s has no heading whose anchor is #%s", where, target, dest, anchor)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d links checked: the pages link to each other far more", checked)
	}
}
