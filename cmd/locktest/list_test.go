package main

import (
	"strings"
	"testing"

	"github.com/locktest/locktest/impls"
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
