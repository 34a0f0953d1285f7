package workloads

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// eventRing is a single-producer, single-consumer ring of op events in
// memory that a worker and the driver share: the worker writes the lines
// of its op events into it (no system call, no wake-up of the driver), and
// the driver reads them every ringPoll, or at once before it handles
// anything else the worker sends. This is the path of every op event;
// stdout carries the rest of the protocol, and an op event only when the
// ring is full.
//
// The memory is a memfd the driver creates and passes to the worker as
// an extra file; it outlives the worker, so every event the worker
// published before it was killed is still read. Its first 64 bytes hold
// two counters, each on its own cache line's half: tail, the bytes the
// worker has published, and head, the bytes the driver has consumed. Both
// only grow; the data is at offset (counter mod size) of the data area. A
// worker publishes whole lines only (it moves tail after writing them),
// so a worker stopped or killed mid-write leaves nothing half-read.
type eventRing struct {
	mem  []byte // the whole mapping
	data []byte // mem[ringHeader:]
	tail *atomic.Uint64
	head *atomic.Uint64
	file *os.File // the memfd; set on the driver's side
	buf  []byte   // the driver's scratch for lines that wrap
}

const (
	// ringHeader is the size of the counters' area.
	ringHeader = 64
	// ringSize is the data area of a worker's ring: at 200 bytes an event,
	// about 1,300 events, several hundred ms of one worker's ops.
	ringSize = 256 << 10
	// ringFD is the file descriptor a worker finds its ring on (the
	// first of exec.Cmd's ExtraFiles).
	ringFD = 3
)

// newEventRing creates a ring for process on the driver's side.
func newEventRing(process int) (*eventRing, error) {
	fd, err := unix.MemfdCreate(fmt.Sprintf("locktest-events-p%d", process), unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("event ring: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("events-p%d", process))
	if err := f.Truncate(ringHeader + ringSize); err != nil {
		f.Close()
		return nil, fmt.Errorf("event ring: %w", err)
	}
	r, err := mapRing(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.file = f
	return r, nil
}

// openEventRing maps the ring the driver passed on fd, on the worker's
// side.
func openEventRing(fd int) (*eventRing, error) {
	f := os.NewFile(uintptr(fd), "events")
	if f == nil {
		return nil, fmt.Errorf("event ring: no file descriptor %d", fd)
	}
	defer f.Close() // the mapping stays
	return mapRing(f)
}

func mapRing(f *os.File) (*eventRing, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("event ring: %w", err)
	}
	if st.Size() != ringHeader+ringSize {
		return nil, fmt.Errorf("event ring: %d bytes, want %d", st.Size(), ringHeader+ringSize)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, ringHeader+ringSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("event ring: mmap: %w", err)
	}
	return &eventRing{mem: mem, data: mem[ringHeader:],
		tail: (*atomic.Uint64)(unsafe.Pointer(&mem[0])),
		head: (*atomic.Uint64)(unsafe.Pointer(&mem[32]))}, nil
}

// write publishes b, which must be whole lines, and reports whether it
// fitted; when it did not, nothing was written.
func (r *eventRing) write(b []byte) bool {
	tail, head := r.tail.Load(), r.head.Load()
	if uint64(len(b)) > ringSize-(tail-head) {
		return false
	}
	at := int(tail % ringSize)
	n := copy(r.data[at:], b)
	copy(r.data, b[n:])
	r.tail.Store(tail + uint64(len(b)))
	return true
}

// read calls line for each line published since the last read, in order,
// without its newline; line must not keep the slice. It returns the
// number of lines, or an error when the ring holds something that is not
// whole lines (a worker that wrote past its ring).
func (r *eventRing) read(line func([]byte)) (int, error) {
	tail, head := r.tail.Load(), r.head.Load()
	if tail < head || tail-head > ringSize {
		return 0, fmt.Errorf("event ring: tail %d and head %d are %d bytes apart, more than the ring", tail, head, int64(tail-head))
	}
	if tail == head {
		return 0, nil
	}
	at, n := int(head%ringSize), int(tail-head)
	chunk := r.data[at:min(at+n, ringSize)]
	if len(chunk) < n { // wrapped: join the two pieces
		r.buf = append(append(r.buf[:0], chunk...), r.data[:n-len(chunk)]...)
		chunk = r.buf
	}
	if chunk[len(chunk)-1] != '\n' {
		return 0, errors.New("event ring: the worker published part of a line")
	}
	lines := 0
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		line(chunk[:i])
		chunk = chunk[i+1:]
		lines++
	}
	r.head.Store(tail)
	return lines, nil
}

// close unmaps the ring and, on the driver's side, closes its memfd.
func (r *eventRing) close() error {
	err := unix.Munmap(r.mem)
	if r.file != nil {
		err = errors.Join(err, r.file.Close())
	}
	return err
}
