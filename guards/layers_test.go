package guards

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// layers ranks locktest's packages from the bottom (history) to the top
// (the CLI): a package may import only packages of a lower or equal rank,
// as docs/architecture.md draws the pipeline. The internal packages are
// leaves any layer may use, and import nothing of the module but each
// other. testkit holds the test rigs (a test cluster, the test binary's
// programs, the ssh lab, generated histories), which tests of every layer
// use and which use every layer: no package but a test rig
// imports one. e2e holds the end-to-end tests, which drive the run as the
// CLI does.
var layers = map[string]int{
	"history":   0,
	"checker":   1,
	"runstore":  2,
	"reports":   3,
	"clusters":  4,
	"nemesis":   4,
	"workloads": 4,
	"impls":     4,
	"run":       5,
	"shrink":    6, // the search over schedules, and its runner, which replays candidates with run.Run
	"margin":    6, // the search over a fault's size, and its runner, which runs trials with run.Run
	"scenarios": 6,
	"matrix":    6,
	"cmd":       7,
	"clients":   7, // programs, as cmd: the reference adapter
	"e2e":       7, // the end-to-end tests and their kit, above the run
	"guards":    7, // the tests that guard the whole module: no code of its own
	"testkit":   8, // test rigs: imported by tests and other rigs only
	"internal":  -1,
}

// forbidden are imports between packages of one rank (or going down) that
// the design still rules out, by path prefix: the lock recipes know no
// provider, a provider builds on no other provider, the Docker engine's
// packages build on no provider (and the docker provider not on the SSH
// lab), and only the CLI chooses the drivers (impls/all) and the
// providers.
var forbidden = []struct{ from, to, why string }{
	{"impls", "clusters", "lock clients know nodes as impls.Node, not a provider's type"},
	{"clusters/docker", "clusters/local", providerWhy},
	{"clusters/docker", "clusters/ssh", providerWhy},
	{"clusters/local", "clusters/docker", providerWhy},
	{"clusters/local", "clusters/ssh", providerWhy},
	{"clusters/ssh", "clusters/local", providerWhy},
	{"clusters/ssh", "clusters/docker", providerWhy},
	{"clusters/engine", "clusters/local", engineWhy},
	{"clusters/engine", "clusters/docker", engineWhy},
	{"clusters/engine", "clusters/ssh", engineWhy},
	{"clusters/images", "clusters/local", engineWhy},
	{"clusters/images", "clusters/docker", engineWhy},
	{"clusters/images", "clusters/ssh", engineWhy},
	{"clusters/sshlab", "clusters/local", engineWhy},
	{"clusters/sshlab", "clusters/docker", engineWhy},
	{"clusters/sshlab", "clusters/ssh", engineWhy},
	{"clusters/docker", "clusters/sshlab", "the docker provider runs no SSH lab: the lab is the ssh provider's test bed, beside the provider"},
	{"matrix", "clusters", "the matrix reaches clusters only through run, so --provider holds"},
	{"scenarios", "clusters", "scenarios reach clusters only through run"},
	{"margin", "clusters", "a margin search reaches clusters only through run"},
	{"shrink", "clusters", "the shrinker reaches clusters only through run"},
}

// backendFacts is the one package under clusters that the layers kept
// away from clusters (the lock clients, the margin search, the shrinker,
// the matrix and the scenarios) may import: the backends' registry, whose
// facts (a backend's name, its default size, what its locks are) are no
// provider's.
const backendFacts = "clusters/backend"

// providerWhy is the rule between providers: what two of them share (the
// clock shim, the durable-data code, the embedded etcd node) lives in
// clusters, beside them.
const providerWhy = "a provider builds on no other provider (shared code lives in clusters)"

// engineWhy is the rule of what sits beside the providers on the Docker
// engine: the engine's connection (clusters/engine), the image builder
// (clusters/images) and the SSH lab (clusters/sshlab) are built on by
// providers and tests, and build on none.
const engineWhy = "the Docker engine's packages (engine, images, sshlab) import no provider: the providers build on them"

// rank returns the layer of a package path inside the module.
func rank(pkg string) (int, bool) {
	top, _, _ := strings.Cut(pkg, "/")
	r, ok := layers[top]
	return r, ok
}

// TestImportsPointOneWay fails when a package imports one of a higher
// layer, breaks a rule of forbidden, or, outside the CLI, imports
// impls/all (library code must not pick the drivers). Test files are not
// counted: a test may start what it needs.
func TestImportsPointOneWay(t *testing.T) {
	const mod = "github.com/locktest/locktest/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		from := strings.TrimPrefix(fields[0], mod)
		fr, ok := rank(from)
		if !ok {
			t.Errorf("package %s has no layer: add it to layers", from)
			continue
		}
		for _, imp := range fields[1:] {
			to, ours := strings.CutPrefix(imp, mod)
			if !ours {
				continue
			}
			checked++
			tr, ok := rank(to)
			if !ok {
				t.Errorf("package %s has no layer: add it to layers", to)
				continue
			}
			if fr < 0 && tr >= 0 {
				t.Errorf("%s imports %s: an internal package is a leaf, which imports nothing of the module above it (a test rig goes in testkit)", from, to)
			}
			if tr == layers["testkit"] && !under(from, "testkit") {
				t.Errorf("%s imports %s: only tests and other rigs use a test rig", from, to)
			} else if fr >= 0 && tr > fr {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports point down, from cmd to history", from, fr, to, tr)
			}
			if to == "impls/all" && !strings.HasPrefix(from, "cmd/") && !strings.HasPrefix(from, "clients/") {
				t.Errorf("%s imports impls/all: only the programs (the CLI, the reference adapter) pick the drivers", from)
			}
			for _, f := range forbidden {
				if under(from, f.from) && under(to, f.to) && !under(to, f.from) && to != backendFacts {
					t.Errorf("%s imports %s: %s", from, to, f.why)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d imports of the module's own packages seen: is go list working?", checked)
	}
}

// under reports whether pkg is dir or inside it.
func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// TestArchitectureDrawsTheProvidersImports reads the drawing of
// docs/architecture.md's "How the providers import" (the fenced block
// after its marker) and fails where an arrow it draws is not in the code,
// or one in the code is not drawn: the imports into clusters/... of each
// package under clusters and of run, internal leaves left out.
func TestArchitectureDrawsTheProvidersImports(t *testing.T) {
	const mod = "github.com/locktest/locktest/"
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- imports: the drawing below is checked against the code -->")
	if !ok {
		t.Fatal("docs/architecture.md has no drawing of the providers' imports")
	}
	_, rest, _ = strings.Cut(rest, "```text\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("the drawing's block does not end")
	}
	drawn := map[string][]string{}
	var from []string
	for _, line := range strings.Split(block, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		left, right, arrow := strings.Cut(line, "→")
		if arrow {
			from = nil
			for _, f := range strings.Split(left, ",") {
				from = append(from, strings.TrimSpace(f))
			}
		} else {
			right = line // a continuation of the line above
		}
		for _, f := range from {
			if _, ok := drawn[f]; !ok {
				drawn[f] = []string{}
			}
			if strings.Contains(right, "(nothing of clusters)") {
				continue
			}
			for _, to := range strings.Split(right, ",") {
				if to = strings.TrimSpace(to); to != "" {
					drawn[f] = append(drawn[f], to)
				}
			}
		}
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, mod+"clusters/...", mod+"run").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	real := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], mod)
		if pkg == "clusters" {
			continue // the interfaces: they import nothing of the module
		}
		real[pkg] = []string{}
		for _, imp := range fields[1:] {
			if to, ours := strings.CutPrefix(imp, mod); ours && (to == "clusters" || strings.HasPrefix(to, "clusters/")) {
				real[pkg] = append(real[pkg], to)
			}
		}
	}
	for pkg, imps := range real {
		got, ok := drawn[pkg]
		if !ok {
			t.Errorf("the drawing leaves out %s (it imports %v)", pkg, imps)
			continue
		}
		slices.Sort(got)
		slices.Sort(imps)
		if !slices.Equal(got, imps) {
			t.Errorf("the drawing has %s → %v; the code has %s → %v", pkg, got, pkg, imps)
		}
	}
	for pkg := range drawn {
		if _, ok := real[pkg]; !ok {
			t.Errorf("the drawing has %s, which is not a package under clusters or run", pkg)
		}
	}
}
