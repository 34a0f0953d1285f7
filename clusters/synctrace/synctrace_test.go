//go:build linux && amd64

package synctrace

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/locktest/locktest/clusters/durable"
)

// childEnv makes the test binary a traced Go program that writes the
// files of writeFiles into the directory it names, and exits.
const childEnv = "LOCKTEST_SYNCTRACE_TEST_DIR"

// syncsEnv makes the test binary, traced, make that many fsyncs of a
// small write and print the ns each took, for BenchmarkSync.
const syncsEnv = "LOCKTEST_SYNCTRACE_TEST_SYNCS"

// reopenEnv makes the test binary, as a supervisor, open the node's
// files through /proc rather than borrow its descriptors, as it does
// where the kernel refuses pidfd_getfd (a Docker container).
const reopenEnv = "LOCKTEST_SYNCTRACE_TEST_REOPEN"

func TestMain(m *testing.M) {
	if IsSupervisor() {
		reopenAlways = os.Getenv(reopenEnv) != ""
		if err := Supervise(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(childEnv) != "" || os.Getenv(syncsEnv) != "" {
		if Asked() {
			if err := Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
		}
		var err error
		if d := os.Getenv(childEnv); d != "" {
			err = writeFiles(d)
		} else {
			err = syncLoop(os.Getenv(syncsEnv))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(4)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writeFiles writes, in dir: synced (100 bytes, fsync, then 50 more),
// datasynced (10 bytes, fdatasync), unsynced (70 bytes, never synced),
// osync (30 bytes through an O_SYNC descriptor), and syncs the directory
// itself, which a record keeps no line of. Every
// sync runs on a goroutine of its own, locked to a new thread, so that
// threads made after the filter went on are traced too.
func writeFiles(dir string) error {
	write := func(name string, n int, sync func(*os.File) error, more int) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.Write(make([]byte, n)); err != nil {
			return err
		}
		if sync != nil {
			done := make(chan error)
			go func() {
				// A thread of its own, which the runtime makes now.
				runtimeLockedThread()
				done <- sync(f)
			}()
			if err := <-done; err != nil {
				return fmt.Errorf("sync %s: %w", name, err)
			}
		}
		_, err = f.Write(make([]byte, more))
		return err
	}
	if err := write("synced", 100, (*os.File).Sync, 50); err != nil {
		return err
	}
	if err := write("datasynced", 10, func(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }, 0); err != nil {
		return err
	}
	if err := write("unsynced", 70, nil, 0); err != nil {
		return err
	}
	// Written through O_SYNC, as NATS writes its raft snapshots: durable
	// at each write's return, and recorded at the close.
	f, err := os.OpenFile(filepath.Join(dir, "osync"), os.O_CREATE|os.O_WRONLY|os.O_SYNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(make([]byte, 30)); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// runOnce runs the test binary as the child of env, and fails t with its
// output when it fails.
func runOnce(t testing.TB, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	return string(out)
}

// A Go program under the tracer: the record holds the two files it synced
// with the sizes they had when each sync began, the one it wrote through
// O_SYNC with its size at the close, and nothing of the file it never
// synced or of the directory; a power loss planned from the record cuts
// the synced file back to its synced 100 bytes, keeps the datasynced and
// the O_SYNC ones whole, and empties the unsynced one.
//
// The supervisor makes each sync through a descriptor the kernel lends it
// (pidfd_getfd), or through the same file opened again, where the kernel
// refuses that: both must give the same record.
func TestARecordOfAGoProgramsSyncs(t *testing.T) {
	for _, how := range []string{"borrowed", "reopened"} {
		t.Run(how, func(t *testing.T) {
			env := []string{}
			if how == "reopened" {
				env = append(env, reopenEnv+"=1")
			}
			testRecord(t, env)
		})
	}
}

// testRecord runs the test of TestARecordOfAGoProgramsSyncs with the
// child's extra environment env.
func testRecord(t *testing.T, env []string) {
	dir, data := t.TempDir(), filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(dir, "syncs.log")
	runOnce(t, append(env, childEnv+"="+data, durable.EnvFile+"="+record)...)
	text, err := os.ReadFile(record)
	if err != nil {
		t.Fatalf("no record: %v", err)
	}
	sizes := map[string]int64{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(text)), "\n") {
		s, err := durable.ParseLine(line)
		if err != nil {
			t.Fatal(err)
		}
		sizes[filepath.Base(s.Path)] = s.Size
		if s.Pid <= 0 || s.Began <= 0 {
			t.Errorf("line %q: want the syncing thread and the sync's start", line)
		}
	}
	if want := map[string]int64{"synced": 100, "datasynced": 10, "osync": 30}; fmt.Sprint(sizes) != fmt.Sprint(want) {
		t.Errorf("record %v, want %v:\n%s", sizes, want, text)
	}
	cuts, err := durable.PlanDir(data, record)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range cuts {
		got[c.Path] = strconv.FormatInt(c.Size, 10) + "->" + strconv.FormatInt(c.Durable, 10)
	}
	if want := map[string]string{"synced": "150->100", "unsynced": "70->0"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("cuts %v, want %v", got, want)
	}
}

// Without a record named, the program runs untraced and writes none.
func TestNoRecordNoTrace(t *testing.T) {
	data := t.TempDir()
	runOnce(t, childEnv+"="+data)
	if _, err := os.Stat(filepath.Join(data, "synced")); err != nil {
		t.Fatalf("the child did not run: %v", err)
	}
	m, _ := filepath.Glob(filepath.Join(data, "*.log"))
	if len(m) != 0 {
		t.Errorf("records %v without one asked for", m)
	}
}

// syncLoop makes n fsyncs of a 100-byte write to a file in the temporary
// folder and prints the mean time of one, in ns.
func syncLoop(n string) error {
	count, err := strconv.Atoi(n)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp("", "synctrace-bench-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 100)
	t0 := time.Now()
	for range count {
		if _, err := f.Write(buf); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	fmt.Println(time.Since(t0).Nanoseconds() / int64(count))
	return nil
}

// BenchmarkSync measures what the tracer adds to one fsync of a Go
// program: untraced, and traced with its record written.
func BenchmarkSync(b *testing.B) {
	for _, traced := range []bool{false, true} {
		b.Run(map[bool]string{false: "untraced", true: "traced"}[traced], func(b *testing.B) {
			env := []string{syncsEnv + "=" + strconv.Itoa(max(b.N, 1))}
			if traced {
				env = append(env, durable.EnvFile+"="+filepath.Join(b.TempDir(), "syncs.log"))
			}
			b.ResetTimer()
			out := runOnce(b, env...)
			ns, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
			if err != nil {
				b.Fatalf("child said %q", out)
			}
			b.ReportMetric(float64(ns), "ns/sync")
		})
	}
}

// runtimeLockedThread locks the calling goroutine to a thread of its own
// for the rest of its life: the runtime then makes another thread for the
// others.
func runtimeLockedThread() { runtime.LockOSThread() }

// The flags of a /proc fdinfo file are octal; a file without them is an
// error, never flags of zero.
func TestFdinfoFlags(t *testing.T) {
	for _, tc := range []struct {
		info string
		want int
		bad  bool
	}{
		{info: "pos:\t30\nflags:\t06010001\nmnt_id:\t26\nino:\t1234\n", want: unix.O_SYNC | unix.O_WRONLY | unix.O_CLOEXEC},
		{info: "pos:\t0\nflags:\t02\n", want: unix.O_RDWR},
		{info: "pos:\t0\n", bad: true},
		{info: "flags:\t9\n", bad: true},
	} {
		got, err := fdinfoFlags(tc.info)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("fdinfoFlags(%q) = %#o, %v; want %#o, error %v", tc.info, got, err, tc.want, tc.bad)
		}
	}
}
