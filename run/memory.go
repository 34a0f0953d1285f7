package run

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"

	"github.com/locktest/locktest/internal/procfs"
)

// CheckBytesPerFileByte is how much memory checking a history takes per
// byte of its file: the history's compact records (history.Table), the
// checkers' views of it and porcupine's, at their peak. It was measured on
// generated 1M-, 4M- and 10M-op histories (docs/performance.md, "Memory"),
// where the peak RSS was 1.1 to 1.8 times the file, and rounded up.
const CheckBytesPerFileByte = 2

// bigHistory is the size of a history file from which FitMemory has the
// collector run at checkGCPercent: the check then holds hundreds of MB or
// more for seconds, and letting the heap grow to twice that before each
// collection (GOGC=100) would double its peak for a few percent of time.
const bigHistory = 256 << 20

// checkGCPercent is the GOGC of a big history's check: its peak RSS is
// about 1.25 times what is live, for about 10% more time (a 4M-op
// history: 551 MB in 6.96 s, against 859 MB in 6.39 s at GOGC=100).
const checkGCPercent = 25

// MemoryError says that a history is too large to check in the memory the
// machine has free. The history is not touched.
type MemoryError struct {
	Path string
	// Size is the history file's size, Need the memory its check is
	// expected to take, Free what the machine has; all in bytes.
	Size, Need, Free uint64
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("%s (%s) needs about %s of memory to check and %s is free; check it where more is, with `locktest check %s`",
		e.Path, gb(e.Size), gb(e.Need), gb(e.Free), filepath.Dir(e.Path))
}

func gb(n uint64) string { return fmt.Sprintf("%.1f GB", float64(n)/1e9) }

// FitMemory readies this process to check the history at path. It returns
// a *MemoryError, and changes nothing, when the check is expected to need
// more memory than the machine has free (procfs.MemAvailable, which a
// cgroup limit caps). Otherwise it lowers the Go runtime's soft memory
// limit to what is free, unless GOMEMLIMIT set one, so that the garbage
// collector works harder near the limit instead of letting the heap grow
// to twice what is live and the kernel kill the process; and for a history
// of bigHistory bytes or more it sets the collector's GOGC to
// checkGCPercent, unless the GOGC variable set one. A history it cannot
// stat, or a machine whose free memory it cannot read, is left to the
// reader: FitMemory returns nil.
func FitMemory(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return nil
	}
	size := uint64(st.Size())
	free, known, tooLarge := holdable(path, size)
	if !known {
		return nil
	}
	if tooLarge != nil {
		return tooLarge
	}
	if size >= bigHistory && os.Getenv("GOGC") == "" {
		debug.SetGCPercent(checkGCPercent)
	}
	if debug.SetMemoryLimit(-1) != math.MaxInt64 {
		return nil // the user's GOMEMLIMIT
	}
	limit := goMemory() + free/10*9
	if limit < math.MaxInt64 {
		debug.SetMemoryLimit(int64(limit))
	}
	return nil
}

// holdable says whether this machine has the memory to check, holding it,
// a history file of size bytes at path: the free memory (known is false
// when it cannot be read), and the *MemoryError when it is too little.
func holdable(path string, size uint64) (free uint64, known bool, tooLarge *MemoryError) {
	free, err := memAvailable()
	if err != nil {
		return 0, false, nil
	}
	if need := size * CheckBytesPerFileByte; need > free {
		return free, true, &MemoryError{Path: path, Size: size, Need: need, Free: free}
	}
	return free, true, nil
}

// memAvailable is procfs.MemAvailable; tests replace it.
var memAvailable = procfs.MemAvailable

// goMemory is what the Go runtime holds now, in bytes.
func goMemory() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
