package local

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/locktest/locktest/clusters/backend"
)

var postgresBackend = sqlBackend{
	name: "postgres", logName: "postgres.log",
	exec: func(ctx context.Context, addr string, stmts ...string) error {
		c, err := pgConnect(ctx, addr)
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		for _, s := range stmts {
			if _, err := c.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	},
	count: func(ctx context.Context, addr string) (int, error) {
		c, err := pgConnect(ctx, addr)
		if err != nil {
			return 0, err
		}
		defer c.Close(context.Background())
		var n int
		err = c.QueryRow(ctx, "SELECT count(*) FROM locktest_t").Scan(&n)
		return n, err
	},
}

func pgConnect(ctx context.Context, addr string) (*pgx.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	return pgx.Connect(ctx, fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable connect_timeout=1", host, port))
}

func TestPostgresLifecycle(t *testing.T) {
	t.Parallel()
	testSQLLifecycle(t, postgresBackend, []string{"CREATE TABLE locktest_t (id int PRIMARY KEY)", "INSERT INTO locktest_t VALUES (1), (2)"})
}

func TestPostgresStartFailures(t *testing.T) {
	t.Parallel()
	testSQLStartFailures(t, postgresBackend, func(t *testing.T, data string) {
		// A data directory of a PostgreSQL version that does not exist.
		if err := os.MkdirAll(data, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, "PG_VERSION"), []byte("99\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			u, err := user.Lookup(backend.PostgresUser)
			if err != nil {
				t.Skipf("no user %s (make setup)", backend.PostgresUser)
			}
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			for _, p := range []string{data, filepath.Join(data, "PG_VERSION")} {
				if err := os.Chown(p, uid, gid); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

func TestPostgresMissingBinary(t *testing.T) {
	_, err := NewProcesses("postgres", Options{Dir: t.TempDir(), Params: map[string]string{"postgres": "/nonexistent/postgres"}})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/postgres") || !strings.Contains(err.Error(), "node n1") {
		t.Fatalf("err = %v, want it to name the missing program", err)
	}
}

// A killed server's shared memory segment is removed, also when the server
// is never restarted.
func TestPostgresKillLeavesNoSharedMemory(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/sysvipc/shm"); err != nil {
		t.Skip("no /proc/sysvipc/shm")
	}
	c := startSQL(t, postgresBackend)
	n := c.Nodes()[0]
	b, err := os.ReadFile(filepath.Join(filepath.Dir(n.LogPath), "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 7 || len(strings.Fields(lines[6])) != 2 {
		t.Fatalf("postmaster.pid has no shared memory line:\n%s", b)
	}
	shmid := strings.Fields(lines[6])[1]
	if !shmExists(t, shmid) {
		t.Fatalf("segment %s of the running server not found", shmid)
	}
	if err := c.Kill(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	if shmExists(t, shmid) {
		t.Errorf("segment %s left behind by the killed server", shmid)
	}
}

// shmExists reports whether /proc/sysvipc/shm lists the segment id.
func shmExists(t *testing.T, id string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/sysvipc/shm")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n")[1:] {
		if f := strings.Fields(l); len(f) > 1 && f[1] == id {
			return true
		}
	}
	return false
}
