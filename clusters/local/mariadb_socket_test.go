package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A node whose directory is too long for a socket address gets a socket in
// the temporary directory that is its own: two nodes on the same port (the
// standard port, in network namespaces of concurrent runs) get different
// sockets, and a node keeps its socket across restarts.
func TestMariaDBSocketPath(t *testing.T) {
	e := &mariadbEngine{}
	long := "/tmp/" + strings.Repeat("x", 100)
	a := &sqlNode{member: member{dir: filepath.Join(long, "a", "nodes", "n1")}, port: 3306}
	b := &sqlNode{member: member{dir: filepath.Join(long, "b", "nodes", "n1")}, port: 3306}
	pa, pb := e.socketPath(a), e.socketPath(b)
	if pa == pb {
		t.Errorf("two nodes on port 3306 share the socket %s", pa)
	}
	for _, p := range []string{pa, pb} {
		if filepath.Dir(p) != os.TempDir() || len(p) >= 108 {
			t.Errorf("socket %s: want one in %s that fits a socket address", p, os.TempDir())
		}
	}
	if again := e.socketPath(a); again != pa {
		t.Errorf("socket changed from %s to %s", pa, again)
	}
	short := &sqlNode{member: member{dir: "/tmp/s/nodes/n1"}, port: 3306}
	if p := e.socketPath(short); p != "/tmp/s/nodes/n1/mariadb.sock" {
		t.Errorf("short directory: socket %s, want it in the node's directory", p)
	}
}
