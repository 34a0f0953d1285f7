package workloads

import (
	"fmt"
	"strings"
	"testing"
)

// TestEventRing writes lines into a ring the way a worker does and reads
// them the way the pool does: in order, across the end of the data area,
// up to a full ring and no further, and never a line that was not
// published whole.
func TestEventRing(t *testing.T) {
	drv, err := newEventRing(7)
	if err != nil {
		t.Fatal(err)
	}
	defer drv.close()
	wrk, err := mapRing(drv.file) // the worker's own mapping of the same memory
	if err != nil {
		t.Fatal(err)
	}
	defer wrk.close()

	read := func() []string {
		t.Helper()
		var got []string
		n, err := drv.read(func(l []byte) { got = append(got, string(l)) })
		if err != nil {
			t.Fatal(err)
		}
		if n != len(got) {
			t.Fatalf("read says %d lines, gave %d", n, len(got))
		}
		return got
	}
	if got := read(); len(got) != 0 {
		t.Fatalf("empty ring read %q", got)
	}

	// Lines of 100 bytes: 2,621.44 of them fill the ring, so the data
	// area's end falls inside a line on the third round.
	line := func(i int) string { return fmt.Sprintf("%-99s", fmt.Sprintf(`{"op":%d}`, i)) }
	next := 0
	for round := range 3 {
		var want []string
		for i := 0; i < ringSize/100/2; i++ {
			l := line(next)
			next++
			if !wrk.write([]byte(l + "\n")) {
				t.Fatalf("round %d: line %d did not fit a ring half full", round, i)
			}
			want = append(want, l)
		}
		got := read()
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("round %d: read %d lines, want %d; first %q, want %q", round, len(got), len(want), got[0], want[0])
		}
	}

	// A full ring takes nothing more, and what it holds reads whole.
	written := 0
	for wrk.write([]byte(line(written) + "\n")) {
		written++
	}
	if want := ringSize / 100; written != want {
		t.Errorf("a ring of %d bytes took %d lines of 100, want %d", ringSize, written, want)
	}
	if got := read(); len(got) != written || got[written-1] != line(written-1) {
		t.Errorf("full ring read %d lines, want %d", len(got), written)
	}
	if !wrk.write([]byte(line(0) + "\n")) {
		t.Error("a ring read empty takes no more lines")
	}
	read()

	// A worker stopped after writing bytes but before moving tail has
	// published nothing.
	tail := wrk.tail.Load()
	copy(wrk.data[tail%ringSize:], "half a li")
	if got := read(); len(got) != 0 {
		t.Errorf("unpublished bytes were read: %q", got)
	}
	// A tail that moved over part of a line is a broken worker: an error,
	// not a line.
	wrk.tail.Store(tail + 4)
	if _, err := drv.read(func([]byte) {}); err == nil || !strings.Contains(err.Error(), "part of a line") {
		t.Errorf("a tail inside a line: err %v, want part of a line", err)
	}
	wrk.tail.Store(drv.head.Load() + 2*ringSize)
	if _, err := drv.read(func([]byte) {}); err == nil || !strings.Contains(err.Error(), "more than the ring") {
		t.Errorf("a tail a ring ahead: err %v, want more than the ring", err)
	}
}

// TestOpenEventRingRefusesAForeignFile checks that a worker given a
// descriptor that is no ring says so rather than writing into it.
func TestOpenEventRingRefusesAForeignFile(t *testing.T) {
	f, err := newEventRing(1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	if err := f.file.Truncate(100); err != nil {
		t.Fatal(err)
	}
	if _, err := mapRing(f.file); err == nil || !strings.Contains(err.Error(), "want") {
		t.Errorf("a 100-byte file mapped as a ring: err %v", err)
	}
}
