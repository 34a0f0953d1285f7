package run

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/locktest/locktest/impls"
)

// TestEveryProviderSaysWhatItLacks: each provider answers for every
// ability run asks about, and gives a reason wherever it lacks one: the
// nemesis reports a fault that needs it unavailable with that reason,
// never with an empty one.
func TestEveryProviderSaysWhatItLacks(t *testing.T) {
	all := []string{AbilityNetwork, AbilityNetem, AbilitySyncRecords}
	for _, c := range []struct {
		p    provider
		lack []string
	}{
		{&localPlatform{netWhy: "the run has no network namespaces", netemWhy: "the run has no network namespaces"}, []string{AbilityNetwork, AbilityNetem}},
		{&localPlatform{}, nil},
		{&dockerPlatform{}, []string{AbilityNetem}},
		{&dockerPlatform{netWhy: "no iptables in the engine's network"}, []string{AbilityNetwork, AbilityNetem}},
		{&sshPlatform{}, []string{AbilityNetem}},
	} {
		ab := c.p.abilities()
		for _, a := range all {
			why, ok := ab[a]
			switch {
			case !ok:
				t.Errorf("%s does not say whether it has %s", c.p.name(), a)
			case slices.Contains(c.lack, a) && why == "":
				t.Errorf("%s lacks %s without a reason", c.p.name(), a)
			case !slices.Contains(c.lack, a) && why != "":
				t.Errorf("%s says it lacks %s (%q)", c.p.name(), a, why)
			}
		}
		if len(ab) != len(all) {
			t.Errorf("%s answers for %d abilities, want %d: %v", c.p.name(), len(ab), len(all), ab)
		}
	}
}

// TestRunBranchesOnNoProvider reads run's own files (not its tests) and
// fails where one compares Config.Provider or a Provider constant, in an
// expression or a switch case: run asks the provider's definition
// (providerDefs), and a provider is added there, not in branches over the
// code. It also checks the definitions: unique names, a setup each, and
// that the help names each.
func TestRunBranchesOnNoProvider(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	isProvider := func(e ast.Expr) bool {
		switch x := e.(type) {
		case *ast.Ident:
			return strings.HasPrefix(x.Name, "Provider") && x.Name != "Providers"
		case *ast.SelectorExpr:
			return x.Sel.Name == "Provider"
		}
		return false
	}
	read := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		read++
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.BinaryExpr:
				if (x.Op == token.EQL || x.Op == token.NEQ) && (isProvider(x.X) || isProvider(x.Y)) {
					t.Errorf("%s: a branch on the provider: ask its providerDef", fset.Position(x.Pos()))
				}
			case *ast.SwitchStmt:
				if x.Tag != nil && isProvider(x.Tag) {
					t.Errorf("%s: a switch on the provider: ask its providerDef", fset.Position(x.Pos()))
				}
			case *ast.CaseClause:
				for _, e := range x.List {
					if isProvider(e) {
						t.Errorf("%s: a case of a provider: ask its providerDef", fset.Position(e.Pos()))
					}
				}
			}
			return true
		})
	}
	if read < 10 {
		t.Fatalf("read %d files of run: is the test in its folder?", read)
	}
	seen := map[string]bool{}
	for _, d := range providerDefs {
		if d.name == "" || seen[d.name] || d.setup == nil || d.doc == "" {
			t.Errorf("provider %q: a name of its own, a doc and a setup are required", d.name)
		}
		seen[d.name] = true
		if !strings.Contains(providersHelp(), d.name+": "+d.doc) {
			t.Errorf("--provider's help does not say where %s's nodes run: %s", d.name, providersHelp())
		}
	}
	if !slices.Equal(Providers, []string{ProviderLocal, ProviderDocker, ProviderSSH}) {
		t.Errorf("Providers = %v", Providers)
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Provider: "vm"}, `--provider must be local, docker or ssh, got "vm"`},
		{Config{Images: map[string]string{"redis": "x"}}, "--image needs --provider docker"},
		{Config{Provider: ProviderDocker, SSH: SSHConfig{Hosts: "a"}}, "need --provider ssh"},
	} {
		if err := c.cfg.validateProvider(impls.Impl{Backend: "redis"}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}
