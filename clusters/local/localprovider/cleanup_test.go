package localprovider

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cleanup removes the MariaDB sockets that no server answers on — what a
// killed driver's nodes left in the temporary folder — and keeps a socket
// that a server listens on and every other file; --dry-run only lists.
func TestCleanupRemovesStaleSockets(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "locktest-mariadb-00000000000000aa.sock")
	stale := filepath.Join(dir, "locktest-mariadb-00000000000000bb.sock")
	other := filepath.Join(dir, "locktest-mariadb-00000000000000cc.sock")
	l, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dead, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	dead.SetUnlinkOnClose(false) // as a SIGKILLed server leaves it
	dead.Close()
	if err := os.WriteFile(other, []byte("not a socket"), 0o644); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	if err := clearSockets(&out, dir, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "would remove 1 stale sockets: "+stale) {
		t.Errorf("dry run printed %q, want the stale socket listed", out.String())
	}
	if _, err := os.Stat(stale); err != nil {
		t.Errorf("dry run removed the stale socket: %v", err)
	}

	out.Reset()
	if err := clearSockets(&out, dir, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "removed 1 stale sockets: "+stale) {
		t.Errorf("cleanup printed %q, want the stale socket listed", out.String())
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale socket still there: %v", err)
	}
	for _, p := range []string{live, other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
}
