package guards

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A reference page says what is true now; what was true at a commit is
// history, which stays in git. These tests fail when README.md or a page
// of docs/ names a commit.

// hexWord matches a word of 7 to 40 lowercase hex digits, the length of a
// commit's name from git's shortest to its whole; commitHashes keeps those
// with a digit and a letter, as a commit's name almost always has.
var hexWord = regexp.MustCompile(`\b[0-9a-f]{7,40}\b`)

// hashAllowed are the contexts in which a page may hold a hex word that is
// no commit the page cites, each with the reason.
var hashAllowed = []struct {
	context *regexp.Regexp
	why     string
}{
	{regexp.MustCompile(`, from commit [0-9a-f]{7,40}(-dirty)?,`),
		"the header that `locktest debate --findings` and `--track-record` write: the code the page's measurements were made with, replaced when the page is made again"},
	{regexp.MustCompile(`^- commit: [0-9a-f]{7,40}(-dirty)?$`),
		"the header that `locktest matrix --md` writes: the code the matrix was measured with"},
	{regexp.MustCompile(`\bv0\.0\.0-[0-9]{14}-[0-9a-f]{12}\b`),
		"a Go pseudo-version: locktest's own version as a run prints it, in a sample of its output"},
	{regexp.MustCompile(`\bv[0-9]+\.[0-9]+\.[0-9]+ [0-9a-f]{7,12}\b`),
		"an example of locktest's version as it prints and records it (runstore.Version): a release and the VCS revision it was built from"},
	{regexp.MustCompile(`"lock_value":"p[0-9]+-[0-9]+-[0-9a-f]{8}"`),
		"a lock value in a sample line of a history: a worker's random suffix"},
}

// commitHashes returns the words of line that may name a commit: the hex
// words with a digit and a letter outside the contexts of hashAllowed.
// It counts in used, by the index of hashAllowed, the contexts it found.
func commitHashes(line string, used []int) []string {
	for i, a := range hashAllowed {
		if a.context.MatchString(line) {
			used[i]++
			line = a.context.ReplaceAllString(line, " ")
		}
	}
	var out []string
	for _, w := range hexWord.FindAllString(line, -1) {
		if strings.ContainsAny(w, "0123456789") && strings.ContainsAny(w, "abcdef") {
			out = append(out, w)
		}
	}
	return out
}

// TestCommitHashesAreFound checks commitHashes on lines of the kinds the
// pages hold: a commit in running text, in a table cell or whole, and the
// hex words that are no commit.
func TestCommitHashesAreFound(t *testing.T) {
	tests := []struct {
		name, line string
		want       []string
	}{
		{"a short commit in running text", "measured at be354c7 on 2 cores", []string{"be354c7"}},
		{"a commit in a table cell", "| 2026-11-30 | f5c4cb1 | stress-ng |", []string{"f5c4cb1"}},
		{"a whole commit", "at 86441762154ed83f6cdeebf113fe29bbc5d1dbb7.", []string{"86441762154ed83f6cdeebf113fe29bbc5d1dbb7"}},
		{"two commits", "fixed between 0b24018 and d30e2f1", []string{"0b24018", "d30e2f1"}},
		{"a commit with a dirty tree, in text", "the code of 8fad239-dirty", []string{"8fad239"}},
		{"digits alone are a number", "66720990 ops and 1234567 more", nil},
		{"letters alone are a word", "the word deadbeefcafe has no digit", nil},
		{"seven is the shortest", "token abc1234 is seven, abc123 is six", []string{"abc1234"}},
		{"too long", "a 41-digit " + strings.Repeat("a1", 20) + "b word", nil},
		{"upper case is no commit's name", "ID 0B24018D", nil},
		{"part of a longer word", "node-0b24018x and x0b24018", nil},
		{"the debate's header", "on 2026-11-29 07:36 UTC, from commit be354c7, on 2 cores", nil},
		{"the track record's header", "on 2026-12-06 16:37 UTC, from commit 8fad239-dirty, on 2 cores", nil},
		{"the matrix's header", "- commit: e5b0772", nil},
		{"a pseudo-version", "locktest v0.0.0-20261206083203-98b44a80abbb", nil},
		{"a release and its revision", "versions: redis 7.0.15; locktest v0.4.0 1f2e3d4", nil},
		{"a release and its revision, recorded", `"locktest": "v0.4.0 1f2e3d4",`, nil},
		{"a lock value", `"lock_value":"p3-17-9f2c01aa","valid_until":1703120000`, nil},
		{"a commit beside an allowed context", "UTC, from commit be354c7, on 2 cores; made again at 0b24018", []string{"0b24018"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := commitHashes(tt.line, make([]int, len(hashAllowed))); !slices.Equal(got, tt.want) {
				t.Errorf("commitHashes(%q) = %q, want %q", tt.line, got, tt.want)
			}
		})
	}
}

// TestReferencePagesNameNoCommit fails when README.md or a page of docs/
// names a commit outside the contexts hashAllowed lists: a page says what
// is true now, not what was true at a commit, and its change notes stay in
// git. It also fails when a context of hashAllowed is in no page any more.
func TestReferencePagesNameNoCommit(t *testing.T) {
	used := make([]int, len(hashAllowed))
	for _, d := range readDocs(t) {
		for i, l := range strings.Split(d.text, "\n") {
			for _, h := range commitHashes(l, used) {
				t.Errorf("%s:%d names %s, which looks like a commit: say what is true now, and leave its history to git "+
					"(a hex word that is no commit goes in hashAllowed, with the reason)", d.path, i+1, h)
			}
		}
	}
	for i, a := range hashAllowed {
		if used[i] == 0 {
			t.Errorf("hashAllowed lets through %s (%s), which no page holds any more: remove it", a.context, a.why)
		}
	}
}
