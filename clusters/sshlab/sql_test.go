package sshlab

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/locktest/locktest/clusters/images"
)

// The lab's image takes this host's MariaDB and PostgreSQL with what
// their set-up runs (the install script's helpers, initdb, the bootstrap
// files, a postgres user), and leaves out the JIT and the manual.
func TestSSHLabSQLParts(t *testing.T) {
	r := &images.Rootfs{}
	r.AddFile("/etc/passwd", []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644)
	r.AddFile("/etc/group", []byte("root:x:0:\n"), 0o644)
	added, err := addLabSQL(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if len(added) == 0 {
		t.Skip("this host has neither MariaDB nor PostgreSQL (make setup)")
	}
	var want []string
	if slices.Contains(added, "mariadb") {
		want = append(want, images.LookProgram("mariadbd", "/usr/sbin/mariadbd"), images.LookProgram("mariadb-install-db", ""),
			images.LookProgram("my_print_defaults", ""), "/usr/share/mysql/mysql_system_tables.sql", "/usr/share/mysql/english/errmsg.sys")
	}
	if slices.Contains(added, "postgres") {
		bin, _ := images.HighestPostgres()
		home := filepath.Dir(filepath.Dir(bin))
		want = append(want, filepath.Join(home, "bin", "postgres"), filepath.Join(home, "bin", "initdb"), filepath.Join(home, "lib", "plpgsql.so"))
		share := filepath.Join("/usr/share/postgresql", filepath.Base(home))
		want = append(want, filepath.Join(share, "postgres.bki"))
		for _, p := range []string{filepath.Join(home, "lib", "llvmjit.so"), filepath.Join(home, "lib", "bitcode"), filepath.Join(share, "man")} {
			if r.Has(p) {
				t.Errorf("the image has %s, which a server of the lab does not need", p)
			}
		}
		if data, ok := r.Content("/etc/passwd"); !ok || !strings.Contains(string(data), "\npostgres:x:") || !strings.HasPrefix(string(data), "root:") {
			t.Errorf("/etc/passwd lacks the postgres user after root's line")
		}
	}
	for _, tool := range labSQLTools {
		want = append(want, images.LookProgram(tool, ""))
	}
	for _, p := range want {
		if p == "" || !r.Has(p) {
			t.Errorf("the image lacks %q", p)
		}
	}
}
