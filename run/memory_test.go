package run

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFitMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	if err := os.WriteFile(path, make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	free := func(n uint64) func() (uint64, error) { return func() (uint64, error) { return n, nil } }

	// Too little free: refused, with what and where, and the limit untouched.
	debug.SetMemoryLimit(math.MaxInt64)
	err := fitMemory(path, free(2999))
	var me *MemoryError
	if !errors.As(err, &me) || me.Size != 1000 || me.Need != 3000 || me.Free != 2999 {
		t.Fatalf("fitMemory with 2999 bytes free = %v, want a MemoryError of 1000, 3000, 2999", err)
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

	// Nothing to measure: left to the reader.
	if err := fitMemory(filepath.Join(t.TempDir(), "none"), free(0)); err != nil {
		t.Errorf("fitMemory of a missing file: %v", err)
	}
	if err := fitMemory(path, func() (uint64, error) { return 0, errors.New("no /proc") }); err != nil {
		t.Errorf("fitMemory without free memory figures: %v", err)
	}
}
