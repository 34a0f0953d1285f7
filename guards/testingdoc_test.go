package guards

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTestingDocMatchesTheLayout fails when docs/testing.md's tables and
// the Makefile disagree: every test target of the Makefile (test and
// test-*) is in the doc's table of commands and the doc names no other,
// and every package under e2e/ with tests is in the doc's table of
// packages.
func TestTestingDocMatchesTheLayout(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "testing.md"))
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(test(-[a-z]+)?):`).FindAllStringSubmatch(string(mk), -1) {
		targets[m[1]] = true
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `make (test(-[a-z]+)?)` \\|").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	if len(targets) < 5 {
		t.Fatalf("the Makefile has test targets %v, want test and its parts", targets)
	}
	for tg := range targets {
		if !documented[tg] {
			t.Errorf("docs/testing.md's table lacks `make %s`", tg)
		}
	}
	for tg := range documented {
		if !targets[tg] {
			t.Errorf("docs/testing.md names `make %s`, which the Makefile lacks", tg)
		}
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{len .TestGoFiles}} {{len .XTestGoFiles}}", "github.com/locktest/locktest/e2e/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := 0
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || (f[1] == "0" && f[2] == "0") {
			continue
		}
		pkg := strings.TrimPrefix(f[0], "github.com/locktest/locktest/")
		seen++
		if !strings.Contains(string(doc), "| `"+pkg+"` |") {
			t.Errorf("docs/testing.md's table of packages lacks `%s`", pkg)
		}
	}
	if seen < 5 {
		t.Errorf("only %d test packages under e2e/", seen)
	}
}
