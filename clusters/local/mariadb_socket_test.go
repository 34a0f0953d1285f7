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
	long := "/tmp/" + strings.Repeat("x", 100)
	a, b := filepath.Join(long, "a", "nodes", "n1"), filepath.Join(long, "b", "nodes", "n1")
	pa, pb := socketPath(a), socketPath(b)
	if pa == pb {
		t.Errorf("two nodes share the socket %s", pa)
	}
	for _, p := range []string{pa, pb} {
		if filepath.Dir(p) != os.TempDir() || len(p) >= 108 || !strings.HasPrefix(filepath.Base(p), "locktest-mariadb-") {
			t.Errorf("socket %s: want a locktest-mariadb-*.sock in %s that fits a socket address", p, os.TempDir())
		}
	}
	if again := socketPath(a); again != pa {
		t.Errorf("socket changed from %s to %s", pa, again)
	}
	if p := socketPath("/tmp/s/nodes/n1"); p != "/tmp/s/nodes/n1/mariadb.sock" {
		t.Errorf("short directory: socket %s, want it in the node's directory", p)
	}
}
