package run

import (
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locktest/locktest/runstore"
)

// scriptedSleep is a sleep whose wake-ups come as late as its script
// says, on a clock of its own; when the script is done it closes done and
// wakes on time.
type scriptedSleep struct {
	now    atomic.Int64
	late   []time.Duration
	i      int
	once   sync.Once
	served chan struct{}
}

func (s *scriptedSleep) sleep(d time.Duration) {
	var late time.Duration
	if s.i < len(s.late) {
		late = s.late[s.i]
		s.i++
	} else {
		s.once.Do(func() { close(s.served) })
	}
	s.now.Add(int64(d + late))
}

func (s *scriptedSleep) clock() time.Duration { return time.Duration(s.now.Load()) }

func TestStallWatchKeepsTheLongestStalls(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name string
		late []time.Duration
		want runstore.Stalls
	}{
		{"none", []time.Duration{0, 5 * ms, 249 * ms, 0}, runstore.Stalls{Tick: "10ms", Over: "250ms", Longest: "0s"}},
		{"one", []time.Duration{0, 0, 2700 * ms, 0},
			runstore.Stalls{Tick: "10ms", Over: "250ms", Count: 1, Longest: "2.7s", LongestAt: "20ms",
				Top: []runstore.Stall{{At: "20ms", Length: "2.7s"}}}},
		// Seven stalls: the two shortest leave the top five, which stay in
		// time order; the longest is the third.
		{"seven", []time.Duration{300 * ms, 0, 260 * ms, 2 * time.Second, 400 * ms, 250 * ms, 500 * ms, 0, 350 * ms},
			runstore.Stalls{Tick: "10ms", Over: "250ms", Count: 7, Longest: "2s", LongestAt: "590ms",
				Top: []runstore.Stall{{At: "0s", Length: "300ms"}, {At: "590ms", Length: "2s"}, {At: "2.6s", Length: "400ms"},
					{At: "3.27s", Length: "500ms"}, {At: "3.79s", Length: "350ms"}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &scriptedSleep{late: c.late, served: make(chan struct{})}
			w := startStallWatch(s.clock, s.sleep)
			<-s.served
			got := w.finish()
			if got.P99 == "" {
				t.Error("no p99 lateness")
			}
			got.P99 = "" // how many on-time ticks follow the script is the scheduler's: TestStallLogP99 pins it
			if !reflect.DeepEqual(*got, c.want) {
				t.Errorf("stalls\n got %+v\nwant %+v", *got, c.want)
			}
		})
	}
}

// TestStallLogP99: the lateness 99% of the wake-ups stayed within is the
// upper edge of their bucket, the last edge beyond it.
func TestStallLogP99(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name string
		late []time.Duration
		n    int // how many times late repeats
		want string
	}{
		{"none", nil, 0, ""},
		{"on time", []time.Duration{0, 500 * time.Microsecond}, 100, "1ms"},
		{"1 in 100 at 30 ms", append(make([]time.Duration, 99), 30*ms), 10, "1ms"},
		{"2 in 100 at 30 ms", append(make([]time.Duration, 98), 30*ms, 30*ms), 10, "50ms"},
		{"all at 7 ms", []time.Duration{7 * ms}, 50, "10ms"},
		{"beyond the last edge", []time.Duration{3 * time.Second}, 10, "250ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var l stallLog
			for range c.n {
				for _, d := range c.late {
					l.tick(d)
				}
			}
			if got := l.p99(); got != c.want {
				t.Errorf("p99 %q, want %q", got, c.want)
			}
		})
	}
}

// TestStallWatchSeesARealStall runs the watch on the real clock with a
// time.Sleep that once sleeps 300ms longer than asked, as a loaded
// machine's late wake-up would: the watch must note it.
func TestStallWatchSeesARealStall(t *testing.T) {
	var calls atomic.Int32
	sleep := func(d time.Duration) {
		if calls.Add(1) == 3 {
			d += 300 * time.Millisecond // a wake-up 300ms late, as a loaded machine gives one
		}
		time.Sleep(d)
	}
	start := time.Now()
	w := startStallWatch(func() time.Duration { return time.Since(start) }, sleep)
	for calls.Load() < 5 {
		time.Sleep(5 * time.Millisecond)
	}
	got := w.finish()
	if longest := (runstore.RunInfo{Stalls: got}).LongestStall(); got.Count < 1 || longest < 300*time.Millisecond {
		t.Errorf("stalls %+v: want the 300ms late wake-up", *got)
	}
}

// TestDiskWatchSeesASlowSync: the disk watch syncs its probe file every
// 100 ms and keeps the syncs that took 250 ms or more; here the third
// sync is made to take 400 ms. Its probe file is gone afterwards. A
// real fdatasync is measured the same way (TestDiskWatchSyncsARealFile).
func TestDiskWatchSeesASlowSync(t *testing.T) {
	start := time.Now()
	now := func() time.Duration { return time.Since(start) }
	var n atomic.Int32
	slowDone := make(chan struct{})
	path := filepath.Join(t.TempDir(), ".disk-probe")
	w, err := startDiskWatch(path, now, func(*os.File) error {
		if n.Add(1) == 3 {
			time.Sleep(400 * time.Millisecond)
			close(slowDone)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-slowDone
	for n.Load() < 5 {
		time.Sleep(10 * time.Millisecond)
	}
	d := w.finish()
	if d.Syncs < 4 || d.Count < 1 || len(d.Top) < 1 || d.Every != "100ms" || d.Over != "250ms" {
		t.Fatalf("%+v: want 4 syncs or more, the slow one among them", d)
	}
	if l, _ := time.ParseDuration(d.Longest); l < 400*time.Millisecond {
		t.Errorf("longest %s, want the 400 ms sync", d.Longest)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the probe file is left: %v", err)
	}
	info := runstore.RunInfo{Stalls: &runstore.Stalls{Disk: d}}
	if info.LongestDiskStall() < 400*time.Millisecond {
		t.Errorf("LongestDiskStall %s", info.LongestDiskStall())
	}
}

// TestDiskWatchSyncsARealFile: with the real fdatasync the watch counts
// its syncs; a folder it cannot write to gives an error and no watch.
func TestDiskWatchSyncsARealFile(t *testing.T) {
	start := time.Now()
	w, err := startDiskWatch(filepath.Join(t.TempDir(), ".disk-probe"), func() time.Duration { return time.Since(start) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	for w.syncs.Load() < 3 {
		time.Sleep(20 * time.Millisecond)
	}
	if d := w.finish(); d.Syncs < 3 {
		t.Errorf("%+v: want 3 syncs or more", d)
	}
	if _, err := startDiskWatch(filepath.Join(t.TempDir(), "no", "such", "folder", "p"), func() time.Duration { return 0 }, nil); err == nil {
		t.Error("a probe file in a missing folder gave no error")
	}
	var none *diskWatch
	if none.finish() != nil {
		t.Error("a nil watch gave figures")
	}
}
