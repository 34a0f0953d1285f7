// Package clockrate builds a Go program whose monotonic clock, and every
// timer and sleep that runs on it, can be made to run at a rate other than
// the real one while the program runs: a client clock that runs fast or
// slow by a factor, which no offset of the wall clock (the clock shim,
// clock-skew-client) can give and no LD_PRELOAD shim can reach in a Go
// program, whose runtime reads the clock through the vDSO.
//
// The program's own code, and the libraries it links, run unchanged: the
// build swaps two files of the Go runtime for patched copies (go build
// -overlay) made from the installed Go's own sources by Overlay.
//
//   - runtime/time_nofake.go: nanotime, the monotonic clock under
//     time.Now's monotonic reading, time.Since, time.Sleep and every
//     timer, returns off + (real - base) × rate once a rate is set; a new
//     rate starts from the clock's reading at the change, so the clock
//     never goes back. setClockRate, reached by linkname from the package
//     rate, sets it.
//   - runtime/time.go: time.Now's monotonic reading comes from nanotime
//     once a rate is set (on linux/amd64 time.now reads the vDSO in
//     assembly, past nanotime), so that a time.Time and time.Since agree.
//   - runtime/netpoll_epoll.go: the scheduler waits for its next timer in
//     netpoll with a delay measured on that clock; the patch turns it into
//     real time (delay / rate), so a timer of d fires after d / rate of
//     real time, as it would on a clock that runs at that rate.
//
// The wall clock (time.Now's wall reading, time.Now().Unix()) does not run
// at the rate: what runs at the rate is the clock a Go program measures
// durations, leases and timeouts with. The wall reading can instead be
// moved by an offset (setClockWallOffset, rate.SetWall), as a change of
// the system's time (date -s) moves it, for this one program: its
// monotonic clock stays where it is, as it does on such a change.
//
// A program built so (BuildFlags) imports clockrate/rate and calls
// rate.Set or rate.SetWall on a fault's order; built without them, both
// return ErrNotBuilt.
package clockrate

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Tag is the build tag under which package rate links the patched
// runtime's setter.
const Tag = "locktest_clockrate"

// patch is one change to a file of the runtime: old must appear exactly
// once in it, and is replaced by new.
type patch struct {
	file, old, new string
}

var patches = []patch{
	{"time_nofake.go", `func nanotime() int64 {
	return nanotime1()
}`, `func nanotime() int64 {
	t := nanotime1()
	if s := (*clockRateState)(atomic.Loadp(unsafe.Pointer(&clockRate))); s != nil {
		return s.off + int64(float64(t-s.base)*s.rate)
	}
	return t
}

// clockRateState makes the monotonic clock read off + (real - base) ×
// rate; it lives in persistent memory, out of the garbage collector's
// reach, and is replaced whole at a change of rate.
type clockRateState struct {
	rate      float64
	base, off int64
}

// clockRate is the *clockRateState in force, nil for the real rate.
var clockRate unsafe.Pointer

// setClockRate makes the monotonic clock run at rate times the real one
// from now on, starting from its reading now. One caller at a time.
//
//go:linkname setClockRate
func setClockRate(rate float64) {
	t := nanotime1()
	off := t
	if s := (*clockRateState)(atomic.Loadp(unsafe.Pointer(&clockRate))); s != nil {
		off = s.off + int64(float64(t-s.base)*s.rate)
	}
	s := (*clockRateState)(persistentalloc(unsafe.Sizeof(clockRateState{}), 8, &memstats.other_sys))
	s.rate, s.base, s.off = rate, t, off
	atomic.StorepNoWB(unsafe.Pointer(&clockRate), unsafe.Pointer(s))
}

// clockWallOff is added, in ns, to time.Now's wall reading.
var clockWallOff int64

// setClockWallOffset makes time.Now's wall reading off ns away from the
// real wall clock from now on, as a change of the system's time would,
// for this program only; 0 is the real wall clock again.
//
//go:linkname setClockWallOffset
func setClockWallOffset(off int64) {
	atomic.Storeint64(&clockWallOff, off)
}`},
	{"time_nofake.go", `import "unsafe"`, `import (
	"internal/runtime/atomic"
	"unsafe"
)`},
	{"time.go", `	return time_now()
}`, `	sec, nsec, mono = time_now()
	if atomic.Loadp(unsafe.Pointer(&clockRate)) != nil {
		// time.now is assembly on linux/amd64 and reads the real clock.
		mono = nanotime()
	}
	if off := atomic.Loadint64(&clockWallOff); off != 0 {
		ns := sec*1e9 + int64(nsec) + off
		sec, nsec = ns/1e9, int32(ns%1e9)
		if nsec < 0 {
			sec, nsec = sec-1, nsec+1e9
		}
	}
	return sec, nsec, mono
}`},
	{"netpoll_epoll.go", `	var waitms int32
	if delay < 0 {`, `	var waitms int32
	if s := (*clockRateState)(atomic.Loadp(unsafe.Pointer(&clockRate))); s != nil && delay > 0 {
		// delay is on the clock that runs at the rate; the wait is real.
		delay = int64(float64(delay) / s.rate)
	}
	if delay < 0 {`},
}

// Patched returns the names of the runtime files Overlay writes, in the
// order of their first patch.
func Patched() []string {
	var out []string
	for _, p := range patches {
		if !slices.Contains(out, p.file) {
			out = append(out, p.file)
		}
	}
	return out
}

// Overlay writes the patched runtime files of the Go installation at
// goroot into dir, and the overlay file that swaps them in (go build
// -overlay) as dir/overlay.json, whose path it returns. A runtime file
// that is missing, or that lacks the text a patch replaces (another Go
// version), is an error naming it: the build must not silently run at
// the real rate. The overlay also swaps in each of extra, which maps a
// file of the program's own sources (its absolute path; a file that is
// not there is added) to the text the build reads in its place, written
// into dir beside the runtime's (nil: none).
func Overlay(goroot, dir string, extra map[string]string) (string, error) {
	files := map[string]string{}
	for _, p := range patches {
		src := filepath.Join(goroot, "src", "runtime", p.file)
		text, ok := files[src]
		if !ok {
			b, err := os.ReadFile(src)
			if err != nil {
				return "", fmt.Errorf("clock rate: %v", err)
			}
			text = string(b)
		}
		if n := strings.Count(text, p.old); n != 1 {
			return "", fmt.Errorf("clock rate: %s holds the text to patch %d times, want once: this Go's runtime is not the one the patch was written for", src, n)
		}
		files[src] = strings.Replace(text, p.old, p.new, 1)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("clock rate: %v", err)
	}
	replace := map[string]string{}
	for src, text := range files {
		dst := filepath.Join(dir, filepath.Base(src))
		if err := os.WriteFile(dst, []byte(text), 0o644); err != nil {
			return "", fmt.Errorf("clock rate: %v", err)
		}
		replace[src] = dst
	}
	n := 0
	for _, src := range slices.Sorted(maps.Keys(extra)) {
		if _, ok := replace[src]; ok || !filepath.IsAbs(src) {
			return "", fmt.Errorf("clock rate: the overlay cannot swap in %s: want an absolute path, not a runtime file", src)
		}
		n++
		dst := filepath.Join(dir, fmt.Sprintf("extra%d-%s", n, filepath.Base(src)))
		if err := os.WriteFile(dst, []byte(extra[src]), 0o644); err != nil {
			return "", fmt.Errorf("clock rate: %v", err)
		}
		replace[src] = dst
	}
	b, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", fmt.Errorf("clock rate: %v", err)
	}
	return path, nil
}

// BuildFlags are the go build flags of a program whose clock rate can be
// set, with overlay the file Overlay wrote: the overlay, the build tag of
// package rate, and the linker's leave to let rate reach the runtime's
// setter by linkname.
func BuildFlags(overlay string) []string {
	return []string{"-overlay", overlay, "-tags", Tag, "-ldflags=-checklinkname=0"}
}
