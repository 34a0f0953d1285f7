package backend

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseEtcdParams(t *testing.T) {
	for _, tc := range []struct {
		params map[string]string
		want   EtcdTiming
		err    string // a part of the error; "" for none
	}{
		{nil, DefaultEtcdTiming, ""},
		{map[string]string{EtcdParamTickMs: "10", EtcdParamElectionMs: "100"}, EtcdTiming{10, 100}, ""},
		{map[string]string{EtcdParamElectionMs: "1000"}, EtcdTiming{25, 1000}, ""},
		{map[string]string{"tick": "10"}, EtcdTiming{}, `unknown cluster param "tick" (known: tick-ms, election-ms)`},
		{map[string]string{EtcdParamTickMs: "soon"}, EtcdTiming{}, `tick-ms="soon" must be a positive number of milliseconds`},
		{map[string]string{EtcdParamTickMs: "0"}, EtcdTiming{}, "must be a positive number"},
		{map[string]string{EtcdParamTickMs: "100"}, EtcdTiming{}, "election timeout 250ms must be at least 5 heartbeats of 100ms"},
	} {
		got, err := ParseEtcdParams(tc.params)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("ParseEtcdParams(%v) = %+v, %v; want %+v", tc.params, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseEtcdParams(%v) = %v; want an error saying %q", tc.params, err, tc.err)
		}
	}
	want := []string{"--tick-ms", "25", "--election-ms", "250"}
	if got := DefaultEtcdTiming.NodeArgs(); !slices.Equal(got, want) {
		t.Errorf("NodeArgs = %q, want %q", got, want)
	}
	want = []string{"--heartbeat-interval", "25", "--election-timeout", "250"}
	if got := DefaultEtcdTiming.UpstreamArgs(); !slices.Equal(got, want) {
		t.Errorf("UpstreamArgs = %q, want %q", got, want)
	}
}

func TestRedisPersistence(t *testing.T) {
	for _, tc := range []struct {
		in, mode string
		conf     [][2]string
	}{
		{"", PersistenceOff, [][2]string{{"appendonly", "no"}}},
		{PersistenceOff, PersistenceOff, [][2]string{{"appendonly", "no"}}},
		{PersistenceEverysec, PersistenceEverysec, [][2]string{{"appendonly", "yes"}, {"appendfsync", "everysec"}}},
		{PersistenceAlways, PersistenceAlways, [][2]string{{"appendonly", "yes"}, {"appendfsync", "always"}}},
	} {
		mode, err := CheckPersistence(tc.in)
		if err != nil || mode != tc.mode {
			t.Errorf("CheckPersistence(%q) = %q, %v; want %q", tc.in, mode, err, tc.mode)
		}
		if got := RedisPersistence(mode); !slices.Equal(got, tc.conf) {
			t.Errorf("RedisPersistence(%q) = %q, want %q", mode, got, tc.conf)
		}
	}
	if _, err := CheckPersistence("sometimes"); err == nil || !strings.Contains(err.Error(), `"sometimes" (want off, everysec or always)`) {
		t.Errorf("CheckPersistence(sometimes) = %v", err)
	}
}

func TestClockShimReason(t *testing.T) {
	if got := ClockShimReason("etcd"); !strings.Contains(got, "Go programs") {
		t.Errorf("etcd: %q, want why the shim cannot move a Go program's clock", got)
	}
	for _, b := range []string{"redis", "zookeeper", "mysql", "postgres"} {
		if got := ClockShimReason(b); got != "" {
			t.Errorf("%s: %q, want none", b, got)
		}
	}
}

func TestZooKeeperRoles(t *testing.T) {
	if got := ZooKeeperRoles(1); !slices.Equal(got, []string{"standalone"}) {
		t.Errorf("one peer: %q", got)
	}
	for _, n := range []int{3, 5} {
		if got := ZooKeeperRoles(n); !slices.Equal(got, []string{"leader", "follower"}) {
			t.Errorf("%d peers: %q", n, got)
		}
	}
}

// writtenOnce are string constants that spell a fact of this package's:
// no other code of the module writes them. Each names the fact.
var writtenOnce = map[string]string{
	"standalone":           "ZooKeeper's roles",
	"everysec":             "Redis's persistence modes",
	"appendfsync":          "Redis's persistence directives",
	"appendonly":           "Redis's persistence directives",
	"--tick-ms":            "etcd's timing flags",
	"--election-ms":        "etcd's timing flags",
	"--heartbeat-interval": "etcd's timing flags",
	"--election-timeout":   "etcd's timing flags",
	EtcdParamTickMs:        "etcd's timing params",
	EtcdParamElectionMs:    "etcd's timing params",
	ZooKeeperParamTickTime: "ZooKeeper's tickTime param",
	"--initial-cluster":    "an etcd member's command line (kind.go)",
	"--listen-peer-urls":   "an etcd member's command line (kind.go)",
	"--sentinel":           "a sentinel's command line (kind.go)",
	"myid":                 "a ZooKeeper peer's files (kind.go)",
}

// writtenOnceIn are words that a string constant spelling a fact of this
// package's holds: no other code of the module holds them.
var writtenOnceIn = map[string]string{
	"Go programs":   "which nodes the clock shim cannot move",
	"zookeeper.jar": "a ZooKeeper peer's class path (ZooKeeperClassPath)",
}

// ownFlags are files that may spell one of writtenOnce because it is
// theirs: the etcd member program defines its own flags.
var ownFlags = map[string][]string{
	"clusters/etcdnode/etcdnode.go": {EtcdParamTickMs, EtcdParamElectionMs},
}

// TestFactsAreWrittenOnce reads every Go file of the module but tests
// and this package's, and fails where a string constant spells a fact of
// writtenOnce: the providers ask this package instead.
func TestFactsAreWrittenOnce(t *testing.T) {
	files := eachString(t, "../..", func(rel string, _ int, s string) {
		if strings.HasPrefix(rel, "clusters/backend/") {
			return
		}
		if fact, ok := writtenOnce[s]; ok && !slices.Contains(ownFlags[rel], s) {
			t.Errorf("%s spells %q, one of %s: ask package backend", rel, s, fact)
		}
		for w, fact := range writtenOnceIn {
			if strings.Contains(s, w) {
				t.Errorf("%s spells %q, which says %s: ask package backend", rel, s, fact)
			}
		}
	})
	if files < 100 {
		t.Fatalf("only %d Go files read: is the walk at the module's root?", files)
	}
}

// namesMayAppear are the places outside clusters/backend where a
// backend's name may be written as a string literal, each with why. Test
// files may name any backend: a test names the backend it exercises, its
// subject, and keeps no fact of it that the product reads.
var namesMayAppear = map[string]string{
	"impls/":             "an impl names the backend it runs on (impls.Impl.Backend), as the backend's own code",
	"clusters/natsnode/": `"nats" is the scheme of a NATS route's URL there, the protocol's word, not the backend's name`,
}

// TestBackendNamesStayHome reads every Go file of the module but tests,
// and fails where a string literal spells a backend's name outside the
// file of clusters/backend that registers it (and the places of
// namesMayAppear): a fact about a backend is written in its file, as a
// field of its Service or Kind, and the rest of the module asks the
// registry for it.
func TestBackendNamesStayHome(t *testing.T) {
	home := registeringFiles(t)
	for _, b := range All() {
		if home[b] == "" {
			t.Errorf("no file of clusters/backend registers %s with Register(Service{Name: <constant>, ...})", b)
		}
	}
	files := eachString(t, "../..", func(rel string, line int, s string) {
		for place := range namesMayAppear {
			if rel == place || strings.HasSuffix(place, "/") && strings.HasPrefix(rel, place) {
				return
			}
		}
		if home[s] != "" && rel != home[s] {
			t.Errorf("%s:%d spells %q, the name of a backend: a fact about %s belongs in %s (a field of its Service or Kind), which this code asks (backend.ServiceOf, KindOf, LocksOf, HasPersistence, ...)",
				rel, line, s, s, home[s])
		}
	})
	if files < 100 {
		t.Fatalf("only %d Go files read: is the walk at the module's root?", files)
	}
}

// registeringFiles maps each backend to the file of this package, from
// the module's root, whose Register call names it: Register(Service{Name:
// C, ...}) with C a string constant of the package.
func registeringFiles(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	consts := map[string]string{}
	calls := map[string][]string{} // file → the constants its Register calls name
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		rel := "clusters/backend/" + p
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if i < len(n.Values) {
						if lit, ok := n.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[name.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			case *ast.CallExpr:
				if fn, ok := n.Fun.(*ast.Ident); !ok || fn.Name != "Register" || len(n.Args) == 0 {
					return true
				}
				lit, ok := n.Args[0].(*ast.CompositeLit)
				if !ok {
					return true
				}
				for _, e := range lit.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Name" {
							if v, ok := kv.Value.(*ast.Ident); ok {
								calls[rel] = append(calls[rel], v.Name)
							}
						}
					}
				}
			}
			return true
		})
	}
	home := map[string]string{}
	for file, cs := range calls {
		for _, c := range cs {
			if v, ok := consts[c]; ok {
				home[v] = file
			}
		}
	}
	return home
}

// TestImplsLeaveNodeCountsToTheirBackend reads the lock recipes (impls/,
// but tests) and fails where an impl spells its node count as a number or
// as its backend's default: impls.Register gives an impl that leaves Nodes
// out its backend's size (DefaultNodes), the one place that count is
// written. An impl that runs on a cluster of another size (Redlock's
// independent masters) gives its own count from a variable or setting,
// never a literal.
func TestImplsLeaveNodeCountsToTheirBackend(t *testing.T) {
	files := eachGoFile(t, "../../impls", func(rel string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			kv, ok := n.(*ast.KeyValueExpr)
			if !ok {
				return true
			}
			if key, ok := kv.Key.(*ast.Ident); !ok || key.Name != "Nodes" {
				return true
			}
			switch v := kv.Value.(type) {
			case *ast.BasicLit:
				t.Errorf("impls/%s:%d: Nodes: %s: leave it out (impls.Register takes the backend's DefaultNodes), or give a cluster of another size from a setting", rel, fset.Position(v.Pos()).Line, v.Value)
			case *ast.CallExpr:
				if sel, ok := v.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "DefaultNodes" {
					t.Errorf("impls/%s:%d: Nodes: backend.DefaultNodes(...): leave it out, impls.Register gives it", rel, fset.Position(v.Pos()).Line)
				}
			}
			return true
		})
	})
	if files < 10 {
		t.Fatalf("only %d Go files read under impls/: is the walk at the right place?", files)
	}
}

// eachString hands fn every string literal, unquoted, of every Go file
// below dir but tests (eachGoFile), with its file and line; it returns
// how many files it read.
func eachString(t *testing.T, dir string, fn func(rel string, line int, s string)) int {
	t.Helper()
	return eachGoFile(t, dir, func(rel string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					fn(rel, fset.Position(lit.Pos()).Line, s)
				}
			}
			return true
		})
	})
}

// eachGoFile parses every Go file below dir but tests (and but those in
// testdata and hidden folders) and hands each to fn with its path
// relative to dir, in slashes; it returns how many it read.
func eachGoFile(t *testing.T, dir string, fn func(rel string, fset *token.FileSet, f *ast.File)) int {
	t.Helper()
	root, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		fn(filepath.ToSlash(rel), fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
