package shellquote

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// What Join writes, sh splits back into the same words, whatever they
// hold.
func TestShellSplitsJoinBack(t *testing.T) {
	words := []string{"plain", "", "two words", "it's", `"double"`, "$HOME", "a;b|c&d", "back\\slash", "new\nline", "'''"}
	if got := Quote("it's"); got != `'it'\''s'` {
		t.Errorf("Quote(it's) = %s", got)
	}
	out, err := exec.Command("sh", "-c", `for w in `+Join(words)+`; do printf '%s\0' "$w"; done`).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if !slices.Equal(got, words) {
		t.Errorf("sh split %q back into %q", Join(words), got)
	}
}
