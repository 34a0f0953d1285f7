package guards

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/locktest/locktest/impls"
)

// seededTableHeader begins the detection table of docs/seeded-bugs.md, as
// the matrix writes it (reports.RenderSeededMarkdown).
const seededTableHeader = "| seeded impl | recipe | bug |"

// tableCells splits a Markdown table row into its cells, at the pipes
// that are not escaped, without the row's outer pipes; an escaped pipe
// stays in its cell as a pipe.
func tableCells(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimSuffix(strings.TrimPrefix(row, "|"), "|")
	var cells []string
	for _, c := range strings.Split(regexp.MustCompile(`([^\\])\|`).ReplaceAllString(row, "$1\x00"), "\x00") {
		cells = append(cells, strings.ReplaceAll(strings.TrimSpace(c), `\|`, "|"))
	}
	return cells
}

// TestSeededBugsDocMatchesTheZoo: the detection table of
// docs/seeded-bugs.md has one row per seeded impl of the registry
// (impls.SeededNames), each naming the recipe it varies and its bug as the
// registration states them, and no row of an impl the registry does not
// hold as seeded. A bug added, removed or reworded in the zoo fails it
// until the table is measured again.
func TestSeededBugsDocMatchesTheZoo(t *testing.T) {
	doc := readDoc(t, "docs/seeded-bugs.md")
	rows := map[string][]string{}
	in := false
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(line, seededTableHeader):
			if len(rows) > 0 {
				t.Fatalf("docs/seeded-bugs.md has two detection tables (%q): keep one", seededTableHeader)
			}
			in = true
			continue
		case !strings.HasPrefix(line, "|"):
			in = false
			continue
		case !in || strings.HasPrefix(line, "| ---"):
			continue
		}
		cells := tableCells(line)
		name := strings.Trim(cells[0], "`")
		if _, dup := rows[name]; dup {
			t.Errorf("docs/seeded-bugs.md: two rows of %s", name)
		}
		rows[name] = cells
	}
	if len(rows) == 0 {
		t.Fatalf("docs/seeded-bugs.md has no detection table (a table whose header begins %q)", seededTableHeader)
	}
	seeded := impls.SeededNames()
	if len(seeded) < 12 {
		t.Errorf("the zoo has %d seeded impls, fewer than 12: %v", len(seeded), seeded)
	}
	for _, n := range seeded {
		i, _ := impls.Lookup(n)
		cells, ok := rows[n]
		switch {
		case !ok:
			t.Errorf("docs/seeded-bugs.md's table has no row of the seeded impl %s: measure it (locktest matrix --seeded) and add its row", n)
		case len(cells) < 3:
			t.Errorf("docs/seeded-bugs.md: the row of %s has %d cells", n, len(cells))
		case cells[1] != "`"+i.SeededFrom+"`":
			t.Errorf("docs/seeded-bugs.md: %s varies %s in the table, %s in its registration", n, cells[1], i.SeededFrom)
		case cells[2] != i.Seeded:
			t.Errorf("docs/seeded-bugs.md: the bug of %s reads\n\t%q in the table,\n\t%q in its registration", n, cells[2], i.Seeded)
		}
	}
	for n := range rows {
		if !slices.Contains(seeded, n) {
			t.Errorf("docs/seeded-bugs.md's table has a row of %s, which is no seeded impl", n)
		}
	}
}
