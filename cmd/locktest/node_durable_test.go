package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNodeDurable runs `locktest node durable`, as the ssh provider runs it
// on a host, over a data directory with one file synced in part (its sync
// record line written as the clock shim writes it) and one never synced:
// it prints both cuts and changes nothing; with --cut it truncates them;
// with --kill it SIGKILLs the node first, and refuses, killing nothing, a
// node without a sync record.
func TestNodeDurable(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(data, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	aof := write("incr.aof", "synced|unsynced")
	write("manifest", "never synced")
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, aof, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO|unix.STATX_SIZE|unix.STATX_BTIME, &st); err != nil {
		t.Fatal(err)
	}
	birth := int64(0)
	if st.Mask&unix.STATX_BTIME != 0 {
		birth = st.Btime.Sec*1e9 + int64(st.Btime.Nsec)
	}
	record := filepath.Join(dir, "syncs.log")
	line := fmt.Sprintf("1 %d:%d %d %d 7 1 %s\n", st.Dev_major, st.Dev_minor, st.Ino, birth, aof)
	if err := os.WriteFile(record, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	type cut struct {
		Path          string
		Size, Durable int64
	}
	cuts := func(stdout string) []cut {
		t.Helper()
		var cs []cut
		if err := json.Unmarshal([]byte(stdout), &cs); err != nil {
			t.Fatalf("output %q: %v", stdout, err)
		}
		return cs
	}
	want := []cut{{"incr.aof", 15, 7}, {"manifest", 12, 0}}
	stdout, stderr, code := locktest(t, "node", "durable", "--data", data, "--record", record)
	if code != 0 || fmt.Sprint(cuts(stdout)) != fmt.Sprint(want) {
		t.Fatalf("plan: exit %d, cuts %s (%s), want %v", code, stdout, stderr, want)
	}
	if b, _ := os.ReadFile(aof); string(b) != "synced|unsynced" {
		t.Fatalf("a plan changed the file: %q", b)
	}

	// A node without a record is refused before the kill.
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleeper.Process.Kill()
	pid := fmt.Sprint(sleeper.Process.Pid)
	_, stderr, code = locktest(t, "node", "durable", "--data", data, "--record", record+".none", "--kill", pid, "--program", "sleep", "--cut")
	if code != 2 || !strings.Contains(stderr, "has no sync record") {
		t.Fatalf("no record: exit %d: %s", code, stderr)
	}
	if err := syscall.Kill(sleeper.Process.Pid, 0); err != nil {
		t.Fatalf("the node was killed without a record: %v", err)
	}
	// A process that is not the program named is not killed.
	_, stderr, code = locktest(t, "node", "durable", "--data", data, "--record", record, "--kill", pid, "--program", "redis-server", "--cut")
	if code != 2 || !strings.Contains(stderr, "is not a redis-server") {
		t.Fatalf("wrong program: exit %d: %s", code, stderr)
	}
	stdout, stderr, code = locktest(t, "node", "durable", "--data", data, "--record", record, "--kill", pid, "--program", "sleep", "--cut")
	if code != 0 || fmt.Sprint(cuts(stdout)) != fmt.Sprint(want) {
		t.Fatalf("cut: exit %d, cuts %s (%s), want %v", code, stdout, stderr, want)
	}
	if err := sleeper.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the node was not killed: %v", err)
	}
	if b, _ := os.ReadFile(aof); string(b) != "synced|" {
		t.Errorf("incr.aof holds %q after the cut, want its synced 7 bytes", b)
	}
	if b, _ := os.ReadFile(filepath.Join(data, "manifest")); len(b) != 0 {
		t.Errorf("manifest holds %q after the cut, want nothing", b)
	}
	if _, stderr, code := locktest(t, "node", "durable", "--data", data); code != 2 || !strings.Contains(stderr, "needs --data and --record") {
		t.Errorf("no --record: exit %d: %s", code, stderr)
	}
}
