package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/locktest/locktest/internal/cliflags"
	"github.com/locktest/locktest/scenarios"
)

// exampleLines returns the command lines of a command's Example: each
// line that starts with "locktest", joined with the lines a trailing
// backslash continues, without its "#" comment, split into words.
func exampleLines(example string) [][]string {
	var out [][]string
	var cur string
	for _, l := range strings.Split(example, "\n") {
		l = strings.TrimSpace(l)
		if cur == "" && !strings.HasPrefix(l, "locktest ") {
			continue
		}
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i]
		}
		if strings.HasSuffix(l, `\`) {
			cur += strings.TrimSuffix(l, `\`) + " "
			continue
		}
		out = append(out, strings.Fields(cur+l))
		cur = ""
	}
	return out
}

// TestHelpExamplesAreRealCommands runs every example of every command's
// help through the command's own flag parsing and checks, as the docs
// guard does for the docs' commands: each names a command, parses, and
// passes the checks made before anything starts. A debate example's
// --only names scenarios of the built-in catalogue, unless it gives a
// scenario file of its own.
func TestHelpExamplesAreRealCommands(t *testing.T) {
	cmds := visibleCommands()
	paths := make([]string, 0, len(cmds))
	for p := range cmds {
		paths = append(paths, p)
	}
	// The longest path first: "images build" before "images".
	slices.SortFunc(paths, func(a, b string) int { return len(b) - len(a) })
	n := 0
	for _, p := range paths {
		for _, words := range exampleLines(cmds[p].Example) {
			n++
			line := strings.Join(words, " ")
			path := ""
			for _, q := range paths {
				if q != "" && strings.HasPrefix(line+" ", "locktest "+q+" ") {
					path = q
					break
				}
			}
			args := words[1+len(strings.Fields(path)):]
			got := checkLine(cliflags.Line{Path: path, Args: args})
			if got.ParseError != "" || got.ArgsError != "" || got.Error != "" {
				t.Errorf("%s's example %q: %s%s%s", cmds[p].CommandPath(), line, got.ParseError, got.ArgsError, got.Error)
				continue
			}
			if path == "debate" && len(got.Values["scenarios"]) == 0 && len(got.Values["only"]) > 0 {
				if _, err := scenarios.Select(scenarios.Builtin(), got.Values["only"]); err != nil {
					t.Errorf("debate's example %q: --only: %v", line, err)
				}
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d examples found in the commands' help", n)
	}
}
