package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Sync
		err  string
	}{
		{line: "363134701159 254:0 9986434 1795677929546185904 89 19519 /tmp/plx/data/temp-rewriteaof-19519.aof",
			want: Sync{Began: 363134701159, File: FileID{Dev: unix.Mkdev(254, 0), Ino: 9986434, Birth: 1795677929546185904}, Size: 89, Pid: 19519,
				Path: "/tmp/plx/data/temp-rewriteaof-19519.aof"}},
		// A path with spaces, a file system without birth times, a file
		// deleted while open.
		{line: "5 8:1 12 0 0 7 /a dir/f (deleted)",
			want: Sync{Began: 5, File: FileID{Dev: unix.Mkdev(8, 1), Ino: 12}, Pid: 7, Path: "/a dir/f (deleted)"}},
		// readlink failed: no path.
		{line: "5 8:1 12 0 3 7 ", want: Sync{Began: 5, File: FileID{Dev: unix.Mkdev(8, 1), Ino: 12}, Size: 3, Pid: 7}},
		{line: "", err: "want 7 fields"},
		{line: "5 8:1 12 0 3 7", err: "want 7 fields"},
		{line: "5 8-1 12 0 3 7 /f", err: `device "8-1"`},
		{line: "x 8:1 12 0 3 7 /f", err: `start "x"`},
		{line: "5 8:1 12 0 -3 7 /f", err: `size "-3"`},
		{line: "5 8:1 -12 0 3 7 /f", err: `inode "-12"`},
		{line: "5 4294967296:1 12 0 3 7 /f", err: `device major "4294967296"`},
		{line: "5 8:1 12 0 99999999999999999999 7 /f", err: `size`},
	} {
		got, err := ParseLine(tc.line)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseLine(%q) = %+v, %v; want an error with %q", tc.line, got, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("ParseLine(%q): %v", tc.line, err)
		case tc.err == "" && got != tc.want:
			t.Errorf("ParseLine(%q) = %+v, want %+v", tc.line, got, tc.want)
		}
	}
}

// The sync that began last gives the durable size, whatever order the
// lines came in, and also when it is smaller (the file shrank).
func TestDurableKeepsTheSyncThatBeganLast(t *testing.T) {
	a, b := FileID{Dev: 1, Ino: 10, Birth: 100}, FileID{Dev: 1, Ino: 10, Birth: 200}
	for _, tc := range []struct {
		name  string
		syncs []Sync
		want  map[FileID]int64
	}{
		{"none", nil, map[FileID]int64{a: 0}},
		{"in order", []Sync{{Began: 1, File: a, Size: 10}, {Began: 2, File: a, Size: 20}}, map[FileID]int64{a: 20}},
		// Two threads: the later sync's line was written first.
		{"later sync recorded first", []Sync{{Began: 2, File: a, Size: 20}, {Began: 1, File: a, Size: 10}}, map[FileID]int64{a: 20}},
		{"shrank", []Sync{{Began: 1, File: a, Size: 20}, {Began: 2, File: a, Size: 5}}, map[FileID]int64{a: 5}},
		// A later file on the same inode is another file.
		{"inode reused", []Sync{{Began: 1, File: a, Size: 20}, {Began: 2, File: b, Size: 7}}, map[FileID]int64{a: 20, b: 7}},
	} {
		d := Durable{}
		for _, s := range tc.syncs {
			d.Add(s)
		}
		for id, want := range tc.want {
			if got := d.Size(id); got != want {
				t.Errorf("%s: Size(%v) = %d, want %d", tc.name, id, got, want)
			}
		}
	}
}

func TestPlan(t *testing.T) {
	base, incr, temp := FileID{Ino: 1, Birth: 1}, FileID{Ino: 2, Birth: 2}, FileID{Ino: 3, Birth: 3}
	d := Durable{}
	d.Add(Sync{Began: 1, File: base, Size: 89})
	d.Add(Sync{Began: 2, File: incr, Size: 78})
	for _, tc := range []struct {
		name  string
		files []File
		want  []Cut
	}{
		{"all synced", []File{{"a/base.rdb", base, 89}, {"a/incr.aof", incr, 78}}, nil},
		{"unsynced tail", []File{{"a/base.rdb", base, 89}, {"a/incr.aof", incr, 134}},
			[]Cut{{Path: "a/incr.aof", Size: 134, Durable: 78}}},
		// A file never synced since it was created loses everything, also
		// when it was renamed over a synced one (which is another file).
		{"never synced", []File{{"a/incr.aof", temp, 50}}, []Cut{{Path: "a/incr.aof", Size: 50, Durable: 0}}},
		{"empty and never synced", []File{{"a/new.aof", temp, 0}}, nil},
		// A synced file renamed keeps what was synced of it.
		{"renamed after its sync", []File{{"a/renamed.rdb", base, 100}}, []Cut{{Path: "a/renamed.rdb", Size: 100, Durable: 89}}},
		// Truncated since its last sync: nothing to cut.
		{"shorter than synced", []File{{"a/incr.aof", incr, 10}}, nil},
	} {
		got := Plan(tc.files, d)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Plan = %v, want %v", tc.name, got, tc.want)
		}
	}
	cuts := []Cut{{Path: "x", Size: 134, Durable: 78}, {Path: "y", Size: 50}}
	if Lost(cuts) != 106 || cuts[0].String() != "x 134->78 (-56B)" {
		t.Errorf("Lost = %d, String = %q", Lost(cuts), cuts[0].String())
	}
}

// Record reads only complete lines, goes on where it stopped, and stops
// for good at a line it cannot read.
func TestRecordFollowsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "syncs.log")
	r := NewRecord(path)
	d, err := r.Update()
	if err != nil || len(d) != 0 {
		t.Fatalf("no record yet: %v, %v", d, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	write := func(s string) {
		t.Helper()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	id := FileID{Dev: unix.Mkdev(8, 1), Ino: 12, Birth: 99}
	size := func() int64 {
		t.Helper()
		d, err := r.Update()
		if err != nil {
			t.Fatal(err)
		}
		return d.Size(id)
	}
	write("1 8:1 12 99 10 7 /f\n2 8:1 12 99 2")
	if got := size(); got != 10 {
		t.Errorf("after one line and a half: %d, want 10", got)
	}
	write("0 7 /f\n")
	if got := size(); got != 20 {
		t.Errorf("after the second half: %d, want 20", got)
	}
	write("garbage\n")
	if _, err := r.Update(); err == nil || !strings.Contains(err.Error(), "garbage") {
		t.Errorf("bad line: %v", err)
	}
	write("3 8:1 12 99 30 7 /f\n")
	if _, err := r.Update(); err == nil {
		t.Error("a record with a bad line was read on")
	}
}

// Scan identifies files as the shim does, so that a file renamed after its
// sync keeps its record, and Apply cuts what Plan says.
func TestScanAndApply(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "appendonlydir")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("temp-rewrite.aof", "base-synced")
	write("appendonlydir/incr.aof", "synced|unsynced")
	write("appendonlydir/manifest", "never synced")
	files, err := Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]File{}
	for _, f := range files {
		byPath[f.Path] = f
	}
	d := Durable{}
	d.Add(Sync{Began: 1, File: byPath["temp-rewrite.aof"].ID, Size: 11})
	d.Add(Sync{Began: 2, File: byPath["appendonlydir/incr.aof"].ID, Size: 7})
	// The synced temporary file is renamed into place, as a rewrite does.
	if err := os.Rename(filepath.Join(dir, "temp-rewrite.aof"), filepath.Join(sub, "base.rdb")); err != nil {
		t.Fatal(err)
	}
	if files, err = Scan(dir); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	if want := []string{"appendonlydir/base.rdb", "appendonlydir/incr.aof", "appendonlydir/manifest"}; !reflect.DeepEqual(paths, want) {
		t.Fatalf("Scan = %v, want %v", paths, want)
	}
	cuts := Plan(files, d)
	if got := fmt.Sprint(cuts); got != "[appendonlydir/incr.aof 15->7 (-8B) appendonlydir/manifest 12->0 (-12B)]" {
		t.Errorf("Plan = %s", got)
	}
	if err := Apply(dir, cuts); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"base.rdb": "base-synced", "incr.aof": "synced|", "manifest": ""} {
		b, err := os.ReadFile(filepath.Join(sub, name))
		if err != nil || string(b) != want {
			t.Errorf("%s after the cut: %q, %v; want %q", name, b, err, want)
		}
	}
	if err := Apply(dir, []Cut{{Path: "gone", Size: 3}}); err == nil {
		t.Error("Apply of a missing file succeeded")
	}
	if files, err := Scan(filepath.Join(dir, "none")); err != nil || len(files) != 0 {
		t.Errorf("Scan of a missing dir: %v, %v", files, err)
	}
}

// aofOf is a file that logs commands as Redis's AOF does, in RESP.
func aofOf(cmds ...[]string) []byte {
	var b []byte
	for _, c := range cmds {
		b = fmt.Appendf(b, "*%d\r\n", len(c))
		for _, a := range c {
			b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	return b
}

func TestLostHolds(t *testing.T) {
	dir := t.TempDir()
	synced := aofOf([]string{"SELECT", "0"}, []string{"set", "lock", "a", "PXAT", "1700000000000"})
	del := aofOf([]string{"DEL", "lock"})
	set := aofOf([]string{"SET", "lock", "b", "PXAT", "1700000002000"})
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "a.aof"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	all := append(append(append([]byte{}, synced...), del...), set...)
	write(all)
	durable := int64(len(synced))
	for _, tc := range []struct {
		name    string
		cuts    []Cut
		command string
		want    bool
	}{
		{"a lost SET", []Cut{{Path: "a.aof", Size: int64(len(all)), Durable: durable}}, "SET", true},
		{"the lost bytes hold a DEL only", []Cut{{Path: "a.aof", Size: durable + int64(len(del)), Durable: durable}}, "SET", false},
		{"the SET was synced", []Cut{{Path: "a.aof", Size: durable, Durable: 0}}, "DEL", false},
		{"in any case", []Cut{{Path: "a.aof", Size: durable, Durable: 0}}, "set", true},
		{"nothing lost", nil, "SET", false},
		{"any byte", []Cut{{Path: "a.aof", Size: durable + 1, Durable: durable}}, "", true},
		{"a file gone since the scan", []Cut{{Path: "gone.aof", Size: 10}}, "SET", false},
	} {
		got, err := LostHolds(dir, tc.cuts, tc.command)
		if err != nil || got != tc.want {
			t.Errorf("%s: LostHolds = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// WaitForWrite returns once the lost bytes hold the command, after
// AckGrace, and not for another command or a write synced meanwhile; at
// its limit it returns false, and when ctx ends, ctx's error.
func TestWaitForWrite(t *testing.T) {
	dir := t.TempDir()
	set := aofOf([]string{"SET", "lock", "b"})
	if err := os.WriteFile(filepath.Join(dir, "a.aof"), set, 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	plans := 0
	cuts := func(durable int64) func() ([]Cut, error) {
		return func() ([]Cut, error) {
			mu.Lock()
			defer mu.Unlock()
			plans++
			return Plan([]File{{Path: "a.aof", Size: int64(len(set))}}, Durable{{}: {Size: durable}}), nil
		}
	}
	ctx := context.Background()
	found, err := WaitForWrite(ctx, dir, cuts(0), "SET", time.Minute)
	if err != nil || !found || plans != 2 {
		t.Errorf("an unsynced SET: WaitForWrite = %v, %v after %d looks; want true after 2 (the write, and again after the grace)", found, err, plans)
	}
	start := time.Now()
	found, err = WaitForWrite(ctx, dir, cuts(0), "DEL", 30*time.Millisecond)
	if err != nil || found || time.Since(start) < 30*time.Millisecond {
		t.Errorf("no DEL: WaitForWrite = %v, %v after %v; want false at the limit", found, err, time.Since(start))
	}
	found, err = WaitForWrite(ctx, dir, cuts(int64(len(set))), "SET", 30*time.Millisecond)
	if err != nil || found {
		t.Errorf("a synced SET: WaitForWrite = %v, %v; want false", found, err)
	}
	// Synced during the grace: the wait goes on.
	plans = 0
	synced := func() ([]Cut, error) {
		mu.Lock()
		n := plans
		mu.Unlock()
		if n >= 1 {
			return cuts(int64(len(set)))()
		}
		return cuts(0)()
	}
	found, err = WaitForWrite(ctx, dir, synced, "SET", 100*time.Millisecond)
	if err != nil || found || plans < 3 {
		t.Errorf("a SET synced in the grace: WaitForWrite = %v, %v after %d looks; want false at the limit, looking on", found, err, plans)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := WaitForWrite(cctx, dir, cuts(len64(set)), "SET", time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled wait: %v, want context.Canceled", err)
	}
	planErr := errors.New("record unreadable")
	if _, err := WaitForWrite(ctx, dir, func() ([]Cut, error) { return nil, planErr }, "SET", time.Minute); !errors.Is(err, planErr) {
		t.Errorf("a plan that fails: %v, want its error", err)
	}
}

func len64(b []byte) int64 { return int64(len(b)) }

// TestOutcomeJSON pins what `locktest node durable --wait` prints on a
// node's host and the ssh provider's CutPowerOnWrite reads back: its
// field names, and a nil Cuts or an empty Untouched as they print.
func TestOutcomeJSON(t *testing.T) {
	for _, tc := range []struct {
		out  Outcome
		want string
	}{
		{Outcome{Cuts: []Cut{{Path: "appendonly.aof", Size: 15, Durable: 7}}, Found: true},
			`{"cuts":[{"Path":"appendonly.aof","Size":15,"Durable":7}],"found":true}`},
		{Outcome{Cuts: []Cut{}}, `{"cuts":[],"found":false}`},
		{Outcome{Untouched: "the control host gave up the wait"},
			`{"cuts":null,"found":false,"untouched":"the control host gave up the wait"}`},
	} {
		b, err := json.Marshal(tc.out)
		if err != nil || string(b) != tc.want {
			t.Errorf("%+v: got %s (%v), want %s", tc.out, b, err, tc.want)
		}
		var back Outcome
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, tc.out) {
			t.Errorf("%s reads back as %+v (%v), want %+v", b, back, err, tc.out)
		}
	}
}
