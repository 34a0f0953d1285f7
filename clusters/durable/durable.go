// Package durable knows what a node process has made durable, and cuts its
// data files back to that, as a power loss would leave them.
//
// The clock shim (clusters/clockshim), preloaded into a node process
// whose environment names a sync record in EnvFile, appends one line to that
// record after each fsync or fdatasync of a regular file that succeeds: the
// file's identity (device, inode and birth time, which follow it across
// renames) and the size it had when the sync began. A Record follows that
// file as it grows and keeps, for each file, the sync that began last: its
// size is the file's durable size. Plan compares the files a node's data
// directory holds now (Scan) with those sizes and returns the cuts a power
// loss makes — every byte past a file's durable size, the whole of a file
// never synced since it was created — and Apply makes them.
//
// The model is LazyFS's, without FUSE: the page cache loses everything not
// synced and writes nothing back on its own, while file names (creations,
// renames, deletions) stand as the kernel has them. So a file created and
// renamed over another is durable only up to what was synced of it under
// any name; a file rewritten in place after its last sync keeps the new
// bytes up to its durable size.
package durable

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/locktest/locktest/clusters"
)

// EnvFile is the environment variable that names a process's sync record;
// the shim records nothing without it.
const EnvFile = "LOCKTEST_SYNC_FILE"

// FileID identifies a file across renames: its device, its inode, and its
// birth time in ns (0 where the file system keeps none), which tells it from
// a later file that reuses the inode.
type FileID struct {
	Dev   uint64
	Ino   uint64
	Birth int64
}

// Sync is one line of a sync record: a sync of File that succeeded.
type Sync struct {
	// Began is when the sync began, in ns of CLOCK_MONOTONIC.
	Began int64
	File  FileID
	// Size is the file's size when the sync began: what the sync made
	// durable.
	Size int64
	// Pid is the process that synced, and Path where the file was then.
	Pid  int
	Path string
}

// ParseLine reads one line of a sync record, without its newline:
//
//	<began> <major>:<minor> <inode> <birth> <size> <pid> <path>
func ParseLine(line string) (Sync, error) {
	f := strings.SplitN(line, " ", 7)
	if len(f) != 7 {
		return Sync{}, fmt.Errorf("sync record line %q: want 7 fields", line)
	}
	maj, minor, ok := strings.Cut(f[1], ":")
	if !ok {
		return Sync{}, fmt.Errorf("sync record line %q: device %q is not major:minor", line, f[1])
	}
	var errs []error
	num := func(what, text string, bits int, signed bool) int64 {
		var v int64
		var err error
		if signed {
			v, err = strconv.ParseInt(text, 10, bits)
		} else {
			var u uint64
			u, err = strconv.ParseUint(text, 10, bits)
			v = int64(u)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("sync record line %q: %s %q is not a number of %d bits", line, what, text, bits))
		}
		return v
	}
	s := Sync{Began: num("start", f[0], 64, true), Path: f[6]}
	ma, mi := num("device major", maj, 32, false), num("device minor", minor, 32, false)
	s.File.Dev = unix.Mkdev(uint32(ma), uint32(mi))
	ino, err := strconv.ParseUint(f[2], 10, 64)
	if err != nil {
		errs = append(errs, fmt.Errorf("sync record line %q: inode %q is not a number of 64 bits", line, f[2]))
	}
	s.File.Ino = ino
	s.File.Birth = num("birth", f[3], 64, true)
	s.Size = num("size", f[4], 63, false)
	s.Pid = int(num("pid", f[5], 32, false))
	if len(errs) > 0 {
		return Sync{}, errs[0]
	}
	return s, nil
}

// Line renders s as one line of a sync record, with its newline: what
// ParseLine reads. The clock shim writes the same line from C; the sync
// tracer of locktest's node program (clusters/synctrace) writes it with
// Line.
func (s Sync) Line() string {
	return fmt.Sprintf("%d %d:%d %d %d %d %d %s\n", s.Began, unix.Major(s.File.Dev), unix.Minor(s.File.Dev), s.File.Ino, s.File.Birth, s.Size, s.Pid, s.Path)
}

// StatFD reads the identity and size of the open file fd as stat reads a
// path's: what a sync of fd makes durable, read as the sync begins. It
// says whether the file is a regular file, the only kind a record keeps.
func StatFD(fd int) (FileID, int64, bool, error) {
	var st unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_TYPE|unix.STATX_INO|unix.STATX_SIZE|unix.STATX_BTIME, &st); err != nil {
		return FileID{}, 0, false, err
	}
	id := FileID{Dev: unix.Mkdev(st.Dev_major, st.Dev_minor), Ino: st.Ino}
	if st.Mask&unix.STATX_BTIME != 0 {
		id.Birth = st.Btime.Sec*1e9 + int64(st.Btime.Nsec)
	}
	return id, int64(st.Size), st.Mode&unix.S_IFMT == unix.S_IFREG, nil
}

// Durable holds, for each file, the sync that began last among those
// recorded: its Size is what the file is sure to keep through a power
// loss. (A sync that began later guarantees everything written before it
// began, so it wins also over an earlier sync that ended later, and also
// when the file shrank in between.)
type Durable map[FileID]Sync

// Add takes s into d.
func (d Durable) Add(s Sync) {
	if old, ok := d[s.File]; ok && old.Began > s.Began {
		return
	}
	d[s.File] = s
}

// Size is the durable size of file id: 0 for a file never synced.
func (d Durable) Size(id FileID) int64 {
	return d[id].Size // the zero Sync when absent
}

// Record follows one sync record file as the shim appends to it. The zero
// Record is not usable; its methods are safe for concurrent use.
type Record struct {
	path string

	mu      sync.Mutex
	off     int64  // bytes read so far
	tail    []byte // the start of a line not yet complete
	durable Durable
	bad     error // the first line that could not be read
}

// NewRecord returns a Record of the file at path, which need not exist
// yet (a node that has synced nothing has no record).
func NewRecord(path string) *Record {
	return &Record{path: path, durable: Durable{}}
}

// Path is the record file's path.
func (r *Record) Path() string { return r.path }

// Update reads what was appended to the record since the last call and
// returns the durable sizes as of now (a copy). A line that cannot be read
// makes this and every later Update fail: the sizes would be wrong.
func (r *Record) Update() (Durable, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bad != nil {
		return nil, r.bad
	}
	f, err := os.Open(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return clone(r.durable), nil
	}
	if err != nil {
		return nil, fmt.Errorf("sync record: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(r.off, io.SeekStart); err != nil {
		return nil, fmt.Errorf("sync record: %w", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("sync record: %w", err)
	}
	r.off += int64(len(b))
	b = append(r.tail, b...)
	end := bytes.LastIndexByte(b, '\n') + 1
	r.tail = slices.Clone(b[end:])
	for line := range strings.SplitSeq(string(b[:end]), "\n") {
		if line == "" {
			continue
		}
		s, err := ParseLine(line)
		if err != nil {
			r.bad = fmt.Errorf("%s: %w", r.path, err)
			return nil, r.bad
		}
		r.durable.Add(s)
	}
	return clone(r.durable), nil
}

func clone(d Durable) Durable {
	out := make(Durable, len(d))
	for k, v := range d {
		out[k] = v
	}
	return out
}

// File is one regular file of a data directory as it is now.
type File struct {
	// Path is relative to the directory scanned, with slashes.
	Path string
	ID   FileID
	Size int64
}

// Scan returns the regular files under dir (subdirectories included), in
// path order, with their identity and size. A missing dir holds none.
func Scan(dir string) ([]File, error) {
	var out []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // gone meanwhile (a temporary file), or no dir at all
		}
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		f.Path = filepath.ToSlash(rel)
		out = append(out, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", dir, err)
	}
	return out, nil
}

// stat reads the identity and size of the file at p as the shim does, with
// statx.
func stat(p string) (File, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO|unix.STATX_SIZE|unix.STATX_BTIME, &st); err != nil {
		return File{}, &fs.PathError{Op: "statx", Path: p, Err: err}
	}
	id := FileID{Dev: unix.Mkdev(st.Dev_major, st.Dev_minor), Ino: st.Ino}
	if st.Mask&unix.STATX_BTIME != 0 {
		id.Birth = st.Btime.Sec*1e9 + int64(st.Btime.Nsec)
	}
	return File{ID: id, Size: int64(st.Size)}, nil
}

// Cut is what a power loss does to one file: it goes from Size back to
// Durable bytes.
type Cut struct {
	// Path is relative to the data directory, with slashes.
	Path    string
	Size    int64
	Durable int64
}

// Lost is how many bytes the cut loses.
func (c Cut) Lost() int64 { return c.Size - c.Durable }

// FileCuts returns cuts as a clusters.PowerCutter reports them, in their
// order.
func FileCuts(cuts []Cut) []clusters.FileCut {
	out := make([]clusters.FileCut, len(cuts))
	for i, c := range cuts {
		out[i] = clusters.FileCut{Path: c.Path, Size: c.Size, Durable: c.Durable}
	}
	return out
}

// String renders the cut for people: "appendonlydir/a.aof 134->78 (-56B)".
func (c Cut) String() string {
	return fmt.Sprintf("%s %d->%d (-%dB)", c.Path, c.Size, c.Durable, c.Lost())
}

// Plan returns the cuts a power loss makes to files, given what d says is
// durable: one for each file larger than its durable size, which a file
// never synced since it was created has at 0. Files are taken in order.
func Plan(files []File, d Durable) []Cut {
	var out []Cut
	for _, f := range files {
		if keep := d.Size(f.ID); f.Size > keep {
			out = append(out, Cut{Path: f.Path, Size: f.Size, Durable: keep})
		}
	}
	return out
}

// Lost is how many bytes cuts lose in all.
func Lost(cuts []Cut) int64 {
	var n int64
	for _, c := range cuts {
		n += c.Lost()
	}
	return n
}

// Apply truncates each file of cuts, under dir, to its durable size. It
// goes on past a file it cannot cut, and returns every error.
func Apply(dir string, cuts []Cut) error {
	var errs []error
	for _, c := range cuts {
		if err := os.Truncate(filepath.Join(dir, filepath.FromSlash(c.Path)), c.Durable); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// PlanDir returns the cuts a power loss would make now to the files under
// dataDir, given the sync record at record (a missing record: nothing was
// synced). It is Scan and Plan with what the record says, for a caller
// that reads the record once (a host of the ssh provider, where the node
// program runs it for the control host).
func PlanDir(dataDir, record string) ([]Cut, error) {
	d, err := NewRecord(record).Update()
	if err != nil {
		return nil, err
	}
	files, err := Scan(dataDir)
	if err != nil {
		return nil, err
	}
	return Plan(files, d), nil
}

// GrantWrite is the command whose unsynced write a power cut of a Redis
// node waits for (WaitForWrite): every Redis lock is granted by a SET (NX,
// with an expiry).
const GrantWrite = "SET"

// Poll is how often WaitForWrite reads a node's files.
const Poll = 5 * time.Millisecond

// AckGrace is how long WaitForWrite waits, once the node's files hold the
// write it waits for, before it returns: the server writes its log before
// it sends the reply (Redis appends to its AOF, then answers, in the same
// turn of its event loop), and a power cut between the two would lose a
// write nobody was told of. It is short beside the second within which a
// server under appendfsync everysec syncs what it wrote.
const AckGrace = 50 * time.Millisecond

// LostHolds says whether the bytes that cuts would lose, of the files
// under dir, hold a command named command, as an append-only file that
// logs commands in RESP (Redis's AOF) writes it: "$3\r\nSET\r\n", in any
// case. An empty command matches any lost byte. At most the last MiB of
// each cut is read.
func LostHolds(dir string, cuts []Cut, command string) (bool, error) {
	if command == "" {
		return Lost(cuts) > 0, nil
	}
	want := []byte(fmt.Sprintf("$%d\r\n%s\r\n", len(command), strings.ToUpper(command)))
	for _, c := range cuts {
		from := max(c.Durable, c.Size-1<<20)
		if c.Size <= from {
			continue
		}
		f, err := os.Open(filepath.Join(dir, filepath.FromSlash(c.Path)))
		if errors.Is(err, fs.ErrNotExist) {
			continue // gone since the scan (a rewrite's temporary file)
		}
		if err != nil {
			return false, err
		}
		b := make([]byte, c.Size-from)
		n, err := f.ReadAt(b, from)
		f.Close()
		if err != nil && !errors.Is(err, io.EOF) {
			return false, fmt.Errorf("read %s: %w", c.Path, err)
		}
		if bytes.Contains(bytes.ToUpper(b[:n]), want) {
			return true, nil
		}
	}
	return false, nil
}

// WaitForWrite waits, for at most limit, until the files under dir hold a
// write of command that a power cut would lose now (plan returns the cuts
// it would make; LostHolds reads them), then for AckGrace, and returns
// true if they still hold one. It returns false at the limit, and ctx's
// error when ctx ends first. It reads the files every Poll, on the host
// that has them, so that the cut that follows comes within milliseconds
// of the write: a write under appendfsync everysec stays unsynced for at
// most a second or so.
func WaitForWrite(ctx context.Context, dir string, plan func() ([]Cut, error), command string, limit time.Duration) (bool, error) {
	deadline := time.Now().Add(limit)
	holds := func() (bool, error) {
		cuts, err := plan()
		if err != nil {
			return false, err
		}
		return LostHolds(dir, cuts, command)
	}
	for {
		ok, err := holds()
		if err != nil {
			return false, err
		}
		if ok {
			if err := sleepCtx(ctx, AckGrace); err != nil {
				return false, err
			}
			if ok, err := holds(); ok || err != nil {
				return ok, err
			}
			// Synced in the grace: wait for the next one.
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		if err := sleepCtx(ctx, min(Poll, left)); err != nil {
			return false, err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
