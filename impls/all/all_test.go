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

// TestEveryImplKnowsItsPackage: Register records the package of each
// impl's code, a folder of impls/ that holds the impl's registration, which
// an adapter with pinned libraries imports (impls/golib).
func TestEveryImplKnowsItsPackage(t *testing.T) {
	const mod = "github.com/locktest/locktest/"
	for _, name := range impls.Names() {
		i, _ := impls.Lookup(name)
		dir, ok := strings.CutPrefix(i.Package, mod+"impls/")
		if !ok {
			t.Errorf("%s: Package %q is not a package of impls/", name, i.Package)
			continue
		}
		if _, err := os.Stat(filepath.Join("..", dir)); err != nil {
			t.Errorf("%s: Package %q: %v", name, i.Package, err)
		}
	}
	if i, _ := impls.Lookup("redlock-3"); i.Package != mod+"impls/redlock" {
		t.Errorf("redlock-3's Package is %q, want %simpls/redlock", i.Package, mod)
	}
}
