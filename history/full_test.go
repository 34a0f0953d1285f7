package history

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestWriterOnAFullDiskKeepsWholeLines writes a history onto a tmpfs of
// 16 KiB until it is full. The first failed write must cut off the part of
// a line it wrote, end the file there (no later op is written, though there
// may be room for a short one), and be returned by Record once, by Close,
// and by the recorder's SinkErr, which say how many ops the file keeps; the
// recorder keeps every op in memory.
func TestWriterOnAFullDiskKeepsWholeLines(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=16k"); err != nil {
		t.Skipf("cannot mount a tmpfs (root needed): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	path := filepath.Join(dir, "history.jsonl")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(w)
	long := strings.Repeat("x", 300) // ops of about 400 bytes: a page is not a whole number of them
	var first error
	n := 0
	for ; n < 1000; n++ {
		typ := Invoke
		if n%2 == 1 {
			typ = OK
		}
		_, err := r.Record(Op{Type: typ, Process: 0, F: Acquire, Time: int64(n), Value: Value{Lock: "l", LockValue: long}})
		if err != nil {
			if first != nil {
				t.Fatalf("op %d: a second error %v; the first was %v", n, err, first)
			}
			first = err
		}
		// After the failure, ops short enough for the room left must not be
		// written either: the file would have a hole.
		if first != nil && n%2 == 1 {
			if _, err := r.Record(Op{Type: Invoke, Process: 1, F: Acquire, Time: int64(n), Value: Value{Lock: "l"}}); err != nil {
				t.Fatalf("op after the failure: %v", err)
			}
			if _, err := r.Record(Op{Type: Fail, Process: 1, F: Acquire, Time: int64(n), Value: Value{Lock: "l"}}); err != nil {
				t.Fatalf("op after the failure: %v", err)
			}
		}
	}
	if first == nil || !errors.Is(first, syscall.ENOSPC) {
		t.Fatalf("first error %v, want ENOSPC", first)
	}
	if r.Len() <= n {
		t.Errorf("the recorder counted %d ops, want all %d and more", r.Len(), n)
	}
	kept := r.History() // the ops the file could not take
	if err := r.SinkErr(); err == nil || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("SinkErr = %v", err)
	}
	cerr := w.Close()
	if cerr == nil || !errors.Is(cerr, syscall.ENOSPC) {
		t.Fatalf("Close = %v, want the write error", cerr)
	}
	h, err := ReadFile(path)
	if err != nil {
		t.Fatalf("the file of a full disk: %v", err)
	}
	m := regexp.MustCompile(`keeps its first (\d+) ops`).FindStringSubmatch(cerr.Error())
	if m == nil || m[1] != strconv.Itoa(len(h)) || len(h) == 0 {
		t.Errorf("error %q, file of %d ops", cerr, len(h))
	}
	for i, op := range h {
		if op.Process != 0 || op.Time != int64(i) {
			t.Fatalf("op %d of the file is %s: not a prefix of what was recorded", i, op)
		}
	}
	// Nothing is lost: what the file lacks, the recorder kept.
	if len(h)+len(kept) != r.Len() {
		t.Errorf("the file has %d ops and the recorder kept %d, of %d recorded", len(h), len(kept), r.Len())
	}
	for i, op := range kept {
		if op.Index != len(h)+i {
			t.Fatalf("kept op %d has index %d, want %d: not the rest of the history", i, op.Index, len(h)+i)
		}
	}
	b, _ := os.ReadFile(path)
	if len(b) == 0 || b[len(b)-1] != '\n' {
		t.Errorf("the file does not end with a whole line")
	}
}
