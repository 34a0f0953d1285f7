package guards

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/provider"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/nemesis"

	_ "github.com/locktest/locktest/clusters/all"
	_ "github.com/locktest/locktest/impls/all"
)

// moduleRoot is the module's root, seen from this package's folder, where
// go test runs its tests.
const moduleRoot = ".."

// The recipes of docs/architecture.md ("How to add …") say which files
// each extension point takes. TestRecipesMatchTheTree holds every
// registered backend, fault, provider and impl to its recipe's files, as
// the tree is now: a unit whose facts sit elsewhere, or a recipe that
// names files the tree does not have, fails it.

// goFiles returns the module's non-test Go files under dir (relative to
// the module's root, with slashes), each with its string literals.
func goFiles(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(filepath.Join(moduleRoot, dir), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(moduleRoot, path)
		rel = filepath.ToSlash(rel)
		out[rel] = []string{}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					out[rel] = append(out[rel], s)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// spelling returns the files of files that spell s as a string literal.
func spelling(files map[string][]string, s string) []string {
	var out []string
	for f, lits := range files {
		if slices.Contains(lits, s) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRecipesMatchTheTree(t *testing.T) {
	arch := readDoc(t, "docs/architecture.md")
	backends := readDoc(t, "docs/backends.md")
	faults := readDoc(t, "docs/faults.md")
	providers := readDoc(t, "docs/providers.md")

	t.Run("backends", func(t *testing.T) {
		// A backend: its file in clusters/backend (TestBackendNamesStayHome
		// finds the one that registers it), an impl in impls/, and its
		// section in docs/backends.md.
		implDirs := map[string][]string{}
		for _, name := range impls.Names() {
			i, _ := impls.Lookup(name)
			implDirs[i.Backend] = append(implDirs[i.Backend], name)
		}
		for _, b := range backend.All() {
			if len(implDirs[b]) == 0 {
				t.Errorf("backend %s has no impl: its recipe adds at least one in impls/", b)
			}
			if !strings.Contains(backends, "`"+b+"`") {
				t.Errorf("backend %s is not named in docs/backends.md", b)
			}
		}
	})

	t.Run("faults", func(t *testing.T) {
		// A fault: one file nemesis/<fault>.go that spells its name, and
		// its row in docs/faults.md.
		files := goFiles(t, "nemesis")
		for _, f := range nemesis.Names() {
			want := "nemesis/" + strings.ReplaceAll(f, "-", "_") + ".go"
			if got := spelling(files, f); !slices.Contains(got, want) {
				t.Errorf("fault %s: want it registered in %s, its name is spelt in %v", f, want, got)
			}
			if !strings.Contains(faults, "`"+f+"`") {
				t.Errorf("fault %s is not named in docs/faults.md", f)
			}
		}
	})

	t.Run("providers", func(t *testing.T) {
		// A provider: a folder under clusters with its provider.go, one
		// import line in clusters/all, and docs/providers.md.
		all := readDoc(t, "clusters/all/all.go")
		imported := 0
		for _, line := range strings.Split(all, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), `_ "`) {
				imported++
			}
		}
		names := provider.Names()
		if imported != len(names) {
			t.Errorf("clusters/all imports %d packages for %d providers (%v): one import line a provider", imported, len(names), names)
		}
		for _, p := range names {
			dir := "clusters/" + p
			st, err := os.Stat(filepath.Join(moduleRoot, dir))
			if err != nil || !st.IsDir() {
				t.Errorf("provider %s has no folder %s", p, dir)
				continue
			}
			var regs []string
			for f, lits := range goFiles(t, dir) {
				if strings.HasSuffix(f, "/provider.go") && slices.Contains(lits, p) {
					regs = append(regs, f)
				}
			}
			if len(regs) != 1 {
				t.Errorf("provider %s: want one provider.go under %s that registers it, found %v", p, dir, regs)
			} else if pkg := filepath.Dir(regs[0]); !strings.Contains(all, "/"+pkg+`"`) {
				t.Errorf("provider %s registers in %s, which clusters/all does not import", p, pkg)
			}
			if !strings.Contains(providers, "`"+p+"`") {
				t.Errorf("provider %s is not named in docs/providers.md", p)
			}
		}
	})

	t.Run("impls", func(t *testing.T) {
		// An impl: a file under impls/ that registers it, and its place in
		// docs/backends.md.
		files := goFiles(t, "impls")
		for _, name := range impls.Names() {
			if i, _ := impls.Lookup(name); i.Nodes < 1 {
				t.Errorf("impl %s has %d nodes: impls.Register gives an impl that leaves Nodes out its backend's size", name, i.Nodes)
			}
			if !strings.Contains(backends, name) {
				t.Errorf("impl %s is not named in docs/backends.md", name)
			}
		}
		if len(files) == 0 {
			t.Fatal("no Go files under impls/")
		}
	})

	t.Run("seeded bugs", func(t *testing.T) {
		// A seeded bug: one file impls/seeded/<bug>.go, the impl's name
		// without its "seeded-", that registers it, and its row in
		// docs/seeded-bugs.md (TestSeededBugsDocMatchesTheZoo).
		files := goFiles(t, "impls/seeded")
		for _, name := range impls.SeededNames() {
			want := "impls/seeded/" + strings.ReplaceAll(strings.TrimPrefix(name, "seeded-"), "-", "_") + ".go"
			if got := spelling(files, name); !slices.Equal(got, []string{want}) {
				t.Errorf("seeded impl %s: want it registered in %s alone, its name is spelt in %v", name, want, got)
			}
			if i, _ := impls.Lookup(name); i.Nodes < 1 || i.SeededFrom == "" {
				t.Errorf("seeded impl %s: %d nodes, recipe %q", name, i.Nodes, i.SeededFrom)
			}
		}
	})

	t.Run("the recipes name real places", func(t *testing.T) {
		// The table's fixed paths must exist.
		for _, p := range []string{"clusters/backend", "impls/all", "impls/seeded", "docs/seeded-bugs.md", "scripts/setup", "clusters/nodeprog", "clusters/all/all.go", "nemesis", "checker/testdata", "docs/faults.md", "docs/providers.md", "docs/backends.md", "docs/checkers.md", "cmd/locktest/main.go"} {
			if !strings.Contains(arch, p) {
				t.Errorf("docs/architecture.md's recipes no longer name %s: update this test with the recipe", p)
			}
			if _, err := os.Stat(filepath.Join(moduleRoot, p)); err != nil {
				t.Errorf("the recipes name %s, which the tree lacks", p)
			}
		}
	})
}
