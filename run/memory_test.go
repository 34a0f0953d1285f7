package run

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
)

func TestFitMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	if err := os.WriteFile(path, make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	defer func(f func() (uint64, error)) { memAvailable = f }(memAvailable)
	fitMemory := func(path string, available func() (uint64, error)) error {
		memAvailable = available
		return FitMemory(path)
	}
	free := func(n uint64) func() (uint64, error) { return func() (uint64, error) { return n, nil } }

	// Too little free: refused, with what and where, and the limit untouched.
	debug.SetMemoryLimit(math.MaxInt64)
	const need = 1000 * CheckBytesPerFileByte
	err := fitMemory(path, free(need-1))
	var me *MemoryError
	if !errors.As(err, &me) || me.Size != 1000 || me.Need != need || me.Free != need-1 {
		t.Fatalf("fitMemory with %d bytes free = %v, want a MemoryError of 1000, %d, %d", need-1, err, need, need-1)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "locktest check "+filepath.Dir(path)) {
		t.Errorf("the error %q names neither the history nor how to check it", err)
	}
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		t.Errorf("a refused history set the memory limit to %d", l)
	}

	// Enough: the soft limit comes down to about what is free.
	if err := fitMemory(path, free(1<<30)); err != nil {
		t.Fatalf("fitMemory with 1 GiB free: %v", err)
	}
	if l := debug.SetMemoryLimit(-1); l < 1<<30/10*9 || l > 2<<30 {
		t.Errorf("memory limit %d, want about 0.9 GiB above what Go holds", l)
	}

	// A limit the user set is kept.
	debug.SetMemoryLimit(5 << 30)
	if err := fitMemory(path, free(1<<30)); err != nil || debug.SetMemoryLimit(-1) != 5<<30 {
		t.Errorf("fitMemory changed the user's GOMEMLIMIT (err %v)", err)
	}

	// A big history's check runs the collector more often, unless GOGC
	// says otherwise; a small one's is left alone.
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	if err := fitMemory(path, free(1<<30)); err != nil || debug.SetGCPercent(100) != 100 {
		t.Errorf("fitMemory of a small history changed GOGC (err %v)", err)
	}
	big := filepath.Join(t.TempDir(), "big.jsonl")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, bigHistory); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	if err := fitMemory(big, free(1<<40)); err != nil || debug.SetGCPercent(100) != checkGCPercent {
		t.Errorf("fitMemory of a %d-byte history left GOGC alone (err %v), want %d", bigHistory, err, checkGCPercent)
	}
	t.Setenv("GOGC", "80")
	if err := fitMemory(big, free(1<<40)); err != nil || debug.SetGCPercent(100) != 100 {
		t.Errorf("fitMemory changed GOGC although the GOGC variable was set (err %v)", err)
	}

	// Nothing to measure: left to the reader.
	if err := fitMemory(filepath.Join(t.TempDir(), "none"), free(0)); err != nil {
		t.Errorf("fitMemory of a missing file: %v", err)
	}
	if err := fitMemory(path, func() (uint64, error) { return 0, errors.New("no /proc") }); err != nil {
		t.Errorf("fitMemory without free memory figures: %v", err)
	}
}

// A run whose history is too large for the free memory is left unchecked:
// recorded reads nothing and says why, so the verdict cannot be valid.
func TestRecordedRefusesAHistoryTooLargeToCheck(t *testing.T) {
	dir := t.TempDir()
	h := history.History{
		{Index: 0, Type: history.Invoke, Process: 0, F: history.Acquire, Time: 1, Value: history.Value{Lock: "l"}},
		{Index: 1, Type: history.Fail, Process: 0, F: history.Acquire, Time: 2, Value: history.Value{Lock: "l"}},
	}
	if err := history.WriteFile(filepath.Join(dir, runstore.HistoryFile), h); err != nil {
		t.Fatal(err)
	}
	defer func(f func() (uint64, error)) { memAvailable = f }(memAvailable)
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))

	memAvailable = func() (uint64, error) { return 10, nil }
	got, err := recorded(dir, history.NewRecorder(nil))
	var me *MemoryError
	if got.Len() != 0 || !errors.As(err, &me) || !strings.Contains(err.Error(), "not checked") {
		t.Fatalf("recorded with 10 bytes free = %d ops, %v; want none and a MemoryError saying it was not checked", got.Len(), err)
	}
	d := checker.Decide(context.Background(), got, checker.RunFacts{Errors: []string{err.Error()}}, 0)
	if d.Valid == checker.Valid {
		t.Errorf("an unchecked run decided valid")
	}

	memAvailable = func() (uint64, error) { return 1 << 30, nil }
	if got, err := recorded(dir, history.NewRecorder(nil)); err != nil || got.Len() != len(h) {
		t.Errorf("recorded with 1 GiB free = %d ops, %v; want %d", got.Len(), err, len(h))
	}
}
