package backend

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// Every registered backend is complete: its data nodes' kind and every
// other node's are registered, with a readiness query and a launch; its
// default layout is made; its servers can be asked their version; and it
// is in All.
func TestEveryServiceIsComplete(t *testing.T) {
	kinds := Kinds()
	all := All()
	if len(all) == 0 {
		t.Fatal("no backend is registered")
	}
	for _, b := range all {
		s, ok := ServiceOf(b)
		if !ok {
			t.Fatalf("%s is in All but not registered", b)
		}
		l, err := NewLayout(b, 0, nil)
		if err != nil {
			t.Errorf("%s: the default layout: %v", b, err)
			continue
		}
		if len(l.Nodes) < s.DefaultNodes {
			t.Errorf("%s: %d nodes, want at least its default %d", b, len(l.Nodes), s.DefaultNodes)
		}
		for _, n := range l.Nodes {
			k, ok := kinds[n.Kind]
			switch {
			case !ok:
				t.Errorf("%s: node %s is of kind %q, which no backend registered", b, n.Name, n.Kind)
			case k.Ready == nil || k.Launch == nil || len(k.Ports) == 0 || k.Program == "" || k.Log == "":
				t.Errorf("%s: kind %s lacks its readiness, launch, ports, program or log", b, k.Name)
			}
		}
		if s.Version == nil {
			t.Errorf("%s: no way to ask its servers their version", b)
		}
		if len(l.Targets(nil)) != 0 {
			t.Errorf("%s: targets out of no nodes", b)
		}
	}
}

// A name or a kind registered twice is refused at start-up.
func TestRegisterRefusesTwice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		s     Service
		kinds []*Kind
	}{
		{"a backend twice", Service{Name: Redis}, nil},
		{"a kind twice", Service{Name: "register-test-only"}, []*Kind{{Name: KindRedis}}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", tc.name)
				}
			}()
			Register(tc.s, tc.kinds...)
		}()
	}
	if _, ok := ServiceOf("register-test-only"); ok {
		t.Error("the refused backend was registered")
	}
}

// The generic files of the package name no backend and no kind of node:
// what is a backend's is written in its own file, which registers it.
// Adding a backend touches none of them.
func TestGenericFilesNameNoBackend(t *testing.T) {
	named := map[string]bool{}
	for _, b := range All() {
		named[b] = true
	}
	for k := range Kinds() {
		named[k] = true
	}
	consts := map[string]bool{"Redis": true, "RedisSentinel": true, "RedisCluster": true, "Etcd": true, "ZooKeeper": true,
		"MySQL": true, "Postgres": true, "KindRedis": true, "KindSentinel": true, "KindEtcd": true, "KindZooKeeper": true,
		"KindMariaDB": true, "KindPostgres": true}
	fset := token.NewFileSet()
	for _, file := range []string{"service.go", "layout.go", "kind.go", "ready.go", "versions.go", "backend.go"} {
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GenDecl:
				// The names' declarations (the constants' block) are no use of them.
				return n.Tok != token.CONST
			case *ast.Field:
				// Nor is a field of that name (Layout.Etcd, the settings of
				// the backends that came before Layout.Params).
				ast.Inspect(n.Type, func(m ast.Node) bool {
					if id, ok := m.(*ast.Ident); ok && consts[id.Name] {
						t.Errorf("%s: %s names %s", fset.Position(id.Pos()), file, id.Name)
					}
					return true
				})
				return false
			case *ast.Ident:
				if consts[n.Name] {
					t.Errorf("%s: %s names %s", fset.Position(n.Pos()), file, n.Name)
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING && named[strings.Trim(n.Value, "`\"")] {
					t.Errorf("%s: %s names %s", fset.Position(n.Pos()), file, n.Value)
				}
			}
			return true
		})
	}
}

// TestServerSessionsOf checks which runs' locks are sessions of one server
// that a crash of its node ends, and that every backend says what its
// locks are.
func TestServerSessionsOf(t *testing.T) {
	for _, tc := range []struct {
		backend string
		nodes   int
		want    bool
	}{
		{MySQL, 1, true},
		{Postgres, 1, true},
		{MySQL, 3, false},
		{ZooKeeper, 1, false}, // sessions outlive a restart
		{Redis, 1, false},
		{Nats, 1, false},
		{"", 0, false}, // a history checked without results.json
	} {
		if got := ServerSessionsOf(tc.backend, tc.nodes); got != tc.want {
			t.Errorf("%s with %d nodes: ServerSessionsOf = %v, want %v", tc.backend, tc.nodes, got, tc.want)
		}
	}
	for _, b := range All() {
		if LocksOf(b) == 0 {
			t.Errorf("%s states no Locks: say whether its locks are leases, client sessions or server sessions", b)
		}
	}
	for b, want := range map[string]LockKind{Redis: Leases, Etcd: Leases, Nats: Leases, ZooKeeper: ClientSessions, Postgres: ServerSessions} {
		if got := LocksOf(b); got != want {
			t.Errorf("LocksOf(%s) = %d, want %d", b, got, want)
		}
	}
}
