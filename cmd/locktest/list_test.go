package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/matrix"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit/schemacheck"
)

// TestListLeavesTheZooOut: `locktest list` names no seeded impl, and
// `locktest list --seeded` names every one with its recipe and its bug.
func TestListLeavesTheZooOut(t *testing.T) {
	seeded := impls.SeededNames()
	if len(seeded) == 0 {
		t.Fatal("no seeded impl registered")
	}
	stdout, stderr, code := locktest(t, "list")
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, stderr)
	}
	for _, n := range seeded {
		if strings.Contains(stdout, n) {
			t.Errorf("list names the seeded impl %s", n)
		}
	}
	stdout, stderr, code = locktest(t, "list", "--seeded")
	if code != 0 {
		t.Fatalf("list --seeded: exit %d: %s", code, stderr)
	}
	for _, n := range seeded {
		i, _ := impls.Lookup(n)
		if !strings.Contains(stdout, "  "+n+" ") || !strings.Contains(stdout, "a variant of "+i.SeededFrom+". Bug: "+i.Seeded+".") {
			t.Errorf("list --seeded lacks %s with its recipe and bug:\n%s", n, stdout)
		}
	}
	for _, n := range impls.Names() {
		if strings.Contains(stdout, "  "+n+" ") {
			t.Errorf("list --seeded names the impl %s, which is not seeded", n)
		}
	}
}

// TestListJSON: `locktest list --json` writes every impl, seeded impl,
// fault, matrix class and resource mode, in the form its schema states;
// each class names only faults of the registry.
func TestListJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "list.json")
	if _, stderr, code := locktest(t, "list", "--json", path); code != 0 {
		t.Fatalf("list --json: exit %d: %s", code, stderr)
	}
	if err := schemacheck.ValidateFile("list", path); err != nil {
		t.Fatal(err)
	}
	var l listing
	if err := runstore.ReadJSON(path, &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Impls) != len(impls.Names()) || len(l.Seeded) != len(impls.SeededNames()) || len(l.Faults) != len(nemesis.Names()) || len(l.Classes) != len(matrix.Classes) {
		t.Errorf("list.json has %d impls, %d seeded, %d faults, %d classes; want %d, %d, %d, %d", len(l.Impls), len(l.Seeded), len(l.Faults), len(l.Classes),
			len(impls.Names()), len(impls.SeededNames()), len(nemesis.Names()), len(matrix.Classes))
	}
	for _, c := range l.Classes {
		for _, f := range c.Faults {
			if _, ok := nemesis.Lookup(f); !ok {
				t.Errorf("class %s names %q, which is no fault", c.Name, f)
			}
		}
		if c.Name != "none" && len(c.Faults) == 0 {
			t.Errorf("class %s names no fault", c.Name)
		}
	}
}
