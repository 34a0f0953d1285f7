package sshlab

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOptionsCheck: a lab of too few or too many hosts, without a folder,
// or in a folder that holds a lab already is refused before anything is
// built, naming the flag of `locktest lab up`.
func TestOptionsCheck(t *testing.T) {
	dir, up := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(up, Inventory), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Hosts: 5, Dir: dir}, ""},
		{Options{Hosts: 100, Dir: filepath.Join(dir, "new")}, ""},
		{Options{Hosts: 4, Dir: dir}, "--count 4: want 5 to 100"},
		{Options{Hosts: 101, Dir: dir}, "--count 101: want 5 to 100"},
		{Options{Hosts: 5}, "--dir: no folder for the inventory"},
		{Options{Hosts: 5, Dir: up}, "--dir " + up + " holds a lab's lab.yaml already: `locktest lab down --dir " + up + "` first"},
	} {
		got := ""
		if err := c.o.Check(); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%+v: %q, want %q", c.o, got, c.want)
		}
	}
}
