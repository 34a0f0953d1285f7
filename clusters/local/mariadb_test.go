package local

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locktest/locktest/testkit/gate"
)

// sqlBackend is one SQL server under test, on the generic cluster: its
// backend, and how to talk to it.
type sqlBackend struct {
	name    string
	logName string
	// exec runs statements, one by one, on a fresh connection.
	exec func(ctx context.Context, addr string, stmts ...string) error
	// count returns SELECT count(*) FROM t.
	count func(ctx context.Context, addr string) (int, error)
}

var mariadbBackend = sqlBackend{
	name: "mysql", logName: "mariadb.log",
	exec: func(ctx context.Context, addr string, stmts ...string) error {
		db := mysqlDB(addr)
		defer db.Close()
		for _, s := range stmts {
			if _, err := db.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	},
	count: func(ctx context.Context, addr string) (int, error) {
		db := mysqlDB(addr)
		defer db.Close()
		var n int
		err := db.QueryRowContext(ctx, "SELECT count(*) FROM locktest_t.t").Scan(&n)
		return n, err
	},
}

// mariadbSchema creates the table the MariaDB tests count rows of.
var mariadbSchema = []string{"CREATE DATABASE locktest_t", "CREATE TABLE locktest_t.t (id INT PRIMARY KEY)", "INSERT INTO locktest_t.t VALUES (1), (2)"}

func mysqlDB(addr string) *sql.DB {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", addr
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = time.Second, 2*time.Second, 2*time.Second
	c, _ := mysql.NewConnector(cfg)
	return sql.OpenDB(c)
}

// startSQL starts b in a fresh directory and stops it when the test ends.
func startSQL(t *testing.T, b sqlBackend) *Processes {
	t.Helper()
	c, err := NewProcesses(b.name, Options{Dir: t.TempDir()})
	if err != nil {
		t.Skipf("%v (make setup)", err)
	}
	return started(t, c, nil, 90*time.Second)
}

// groupGone reports whether no process of the process group pgid is left.
func groupGone(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// testSQLLifecycle starts a server, writes rows, pauses and resumes it,
// kills and restarts it (the rows survive, on the same address), collects
// its log and stops it, leaving no process.
func testSQLLifecycle(t *testing.T, b sqlBackend, schema []string) {
	c := startSQL(t, b)
	ns := c.Nodes()
	if len(ns) != 1 || ns[0].Name != "n1" || ns[0].Addr == "" || filepath.Base(ns[0].LogPath) != b.logName {
		t.Fatalf("Nodes() = %+v", ns)
	}
	n := ns[0]
	ctx := context.Background()
	// Each step that asks the server gets its budget of its own: under
	// stress-ng at -p 3 a pause and a resume took seconds, and one 10 s
	// budget for every query ran out on the count after the resume.
	qctx := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 20*time.Second)
		t.Cleanup(cancel)
		return c
	}
	if err := b.exec(qctx(), n.Addr, schema...); err != nil {
		t.Fatal(err)
	}
	if got, err := b.count(qctx(), n.Addr); err != nil || got != 2 {
		t.Fatalf("count = %d, %v; want 2", got, err)
	}

	if err := c.Pause(ctx, n); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := b.count(pctx, n.Addr)
	pcancel()
	if err == nil {
		t.Errorf("a paused server answered")
	}
	if err := c.Resume(ctx, n); err != nil {
		t.Fatal(err)
	}
	if got, err := b.count(qctx(), n.Addr); err != nil || got != 2 {
		t.Fatalf("after resume: count = %d, %v; want 2", got, err)
	}

	pid := c.Pids()["n1"]
	if pid == 0 {
		t.Fatal("no pid while running")
	}
	kids := descendants(pid)
	if err := c.Kill(ctx, n); err != nil {
		t.Fatal(err)
	}
	// The killed group's members are gone once reaped; init (pid 1) reaps
	// the reparented ones in its own time, slowly on some machines.
	for deadline := time.Now().Add(10 * time.Second); !(procGone(pid) && groupGone(pid)) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if !procGone(pid) || !groupGone(pid) || c.Pids()["n1"] != 0 {
		t.Fatalf("pid %d (or its group) still there 10s after Kill", pid)
	}
	for _, k := range kids {
		if pidAlive(k) {
			t.Errorf("child %d of the killed server still runs", k)
		}
	}
	if err := c.Restart(ctx, n); err != nil {
		t.Fatal(err)
	}
	if got := c.Nodes()[0].Addr; got != n.Addr {
		t.Errorf("restarted on %s, was %s", got, n.Addr)
	}
	if got, err := b.count(qctx(), n.Addr); err != nil || got != 2 {
		t.Fatalf("after restart: count = %d, %v; want the 2 rows written before the kill", got, err)
	}

	logs := t.TempDir()
	if err := c.CollectLogs(logs); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(logs, "n1.log")); err != nil || fi.Size() == 0 {
		t.Errorf("collected log: %v", err)
	}
	pid = c.Pids()["n1"]
	kids = descendants(pid)
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if !procGone(pid) || !groupGone(pid) || c.Pids()["n1"] != 0 {
		t.Errorf("pid %d (or its group) still there after Stop", pid)
	}
	for _, k := range kids {
		if pidAlive(k) {
			t.Errorf("child %d of the stopped server still runs", k)
		}
	}
	if err := c.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// testSQLStartFailures checks that each way a start can fail gives one
// line naming the node and its log, and leaves no process.
func testSQLStartFailures(t *testing.T, b sqlBackend, badData func(t *testing.T, dataDir string)) {
	gate.Servers(t, b.name)
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"data dir is a file", func(t *testing.T, dir string) {
			if err := os.MkdirAll(filepath.Join(dir, "nodes", "n1"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "nodes", "n1", "data"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "is not a directory"},
		{"bad data dir", func(t *testing.T, dir string) { badData(t, filepath.Join(dir, "nodes", "n1", "data")) }, "exited during start-up"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, dir)
			c, err := NewProcesses(b.name, Options{Dir: dir})
			if err != nil {
				t.Skipf("%v (make setup)", err)
			}
			t.Cleanup(func() { c.Stop(context.Background()) })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = c.Start(ctx)
			logPath := filepath.Join(dir, "nodes", "n1", b.logName)
			if err == nil || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line", err)
			}
			for _, want := range []string{tt.want, "node n1", logPath} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want it to say %q", err, want)
				}
			}
			if pid := c.Pids()["n1"]; pid != 0 {
				t.Errorf("left running as %d", pid)
			}
			if len(serverPids(t, logPath)) > 0 {
				t.Errorf("a server process of %s is still running", dir)
			}
		})
	}
}

// serverPids returns the pids of live processes whose command line names
// the directory of logPath: servers of the test that outlived it.
func serverPids(t *testing.T, logPath string) []int {
	t.Helper()
	dir := filepath.Dir(logPath)
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), dir) {
			var pid int
			fmt.Sscan(e.Name(), &pid)
			if pidAlive(pid) {
				out = append(out, pid)
			}
		}
	}
	return out
}

func TestMariaDBLifecycle(t *testing.T) {
	t.Parallel()
	testSQLLifecycle(t, mariadbBackend, mariadbSchema)
}

func TestMariaDBStartFailures(t *testing.T) {
	t.Parallel()
	testSQLStartFailures(t, mariadbBackend, func(t *testing.T, data string) {
		// An initialised-looking directory whose system tables are
		// garbage: the server cannot open them.
		if err := os.MkdirAll(filepath.Join(data, "mysql"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, "ibdata1"), []byte("not a tablespace"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
}

func TestMariaDBMissingBinary(t *testing.T) {
	_, err := NewProcesses("mysql", Options{Dir: t.TempDir(), Params: map[string]string{"mariadbd": "/nonexistent/mariadbd"}})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/mariadbd") || !strings.Contains(err.Error(), "node n1") {
		t.Fatalf("err = %v, want it to name the missing program", err)
	}
}

func TestMySQLBackendRegistered(t *testing.T) {
	for _, b := range []string{"mysql", "postgres"} {
		c, err := New(b, Options{Dir: t.TempDir()})
		if err != nil {
			t.Skipf("%v (make setup)", err)
		}
		if got := len(c.Nodes()); got != 1 {
			t.Errorf("%s: %d nodes, want 1", b, got)
		}
		if _, err := New(b, Options{Dir: t.TempDir(), Nodes: 3}); err == nil {
			t.Errorf("%s: 3 nodes accepted", b)
		}
	}
}
