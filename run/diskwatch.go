package run

import (
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/locktest/locktest/internal/tick"
	"github.com/locktest/locktest/runstore"
)

// diskEvery is the disk watch's period: a sync every 100 ms is enough to
// see a stall of a quarter second and adds little to the disk's load.
const diskEvery = 100 * time.Millisecond

// diskWatch measures how promptly the disk syncs while the workload runs:
// every diskEvery a goroutine of the driver writes a few bytes to a probe
// file of its own and syncs them (fdatasync), and notes how long the sync
// took. ZooKeeper and etcd sync their logs before they answer a write, so
// a sync that takes a second on this disk holds up every lease renewal
// and every release for as long, with no fault planned. The watch only
// measures; it changes no verdict. Its figures go into results.json
// (runstore.DiskStalls).
type diskWatch struct {
	f     *os.File
	sync  func(*os.File) error // fdatasync; tests slow it down
	now   func() time.Duration // the history's clock
	stop  chan struct{}
	done  chan struct{}
	syncs atomic.Int64
	log   stallLog
}

// startDiskWatch starts a watch that syncs the probe file path (created,
// and removed when the watch finishes) with sync (nil is fdatasync), on
// the clock now. It returns nil,
// and the reason, when the file cannot be made: the run then has no disk
// figures, which says so, and is otherwise unchanged.
func startDiskWatch(path string, now func() time.Duration, sync func(*os.File) error) (*diskWatch, error) {
	if sync == nil {
		sync = fdatasync
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	w := &diskWatch{f: f, now: now, sync: sync, stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w, nil
}

func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

func (w *diskWatch) loop() {
	defer close(w.done)
	buf := make([]byte, 8)
	n := 0
	tick.Until(diskEvery, w.stop, func() bool {
		buf[0] = byte(n)
		n++
		at := w.now()
		if _, err := w.f.WriteAt(buf, 0); err != nil {
			return false
		}
		if err := w.sync(w.f); err != nil {
			return false
		}
		w.syncs.Add(1)
		w.log.note(at, w.now()-at)
		return true
	})
}

// finish stops the watch, removes its probe file and returns what it saw;
// nil for a nil watch.
func (w *diskWatch) finish() *runstore.DiskStalls {
	if w == nil {
		return nil
	}
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	_ = w.f.Close()
	_ = os.Remove(w.f.Name())
	d := &runstore.DiskStalls{Every: diskEvery.String(), Over: stallOver.String(), Syncs: int(w.syncs.Load())}
	d.Count, d.Longest, d.LongestAt, d.Top = w.log.figures()
	return d
}
