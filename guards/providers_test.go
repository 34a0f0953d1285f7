package guards

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

	"github.com/locktest/locktest/clusters/provider"
	"github.com/locktest/locktest/run"
)

// registration is the one package that names every provider, by
// importing each (clusters/all).
const registration = "clusters/all"

// providerExceptions are the files outside the providers' folders that
// still name a provider, each with why. A file here is a debt, not a
// design: the list only shrinks.
var providerExceptions = map[string]string{
	// Stored runs from before results.json named the provider are told
	// apart by their network; reports sit below the registry.
	"reports/html.go": "describes a stored run's nodes by its provider's name (ClusterText)",
}

// TestNoCodeBranchesOnAProvider reads every package of the module (not
// its tests, nor the test rigs of testkit/, which start a provider's
// cluster directly) and fails where code outside a provider's folder
// imports a provider's package, or compares a value with a provider's
// name or a Config's Provider with a string, in an expression or a
// switch case: such code asks the registry (clusters/provider) for what
// the provider declares (its settings, whether its hosts take one run at
// a time, its cleanup, its flags for a repro), and a provider is added
// as one folder and one import in clusters/all, not as branches over the
// code. It reads the providers' folders from clusters/all's imports.
func TestNoCodeBranchesOnAProvider(t *testing.T) {
	const mod = "github.com/locktest/locktest/"
	fset := token.NewFileSet()
	all, err := parser.ParseFile(fset, filepath.Join(repoRoot, registration, "all.go"), nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var folders []string
	for _, imp := range all.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		rest, ok := strings.CutPrefix(p, mod+"clusters/")
		if !ok {
			t.Fatalf("%s imports %s, not a provider's folder under clusters", registration, p)
		}
		top, _, _ := strings.Cut(rest, "/")
		folders = append(folders, "clusters/"+top)
	}
	if len(folders) != len(provider.All()) || len(run.Providers) != len(folders) {
		t.Fatalf("%s imports %d providers' folders (%v), the registry holds %v", registration, len(folders), folders, run.Providers)
	}
	names := run.Providers
	isName := func(e ast.Expr) bool {
		l, ok := e.(*ast.BasicLit)
		if !ok || l.Kind != token.STRING {
			return false
		}
		s, _ := strconv.Unquote(l.Value)
		return slices.Contains(names, s)
	}
	isProviderField := func(e ast.Expr) bool {
		s, ok := e.(*ast.SelectorExpr)
		return ok && s.Sel.Name == "Provider"
	}
	// A constant named for one provider (ProviderSSH), as run had them.
	isProviderConst := func(e ast.Expr) bool {
		var name string
		switch x := e.(type) {
		case *ast.Ident:
			name = x.Name
		case *ast.SelectorExpr:
			name = x.Sel.Name
		}
		rest, ok := strings.CutPrefix(name, "Provider")
		return ok && rest != "" && rest != "s" && rest != "Settings" && strings.ToUpper(rest[:1]) == rest[:1]
	}
	isEmpty := func(e ast.Expr) bool {
		l, ok := e.(*ast.BasicLit)
		return ok && l.Value == `""`
	}
	inside := func(rel string, dirs ...string) bool {
		return slices.ContainsFunc(dirs, func(d string) bool { return under(rel, d) })
	}
	read, excused := 0, map[string]bool{}
	err = filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" || rel == "testkit" || inside(rel, folders...) || rel == registration {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		read++
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		var found []string
		for _, imp := range file.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if to, ok := strings.CutPrefix(p, mod); ok && inside(to, folders...) {
				found = append(found, fset.Position(imp.Pos()).String()+": imports "+to+": ask the registry (clusters/provider); only "+registration+" imports a provider")
			}
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.BinaryExpr:
				if x.Op != token.EQL && x.Op != token.NEQ {
					break
				}
				if isName(x.X) || isName(x.Y) || isProviderConst(x.X) || isProviderConst(x.Y) ||
					(isProviderField(x.X) && !isEmpty(x.Y)) || (isProviderField(x.Y) && !isEmpty(x.X)) {
					found = append(found, fset.Position(x.Pos()).String()+": a branch on a provider's name: ask the registry")
				}
			case *ast.SwitchStmt:
				if x.Tag != nil && isProviderField(x.Tag) {
					found = append(found, fset.Position(x.Pos()).String()+": a switch on the provider: ask the registry")
				}
			case *ast.CaseClause:
				for _, e := range x.List {
					if isName(e) || isProviderConst(e) {
						found = append(found, fset.Position(e.Pos()).String()+": a case of a provider's name: ask the registry")
					}
				}
			}
			return true
		})
		if _, ok := providerExceptions[rel]; ok {
			excused[rel] = len(found) > 0
			return nil
		}
		for _, f := range found {
			t.Error(f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if read < 200 {
		t.Fatalf("read %d files of the module: is repoRoot right?", read)
	}
	for f, why := range providerExceptions {
		if !excused[f] {
			t.Errorf("%s is excused (%s) but names no provider: take it off providerExceptions", f, why)
		}
	}
}
