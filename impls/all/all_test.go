package all

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/impls"
)

// TestEveryImplNamesItsLibraries: every registered impl, seeded or not, names the client
// libraries it is written with, each a module that go.mod requires
// directly, so that a built locktest's build info lists it and a run
// records its version.
func TestEveryImplNamesItsLibraries(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	direct := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && strings.HasPrefix(f[1], "v") && !strings.Contains(line, "// indirect") {
			direct[f[0]] = true
		}
	}
	names := impls.Names()
	if len(names) < 10 {
		t.Fatalf("only %d impls registered: %v", len(names), names)
	}
	for _, name := range append(names, impls.SeededNames()...) {
		i, _ := impls.Lookup(name)
		if len(i.Libraries) == 0 {
			t.Errorf("%s names no client library (impls.Impl.Libraries)", name)
		}
		for _, l := range i.Libraries {
			if !direct[l] {
				t.Errorf("%s names the library %q, which go.mod does not require directly", name, l)
			}
		}
	}
}
