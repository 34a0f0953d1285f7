package ssh_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.yaml.in/yaml/v3"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters/backend"
	sshp "github.com/locktest/locktest/clusters/ssh"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/internal/shellquote"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/testkit/testlab"
)

// needSQLServer skips the test unless this host has the server of
// backend (mysql: mariadbd; postgres: a /usr/lib/postgresql/<version>),
// which the lab's image takes from it.
func needSQLServer(t *testing.T, backend string) {
	t.Helper()
	if backend == "postgres" {
		if bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres"); len(bins) == 0 {
			t.Skip("postgresql not installed (make setup)")
		}
		return
	}
	if _, err := exec.LookPath("mariadbd"); err != nil {
		if _, err := os.Stat("/usr/sbin/mariadbd"); err != nil {
			t.Skip("mariadb-server not installed (make setup)")
		}
	}
}

// TestSSHLabSQL runs MariaDB and PostgreSQL on the SSH lab's hosts, one
// lab for all: a fault-free mysql-get-lock and pg-advisory, each valid as
// on local; and each with its server killed and restarted (kill-node
// pinned to n1), where every kill and restart must have been applied, the
// server must have come back from its own data directory after a real
// crash (its log, collected from the host, shows the crash recovery), and
// the clients must have got the lock from it after the first restart (a
// kill's verdict is not asserted: whether a holder that lost its session
// still acts on it overlaps the next holder depends on timing). Then a
// host whose inventory names a missing server binary is a one-line set-up
// error naming the host, and a dead driver's servers (PostgreSQL with its
// backends) are found and killed by Cleanup. Afterwards no host keeps a
// file, rule, process or shared memory segment of a run.
func TestSSHLabSQL(t *testing.T) {
	inventory := testlab.Shared(t)
	for _, tc := range []struct {
		name, impl, fault string
		// recovered is what the server's log says when it starts after
		// a crash, from the data directory the crash left.
		recovered string
	}{
		{name: "mysql-no-faults", impl: "mysql-get-lock"},
		{name: "pg-no-faults", impl: "pg-advisory"},
		{name: "mysql-kill-node", impl: "mysql-get-lock", fault: "kill-node", recovered: "Aria engine: starting recovery"},
		{name: "pg-kill-node", impl: "pg-advisory", fault: "kill-node", recovered: "database system was not properly shut down; automatic recovery in progress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			impl, err := impls.Lookup(tc.impl)
			if err != nil {
				t.Fatal(err)
			}
			needSQLServer(t, impl.Backend)
			cfg := sshConfig(t, tc.impl, inventory)
			// An op timeout far beyond any no-fault wait, so a slow reply on
			// a loaded machine is not mistaken for an unknown outcome.
			cfg.Duration, cfg.MaxCriticalSections, cfg.Timeout = 8*time.Second, 40, 5*time.Second
			if tc.fault != "" {
				cfg.Faults, cfg.Targets = []string{tc.fault}, map[string][]string{tc.fault: {"n1"}}
				cfg.Interval = 500 * time.Millisecond
				nemesis.Down.Set(&cfg.FaultSettings, 500*time.Millisecond)
				// The workload goes on 12 s after the fault phase: a
				// PostgreSQL crash recovery over the lab took 10.6 s with
				// stress-ng beside it, and the clients must get the lock
				// from the restarted server before the run ends.
				cfg.Duration, cfg.Quiet, cfg.MaxCriticalSections, cfg.Timeout = 18*time.Second, 12*time.Second, 0, time.Second
				// A pause between ops keeps the history small enough for
				// the linearizability checkers to decide.
				cfg.Think = 5 * time.Millisecond
			}
			out, h := testkit.MustRun(t, cfg)
			// A restart that a loaded machine (CI run 32, load 15) kept
			// from answering within the heal's deadline is the run's
			// problem, rightly; the kill and restart are tried once more.
			if tc.fault != "" && strings.Contains(strings.Join(out.Results.Problems, "\n"), "context deadline exceeded") {
				t.Logf("run problems %q: trying once more", out.Results.Problems)
				cfg.Seed++
				out, h = testkit.MustRun(t, cfg)
			}
			r := out.Results
			if tc.fault == "" && r.Valid != checker.Valid {
				t.Errorf("verdict %s, want valid; anomalies %v, problems %v", r.Valid, testkit.Kinds(r), r.Problems)
			}
			if !strings.HasPrefix(r.Run.Network, "ssh hosts h1 ") {
				t.Errorf("network %q: want the lab's hosts", r.Run.Network)
			}
			log, err := os.ReadFile(filepath.Join(out.Dir, "logs", "n1.log"))
			if err != nil {
				t.Fatal(err)
			}
			ready := map[string]string{"mysql": "ready for connections", "postgres": "database system is ready to accept connections"}[impl.Backend]
			if !strings.Contains(string(log), ready) {
				t.Errorf("logs/n1.log is not the server's log collected from its host: no %q", ready)
			}
			if tc.fault != "" {
				t.Logf("verdict %s, anomalies %v (not asserted: it depends on timing)", r.Valid, testkit.Kinds(r))
				// A kill whose command outlived its op on a loaded machine
				// (CI run 31, load 17) ends info, not ok: it still counts,
				// as the server's log below shows the crash recovery.
				kills := testkit.NemesisOps(h, tc.fault, history.OK) + testkit.NemesisOps(h, tc.fault, history.Info)
				restarts := testkit.NemesisOps(h, "restart-node", history.OK)
				if kills < 1 || restarts < kills || testkit.NemesisOps(h, tc.fault, history.Fail)+testkit.NemesisOps(h, "restart-node", history.Fail) > 0 {
					t.Errorf("%d kills, %d restarts: want every kill applied and healed; nemesis %v", kills, restarts, testkit.NemesisSeq(h))
				}
				if !strings.Contains(string(log), tc.recovered) {
					t.Errorf("logs/n1.log lacks %q: the server did not restart from the data directory the kill left", tc.recovered)
				}
				if acquiredAfter(h, "restart-node") == 0 {
					t.Errorf("no acquire granted after the first restart")
				}
			}
			testlab.AssertClean(t, inventory)
		})
	}
	t.Run("no-server-binary", func(t *testing.T) { sshSQLMissingBinary(t, inventory) })
	t.Run("cleanup", func(t *testing.T) { sshSQLCleanup(t, inventory) })
	t.Run("port-taken", func(t *testing.T) { sshSQLPortTaken(t, inventory) })
}

// sshSQLPortTaken starts a PostgreSQL on h1 and then a second cluster on
// the same host and port, as a second run on the same hosts would: the
// second's start must fail, in one line, saying that another server
// answers there, rather than take the first server for its own; both stop
// without a trace.
func sshSQLPortTaken(t *testing.T, inventory string) {
	needSQLServer(t, "postgres")
	ctx, conns := testlab.Dial(t, inventory)
	inv, err := sshp.LoadInventory(inventory)
	if err != nil {
		t.Fatal(err)
	}
	var errs [2]error
	func() {
		for i := range errs {
			id := sshp.NewRunID()
			cl, err := sshp.New(sshp.Options{Backend: "postgres", Nodes: 1, Conns: conns, Inventory: inv, RunID: id})
			if err != nil {
				t.Fatal(err)
			}
			// Stopped, and its directory removed, as a run does, once both
			// tried.
			defer func() {
				if err := cl.Stop(context.Background()); err != nil {
					t.Error(err)
				}
				if err := sshp.RemoveRunDirs(context.Background(), conns, id); err != nil {
					t.Error(err)
				}
			}()
			errs[i] = cl.Start(ctx)
			if i == 0 && errs[i] != nil {
				t.Fatal(errs[i])
			}
		}
	}()
	addr := inv.Hosts[0].Address + ":5432"
	if err := errs[1]; err == nil || !strings.Contains(err.Error(), "another server answers on "+addr) || strings.Contains(err.Error(), "\n") {
		t.Errorf("second start: %v, want a one-line error saying that another server answers on %s", err, addr)
	}
	testlab.AssertClean(t, inventory)
}

// acquiredAfter counts the acquires granted after the first nemesis op f
// that went in.
func acquiredAfter(h history.History, f string) int {
	i := slices.IndexFunc(h, func(o history.Op) bool { return o.IsNemesis() && o.F == f && o.Type == history.OK })
	if i < 0 {
		return 0
	}
	n := 0
	for _, o := range h[i:] {
		if o.F == history.Acquire && o.Type == history.OK {
			n++
		}
	}
	return n
}

// sshSQLMissingBinary gives h1 a server binary that is not there, in the
// inventory's binaries: map, and wants the run a one-line set-up error
// naming the host and the binary, and nothing left on the hosts.
func sshSQLMissingBinary(t *testing.T, inventory string) {
	for _, tc := range []struct{ impl, program string }{
		{"mysql-get-lock", "mariadbd"},
		{"pg-advisory", "postgres"},
	} {
		t.Run(tc.program, func(t *testing.T) {
			inv, err := sshp.LoadInventory(inventory)
			if err != nil {
				t.Fatal(err)
			}
			missing := "/nonexistent/" + tc.program
			inv.Hosts[0].Binaries = map[string]string{tc.program: missing}
			b, err := yaml.Marshal(inv)
			if err != nil {
				t.Fatal(err)
			}
			bad := filepath.Join(t.TempDir(), "bad.yaml")
			if err := os.WriteFile(bad, b, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = run.Run(context.Background(), sshConfig(t, tc.impl, bad))
			var se *run.SetupError
			want := "no " + missing + " on the host"
			if !errors.As(err, &se) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "ssh h1") || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want a one-line setup error naming h1 with %q", err, want)
			}
			testlab.AssertClean(t, inventory)
		})
	}
}

// sshSQLCleanup starts a MariaDB and a PostgreSQL server on the lab (the
// latter with a client's backend besides its own processes), makes their
// runs' owner a driver that is gone, as a killed driver leaves them, and
// wants Cleanup to find both runs and leave nothing of them: no process,
// no shared memory segment, no directory.
func sshSQLCleanup(t *testing.T, inventory string) {
	ctx, conns := testlab.Dial(t, inventory)
	inv, err := sshp.LoadInventory(inventory)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	var ids []string
	for _, be := range []string{"mysql", "postgres"} {
		needSQLServer(t, be)
		id := sshp.NewRunID()
		cl, err := sshp.New(sshp.Options{Backend: be, Nodes: 1, Conns: conns, Inventory: inv, RunID: id})
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Start(ctx); err != nil {
			t.Fatalf("start %s: %v", be, err)
		}
		if be == "postgres" {
			// A client's backend, a process of its own below the
			// postmaster, open until the cleanup.
			c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", backend.PostgresUser, cl.Nodes()[0].Addr, backend.PostgresUser))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
		}
		dir := sshp.RunDir(conns[0].Host, id)
		if _, err := conns[0].Run(ctx, fmt.Sprintf("echo '%s 999999999 1' > %s/owner", host, shellquote.Quote(dir))); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	left, err := sshp.Cleanup(ctx, conns, false)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, l := range left {
		found = append(found, l.RunID)
	}
	for _, id := range ids {
		if !slices.Contains(found, id) {
			t.Errorf("cleanup found runs %v, not %s", found, id)
		}
	}
	testlab.AssertClean(t, inventory)
}
