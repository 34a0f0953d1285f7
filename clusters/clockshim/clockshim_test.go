package clockshim

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/durable"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/testcluster"
	"golang.org/x/sys/unix"
)

func build(t *testing.T) (*Clocks, string) {
	t.Helper()
	if _, err := compiler(); err != nil {
		t.Skip(err)
	}
	lib, err := Build(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(lib, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, lib
}

// dateUnderShim runs `date +%s` with node's shim environment.
func dateUnderShim(t *testing.T, c *Clocks, node string) int64 {
	t.Helper()
	env, err := c.Env(node)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("date", "+%s")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("date under the shim: %v", err)
	}
	s, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestShimShiftsTheWallClockOfOneProcess(t *testing.T) {
	c, _ := build(t)
	for _, tc := range []struct {
		offset time.Duration
	}{{0}, {time.Hour}, {-48 * time.Hour}, {90 * time.Second}} {
		if err := c.Set("a", tc.offset); err != nil {
			t.Fatal(err)
		}
		got := dateUnderShim(t, c, "a")
		want := time.Now().Add(tc.offset).Unix()
		if d := got - want; d < -2 || d > 2 {
			t.Errorf("offset %v: date says %d, want %d±2", tc.offset, got, want)
		}
		if c.Offset("a") != tc.offset {
			t.Errorf("Offset = %v, want %v", c.Offset("a"), tc.offset)
		}
	}
	// Another node's file is independent.
	if got, want := dateUnderShim(t, c, "b"), time.Now().Unix(); got-want < -2 || got-want > 2 {
		t.Errorf("node b moved with a: %d vs %d", got, want)
	}
	c.Reset()
	if c.Offset("a") != 0 {
		t.Error("Reset left an offset")
	}
}

func TestBuildIsCachedAndDeterministic(t *testing.T) {
	if _, err := compiler(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	a, err := Build(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(a)
	b, err := Build(context.Background(), dir)
	if err != nil || a != b {
		t.Fatalf("second Build: %s, %v; want %s", b, err, a)
	}
	st2, _ := os.Stat(b)
	if !st.ModTime().Equal(st2.ModTime()) {
		t.Error("second Build recompiled the cached library")
	}
}

// TestRedisUnderTheShim starts redis-server (whose jemalloc reads the clock
// while it initialises: libfaketime crashes it there) under the shim and
// checks that TIME moves by a bump and that a key with PX expires early
// after a forward bump.
func TestRedisUnderTheShim(t *testing.T) {
	gate.Need(t, "redis-server")
	c, _ := build(t)
	ctx := context.Background()
	cl, err := local.NewProcesses("redis", local.Options{Dir: t.TempDir(), NodeEnv: func(n string) []string {
		env, err := c.Env(n)
		if err != nil {
			t.Error(err)
		}
		return env
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Start(ctx); err != nil {
		t.Fatalf("redis-server under the shim did not start: %v", err)
	}
	defer cl.Stop(ctx)
	rc := goredis.NewClient(&goredis.Options{Addr: cl.Nodes()[0].Addr, Protocol: 2})
	defer rc.Close()
	before, err := rc.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Set(ctx, "k", "v", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set("n1", time.Hour); err != nil {
		t.Fatal(err)
	}
	after, err := rc.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if d := after.Sub(before); d < time.Hour-5*time.Second || d > time.Hour+5*time.Second {
		t.Errorf("TIME moved by %v after a one-hour bump", d)
	}
	if n, err := rc.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("a key with PX 10s still exists after the clock jumped an hour forward (exists=%d, %v)", n, err)
	}
	c.Reset()
	back, _ := rc.Time(ctx).Result()
	if d := back.Sub(time.Now()); d < -5*time.Second || d > 5*time.Second {
		t.Errorf("TIME is %v off the host clock after reset", d)
	}
}

// TestZooKeeperUnderTheShim starts a standalone ZooKeeper (a JVM) under the
// shim and checks that a forward bump moves the wall clock the server
// stamps on new znodes (ctime comes from System.currentTimeMillis).
func TestZooKeeperUnderTheShim(t *testing.T) {
	gate.Need(t, "java")
	c, _ := build(t)
	ctx := context.Background()
	cl, err := local.New("zookeeper", local.Options{Nodes: 1, Dir: t.TempDir(), NodeEnv: func(n string) []string {
		env, err := c.Env(n)
		if err != nil {
			t.Error(err)
		}
		return env
	}})
	if err != nil {
		t.Skip(err)
	}
	if err := cl.Start(ctx); err != nil {
		t.Fatalf("ZooKeeper under the shim did not start: %v", err)
	}
	defer cl.Stop(ctx)
	conn, _, err := zk.Connect([]string{cl.Nodes()[0].Addr}, 4*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctime := func(path string) time.Time {
		t.Helper()
		var err error
		for i := 0; i < 50; i++ {
			if _, err = conn.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		_, st, err := conn.Get(path)
		if err != nil {
			t.Fatal(err)
		}
		return time.UnixMilli(st.Ctime)
	}
	if d := time.Until(ctime("/before")); d < -5*time.Second || d > 5*time.Second {
		t.Fatalf("ctime before any bump is %v off the host clock", d)
	}
	if err := c.Set("n1", time.Hour); err != nil {
		t.Fatal(err)
	}
	if d := time.Until(ctime("/after")); d < time.Hour-5*time.Second || d > time.Hour+5*time.Second {
		t.Errorf("ctime after a one-hour bump is %v ahead of the host clock, want about 1h", d)
	}
}

// TestShimRecordsSyncs runs dd, which writes a file and then fsyncs or
// fdatasyncs it through libc, under the shim with a sync record, and reads
// the record back: one line per sync of a regular file, naming the file as
// durable.Scan does and its size when the sync began; without the
// variable, nothing is recorded.
func TestShimRecordsSyncs(t *testing.T) {
	gate.Need(t, "dd")
	_, lib := build(t)
	dir := t.TempDir()
	record := filepath.Join(dir, "syncs.log")
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	dd := func(withRecord bool, args ...string) {
		t.Helper()
		cmd := exec.Command("dd", args...)
		cmd.Dir = data
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
		if withRecord {
			cmd.Env = append(cmd.Env, durable.EnvFile+"="+record)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("dd %v: %v: %s", args, err, out)
		}
	}
	dd(true, "if=/dev/zero", "of=a", "bs=100", "count=1", "conv=fsync", "status=none")
	dd(true, "if=/dev/zero", "of=a", "bs=50", "count=1", "conv=notrunc,fdatasync", "oflag=append", "status=none")
	dd(false, "if=/dev/zero", "of=b", "bs=10", "count=1", "conv=fsync", "status=none")
	dd(true, "if=/dev/zero", "of=c", "bs=10", "count=1", "status=none") // no sync
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("record has %d lines, want 2 (fsync and fdatasync of a):\n%s", len(lines), b)
	}
	var syncs []durable.Sync
	for _, l := range lines {
		s, err := durable.ParseLine(l)
		if err != nil {
			t.Fatal(err)
		}
		syncs = append(syncs, s)
	}
	files, err := durable.Scan(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 || files[0].Path != "a" {
		t.Fatalf("Scan = %+v", files)
	}
	a := files[0]
	for i, want := range []int64{100, 150} {
		s := syncs[i]
		if s.File != a.ID || s.Size != want || s.Path != filepath.Join(data, "a") || s.Pid <= 0 {
			t.Errorf("sync %d = %+v, want file %+v at size %d, path %s", i, s, a.ID, want, filepath.Join(data, "a"))
		}
	}
	if syncs[1].Began <= syncs[0].Began {
		t.Errorf("the second sync began at %d, before the first (%d)", syncs[1].Began, syncs[0].Began)
	}
	d := durable.Durable{}
	for _, s := range syncs {
		d.Add(s)
	}
	if got := fmt.Sprint(durable.Plan(files, d)); got != "[b 10->0 (-10B) c 10->0 (-10B)]" {
		t.Errorf("Plan = %s", got)
	}
}

// TestEverysecKillLosesAWriteMadeDuringTheFsync pins why a process kill
// can lose an acknowledged write under appendfsync everysec (docs/findings.md,
// redlock-kill-everysec): while its background fsync runs, Redis postpones
// writing the commands it answers to its append-only file, for up to 2 s.
// Every fsync of the node is made 5 s long (EnvSyncDelay); a SET answered
// while one runs is gone after SIGKILL and a restart, and the SET made
// before it is kept. A trial in which the fsync had ended by the time the
// SET was answered, or the kill came a second or more after it (a stalled
// machine: Redis then writes anyway), proves nothing, and is made again.
func TestEverysecKillLosesAWriteMadeDuringTheFsync(t *testing.T) {
	gate.Need(t, "redis-server")
	c, _ := build(t)
	ctx := context.Background()
	pending := func(rc *goredis.Client) bool {
		info, err := rc.Info(ctx, "persistence").Result()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(info, "aof_pending_bio_fsync:1")
	}
	for trial := 1; ; trial++ {
		// Redis syncs the files it creates at its first start in its main
		// thread, which the delay would hold past the readiness deadline:
		// the node starts without it and is restarted with it on its
		// files, which a restart only reads.
		slow := false
		cl, err := local.NewProcesses("redis", local.Options{Dir: t.TempDir(), Persistence: backend.PersistenceEverysec,
			NodeEnv: func(n string) []string {
				env, err := c.Env(n)
				if err != nil {
					t.Error(err)
				}
				if slow {
					env = append(env, EnvSyncDelay+"=5000")
				}
				return env
			}})
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Start(ctx); err != nil {
			t.Fatalf("redis-server under the shim did not start: %v", err)
		}
		t.Cleanup(func() { cl.Stop(context.Background()) }) // idempotent
		node := cl.Nodes()[0]
		slow = true
		if err := cl.Kill(ctx, node); err != nil {
			t.Fatal(err)
		}
		if err := cl.Restart(ctx, node); err != nil {
			t.Fatalf("restart with every fsync 5 s late: %v", err)
		}
		rc := goredis.NewClient(&goredis.Options{Addr: node.Addr, Protocol: 2})
		if err := rc.Set(ctx, "a", "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !pending(rc) {
			if time.Now().After(deadline) {
				t.Fatal("no background fsync began within 10 s of a write under appendfsync everysec")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := rc.Set(ctx, "b", "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		answered := time.Now()
		during := pending(rc)
		if err := cl.Kill(ctx, node); err != nil {
			t.Fatal(err)
		}
		late := time.Since(answered)
		rc.Close()
		if !during || late >= time.Second {
			cl.Stop(ctx)
			t.Logf("trial %d proves nothing (fsync still running after the SET: %v; the kill came %v after it); again", trial, during, late)
			if trial == 3 {
				t.Fatal("three trials in a row without a kill within a second of a SET answered during the fsync")
			}
			continue
		}
		slow = false
		if err := cl.Restart(ctx, node); err != nil {
			t.Fatal(err)
		}
		rc = goredis.NewClient(&goredis.Options{Addr: node.Addr, Protocol: 2})
		a, aerr := rc.Get(ctx, "a").Result()
		_, berr := rc.Get(ctx, "b").Result()
		rc.Close()
		cl.Stop(ctx)
		if aerr != nil || a != "1" {
			t.Errorf("the SET made before the fsync began is gone after the kill: %q, %v", a, aerr)
		}
		if berr != goredis.Nil {
			t.Errorf("the SET answered while the fsync ran survived the kill (GET: %v); Redis wrote it before answering", berr)
		}
		return
	}
}

// TestSyncDelayIsSetAndClearedAtRunTime sets a node's sync delay through
// its mapping (SetSyncDelay), as the slow-disk fault does, and runs dd,
// which writes a file and fsyncs it through libc, under the node's shim
// environment with a sync record: the fsync begins at least the delay
// after dd started. Then the delay is made ten minutes long and a dd is
// left waiting in its fsync; clearing the delay releases it, and a dd
// started after the clear syncs too. Neither can finish before their ten
// minutes if the clear does not reach the shim, so a five-minute guard
// tells a broken clear from a slow machine without timing the clear itself.
func TestSyncDelayIsSetAndClearedAtRunTime(t *testing.T) {
	gate.Need(t, "dd")
	c, _ := build(t)
	dir := t.TempDir()
	env, err := c.Env("n1")
	if err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(dir, "syncs.log")
	dd := func(name string) *exec.Cmd {
		cmd := exec.Command("dd", "if=/dev/zero", "of="+name, "bs=10", "count=1", "conv=fsync", "status=none")
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), env...), durable.EnvFile+"="+record)
		return cmd
	}
	syncs := func() []durable.Sync {
		t.Helper()
		b, err := os.ReadFile(record)
		if err != nil {
			t.Fatal(err)
		}
		var out []durable.Sync
		for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if l == "" {
				continue
			}
			s, err := durable.ParseLine(l)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}
	monotonic := func() int64 {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			t.Fatal(err)
		}
		return ts.Nano()
	}

	const delay = 700 * time.Millisecond
	if err := c.SetSyncDelay("n1", delay); err != nil {
		t.Fatal(err)
	}
	if got := c.SyncDelay("n1"); got != delay {
		t.Fatalf("SyncDelay = %v, want %v", got, delay)
	}
	started := monotonic()
	if out, err := dd("a").CombinedOutput(); err != nil {
		t.Fatalf("dd: %v: %s", err, out)
	}
	s := syncs()
	if len(s) != 1 {
		t.Fatalf("%d syncs recorded, want dd's one", len(s))
	}
	if waited := time.Duration(s[0].Began - started); waited < delay {
		t.Errorf("dd's fsync began %v after dd started, want at least the sync delay %v", waited, delay)
	}

	// A delay too long to wait out, cleared while a sync waits for it.
	if err := c.SetSyncDelay("n1", MaxSyncDelay); err != nil {
		t.Fatal(err)
	}
	if err := c.SetSyncDelay("n1", MaxSyncDelay+time.Second); err == nil {
		t.Error("SetSyncDelay took a delay longer than MaxSyncDelay")
	}
	waiting := dd("b")
	if err := waiting.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- waiting.Wait() }()
	// dd waits in the shim's clock_nanosleep before its fsync begins.
	sleeping := fmt.Sprintf("%d ", unix.SYS_CLOCK_NANOSLEEP)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", waiting.Process.Pid))
		if err != nil {
			t.Fatalf("dd ended before it waited for its sync (%v)", err)
		}
		if strings.HasPrefix(string(b), sleeping) {
			if st, err := os.Stat(filepath.Join(dir, "b")); err == nil && st.Size() == 10 {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := c.SetSyncDelay("n1", 0); err != nil {
		t.Fatal(err)
	}
	if c.SyncDelay("n1") != 0 {
		t.Errorf("SyncDelay = %v after the clear", c.SyncDelay("n1"))
	}
	guard := time.After(MaxSyncDelay / 2)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dd waiting for its sync: %v", err)
		}
	case <-guard:
		waiting.Process.Kill()
		t.Fatalf("a sync waiting for a %v delay still waits %v after the delay was cleared", MaxSyncDelay, MaxSyncDelay/2)
	}
	after := dd("c")
	if err := after.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- after.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dd after the clear: %v", err)
		}
	case <-guard:
		after.Process.Kill()
		t.Fatalf("a sync begun after the delay was cleared still waits for it")
	}
	if n := len(syncs()); n != 3 {
		t.Errorf("%d syncs recorded, want 3", n)
	}
}

// TestSyncDelaySlowsTheServers starts, under the shim, each server that
// syncs through libc before it answers a write — redis-server under
// appendfsync always, a standalone ZooKeeper (whose JVM syncs its
// transaction log), PostgreSQL and MariaDB at a commit — sets the node's
// sync delay at run time, and needs a write then to take at least the
// delay; after the clear the node takes writes again.
func TestSyncDelaySlowsTheServers(t *testing.T) {
	const delay = 800 * time.Millisecond
	ctx := context.Background()
	start := func(t *testing.T, c *Clocks, kind string, persistence string) clusters.Node {
		t.Helper()
		cl, err := local.New(kind, local.Options{Nodes: 1, Dir: t.TempDir(), Persistence: persistence,
			NodeEnv: func(n string) []string {
				env, err := c.Env(n)
				if err != nil {
					t.Error(err)
				}
				return env
			}})
		cl = testcluster.Started(t, cl, err)
		return cl.Nodes()[0]
	}
	slowWrite := func(t *testing.T, c *Clocks, node string, write func() error) {
		t.Helper()
		if err := write(); err != nil {
			t.Fatalf("a write before the delay: %v", err)
		}
		if err := c.SetSyncDelay(node, delay); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		if err := write(); err != nil {
			t.Fatalf("a write under the delay: %v", err)
		}
		if took := time.Since(began); took < delay {
			t.Errorf("a write took %v with every sync %v late, want at least the delay", took, delay)
		}
		if err := c.SetSyncDelay(node, 0); err != nil {
			t.Fatal(err)
		}
		if err := write(); err != nil {
			t.Fatalf("a write after the clear: %v", err)
		}
	}

	t.Run("redis", func(t *testing.T) {
		gate.Need(t, "redis-server")
		c, _ := build(t)
		n := start(t, c, "redis", backend.PersistenceAlways)
		rc := goredis.NewClient(&goredis.Options{Addr: n.Addr, Protocol: 2, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
		defer rc.Close()
		i := 0
		slowWrite(t, c, n.Name, func() error {
			i++
			return rc.Set(ctx, fmt.Sprint("k", i), "v", 0).Err()
		})
	})

	t.Run("zookeeper", func(t *testing.T) {
		gate.Need(t, "java")
		c, _ := build(t)
		n := start(t, c, "zookeeper", "")
		conn, _, err := zk.Connect([]string{n.Addr}, 30*time.Second, zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		i := 0
		slowWrite(t, c, n.Name, func() error {
			i++
			var err error
			for range 50 { // until the session is established
				if _, err = conn.Create(fmt.Sprint("/k", i), nil, 0, zk.WorldACL(zk.PermAll)); err != zk.ErrNoServer && err != zk.ErrConnectionClosed {
					return err
				}
				time.Sleep(100 * time.Millisecond)
			}
			return err
		})
	})

	// Each SQL write is one row in a transaction of its own, in a table of
	// the database the client logs in to (PostgreSQL) or of test (MariaDB).
	createTable := func(db string) string { return "CREATE TABLE " + db + "slow (n INT)" }
	insertRow := func(db string) string { return "INSERT INTO " + db + "slow VALUES (1)" }

	t.Run("postgres", func(t *testing.T) {
		c, _ := build(t)
		n := start(t, c, "postgres", "")
		host, port, _ := net.SplitHostPort(n.Addr)
		db, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable", host, port, backend.PostgresUser, backend.PostgresUser))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close(ctx)
		if _, err := db.Exec(ctx, createTable("")); err != nil {
			t.Fatal(err)
		}
		slowWrite(t, c, n.Name, func() error {
			_, err := db.Exec(ctx, insertRow(""))
			return err
		})
	})

	t.Run("mariadb", func(t *testing.T) {
		c, _ := build(t)
		n := start(t, c, "mysql", "")
		cfg := mysql.NewConfig()
		cfg.User, cfg.Net, cfg.Addr = "root", "tcp", n.Addr
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		db := sql.OpenDB(conn)
		defer db.Close()
		if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS test"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, createTable("test.")); err != nil {
			t.Fatal(err)
		}
		slowWrite(t, c, n.Name, func() error {
			_, err := db.ExecContext(ctx, insertRow("test."))
			return err
		})
	})
}
