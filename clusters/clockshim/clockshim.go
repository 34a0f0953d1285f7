// Package clockshim moves the wall clock of node processes without touching
// the host's clock. It compiles csrc/shim.c (an LD_PRELOAD library that adds an
// offset to CLOCK_REALTIME, gettimeofday and time by raw system calls) with
// the system C compiler into a cache directory on first use, and manages the
// per-node offset files the library maps: a Clocks sets a node's offset with
// one atomic store into the shared mapping, visible to the node at its next
// clock read.
//
// The same mapping carries a sync delay: a Clocks's SetSyncDelay makes
// every fsync and fdatasync of the node begin that late, from its next
// sync on (and releases a sync already waiting, within 10 ms, when it
// clears the delay), for the slow-disk fault; EnvSyncDelay does the same
// for a process's whole life.
//
// The same library records, for the power-loss fault, what a node has made
// durable: with durable.EnvFile in its environment, a process appends a
// line to that file after each fsync or fdatasync of a regular file that
// succeeds (package durable reads it).
//
// Processes that read the wall clock without libc — Go programs such as the
// embedded etcd member — are not moved by the shim; clock faults on them are
// not applicable, which is itself a finding of the debate. They sync without
// libc too, so the shim cannot slow their syncs either.
package clockshim

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

//go:embed csrc/shim.c
var source []byte

// EnvFile is the variable naming a process's offset file.
const EnvFile = "LOCKTEST_CLOCK_FILE"

// EnvSyncDelay is the variable that makes every fsync and fdatasync of a
// process under the shim begin that many milliseconds late (decimal digits,
// at most 600000): a slow disk, made exact, for a test that needs a sync in
// progress for a known time. Unset or 0 delays nothing. With a sync delay
// set in the node's mapping too (Clocks.SetSyncDelay), a sync waits the
// longer of the two.
const EnvSyncDelay = "LOCKTEST_SYNC_DELAY_MS"

// MaxSyncDelay is the longest sync delay SetSyncDelay takes (and the
// longest EnvSyncDelay's, 600000 ms).
const MaxSyncDelay = 10 * time.Minute

// The words of a node's mapped file: its clock offset, and its sync delay,
// each a signed 64-bit count of nanoseconds (csrc/shim.c reads them).
const (
	offsetWord    = 0
	syncDelayWord = 8
)

// CacheDir returns where the compiled library is kept:
// $XDG_CACHE_HOME/locktest or ~/.cache/locktest.
func CacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "locktest"), nil
}

var buildMu sync.Mutex

// Build returns the path of the compiled shim in cacheDir ("" means
// CacheDir()), compiling it with cc (or gcc) if the cache has no library of
// this exact source. It is safe to call from concurrent processes: the
// library is written to a temporary name and renamed into place.
func Build(ctx context.Context, cacheDir string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if cacheDir == "" {
		d, err := CacheDir()
		if err != nil {
			return "", fmt.Errorf("clock shim: %w", err)
		}
		cacheDir = d
	}
	sum := sha256.Sum256(source)
	lib := filepath.Join(cacheDir, "clockshim-"+hex.EncodeToString(sum[:8])+".so")
	if _, err := os.Stat(lib); err == nil {
		return lib, nil
	}
	cc, err := compiler()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("clock shim: %w", err)
	}
	tmp, err := os.MkdirTemp(cacheDir, "build-")
	if err != nil {
		return "", fmt.Errorf("clock shim: %w", err)
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "shim.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return "", fmt.Errorf("clock shim: %w", err)
	}
	out := filepath.Join(tmp, "shim.so")
	cmd := exec.CommandContext(ctx, cc, "-shared", "-fPIC", "-O2", "-Wall", "-o", out, src)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("clock shim: %s failed: %v: %s", cc, err, msg)
	}
	if err := os.Rename(out, lib); err != nil {
		return "", fmt.Errorf("clock shim: %w", err)
	}
	return lib, nil
}

// compiler finds the C compiler, or says how to get one.
func compiler() (string, error) {
	for _, c := range []string{os.Getenv("CC"), "cc", "gcc"} {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p, nil
		}
	}
	return "", errors.New("the clock shim, which clock faults and power-loss need, is built with a C compiler, and there is none: run `make setup` (installs gcc)")
}

// Clocks holds the offset files of a run's nodes, one per node, under a
// directory. Its methods are safe for concurrent use.
type Clocks struct {
	lib string
	dir string

	mu    sync.Mutex
	files map[string]*offsetFile
}

type offsetFile struct {
	path string
	mem  []byte
}

// word returns the 64-bit word of the mapping at byte offset at.
func (f *offsetFile) word(at int) *int64 {
	return (*int64)(unsafe.Pointer(&f.mem[at]))
}

// New returns Clocks that keep offset files in dir and preload lib (from
// Build).
func New(lib, dir string) (*Clocks, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("clock shim: %w", err)
	}
	return &Clocks{lib: lib, dir: dir, files: map[string]*offsetFile{}}, nil
}

// Env returns the environment that makes node's process run under the shim
// with its own offset (zero until Set). It creates the node's offset file.
func (c *Clocks) Env(node string) ([]string, error) {
	f, err := c.file(node)
	if err != nil {
		return nil, err
	}
	return []string{"LD_PRELOAD=" + c.lib, EnvFile + "=" + f.path}, nil
}

// Set makes node's wall clock read d ahead of the host's (behind if d < 0).
func (c *Clocks) Set(node string, d time.Duration) error {
	f, err := c.file(node)
	if err != nil {
		return err
	}
	atomic.StoreInt64(f.word(offsetWord), int64(d))
	return nil
}

// Offset returns node's current offset.
func (c *Clocks) Offset(node string) time.Duration {
	f, err := c.file(node)
	if err != nil {
		return 0
	}
	return time.Duration(atomic.LoadInt64(f.word(offsetWord)))
}

// SetSyncDelay makes every fsync and fdatasync of node's processes begin d
// late (d within [0, MaxSyncDelay]; 0 delays nothing), from the next one
// they begin; a sync already waiting waits for the delay then in force,
// counted from its own start, which it reads again every 10 ms. The
// processes of the node keep it across restarts, as they map the same
// file.
func (c *Clocks) SetSyncDelay(node string, d time.Duration) error {
	if d < 0 || d > MaxSyncDelay {
		return fmt.Errorf("clock shim: sync delay %v of node %s is not within [0, %v]", d, node, MaxSyncDelay)
	}
	f, err := c.file(node)
	if err != nil {
		return err
	}
	atomic.StoreInt64(f.word(syncDelayWord), int64(d))
	return nil
}

// SyncDelay returns node's sync delay as SetSyncDelay set it (0 when
// none).
func (c *Clocks) SyncDelay(node string) time.Duration {
	f, err := c.file(node)
	if err != nil {
		return 0
	}
	return time.Duration(atomic.LoadInt64(f.word(syncDelayWord)))
}

// Reset sets every node's offset back to zero.
func (c *Clocks) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.files {
		atomic.StoreInt64(f.word(offsetWord), 0)
	}
}

// Close resets every offset and sync delay and unmaps the files (they stay
// in dir, as a record of the last offsets).
func (c *Clocks) Close() error {
	c.Reset()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.files {
		atomic.StoreInt64(f.word(syncDelayWord), 0)
	}
	var errs []error
	for n, f := range c.files {
		errs = append(errs, unix.Munmap(f.mem))
		delete(c.files, n)
	}
	return errors.Join(errs...)
}

func (c *Clocks) file(node string) (*offsetFile, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.files[node]; ok {
		return f, nil
	}
	path := filepath.Join(c.dir, node+".clock")
	fd, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("clock shim: %w", err)
	}
	defer fd.Close()
	if err := fd.Truncate(4096); err != nil {
		return nil, fmt.Errorf("clock shim: %w", err)
	}
	mem, err := unix.Mmap(int(fd.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("clock shim: mmap %s: %w", path, err)
	}
	f := &offsetFile{path: path, mem: mem}
	c.files[node] = f
	return f, nil
}
