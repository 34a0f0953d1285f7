// Package workloads holds what the lock clients do: the worker process that
// runs one logical client's loop, the protocol the driver speaks with it
// over its stdin and stdout, the pool that starts and watches the workers,
// and the resource store the locks protect.
package workloads

import (
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/impls/external"
)

// WorkerConfig is everything a worker needs; the driver sends it first.
type WorkerConfig struct {
	Process int    `json:"process"`
	Impl    string `json:"impl"`
	// Client, when set, is the external client program the worker runs
	// instead of a Go impl: Impl then only names it in the history and
	// logs.
	Client *external.Spec `json:"client,omitempty"`
	Addrs  []string       `json:"addrs"`
	// Nodes are the backend's nodes with their roles; see impls.Config.
	Nodes []impls.Node `json:"nodes,omitempty"`
	// Params are the impl's settings; see impls.Config.
	Params map[string]string `json:"params,omitempty"`
	// Locks are the lock names the worker picks from for each critical
	// section; fewer locks mean more contention.
	Locks []string `json:"locks"`
	TTL   Duration `json:"ttl"`
	// Think is the longest pause between critical sections (uniform in
	// [0, Think]); Backoff the pause after a failed acquire.
	Think   Duration `json:"think"`
	Backoff Backoff  `json:"backoff"`
	// Work is the longest time the worker spends between its read and its
	// write, WorkMin the shortest (uniform in [WorkMin, Work]).
	Work      Duration `json:"work"`
	WorkMin   Duration `json:"work_min,omitempty"`
	Timeout   Duration `json:"timeout"` // per-operation deadline
	StoreAddr string   `json:"store_addr"`
	Mode      Mode     `json:"mode"`
	// OnLost is what the holder does when its client tells it that its
	// lease is lost (a notice): OnLostIgnore ("" too) or OnLostStopWriting.
	OnLost string `json:"on_lost,omitempty"`
	// RetryRelease, when positive, makes the worker try again a release
	// that came back of unknown outcome (info), with the same lease, as
	// an application whose clean-up retries a failed unlock: after an
	// acquire returned ok, before the critical section, it tries each
	// such release whose last try is RetryRelease or more ago, until a try
	// completes ok or fail. 0 never tries again.
	RetryRelease Duration `json:"retry_release,omitempty"`
	// RetryAcquire is how many times the worker tries again at once an
	// acquire that came back of unknown outcome (info), as many clients'
	// callers do; 0 never.
	RetryAcquire int `json:"retry_acquire,omitempty"`
	// ClockOrigin is the driver's CLOCK_MONOTONIC origin for history times.
	ClockOrigin int64 `json:"clock_origin"`
	Seed        int64 `json:"seed"`
	// EventRing, when set, is the file descriptor of the worker's event
	// ring (a shared memory the driver reads), through which it sends
	// its op events rather than stdout; see eventRing.
	EventRing int `json:"event_ring,omitempty"`
	// ProfileDir, when set, receives the worker's CPU profile as
	// worker-pN.cpu.pprof, written when the worker ends its loop (a killed
	// worker leaves none).
	ProfileDir string `json:"profile_dir,omitempty"`
}

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("250ms").
type Duration time.Duration

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// Command is a line the driver sends to a worker.
type Command struct {
	Cmd string `json:"cmd"` // start, arm, disarm, continue, wall-offset, clock-rate, stop
	// Config comes with start.
	Config *WorkerConfig `json:"config,omitempty"`
	// Point comes with arm: the pause point at which the worker must stop
	// next and report.
	Point string `json:"point,omitempty"`
	// Offset comes with wall-offset: what to add to the worker's wall
	// clock. A worker built with a clock that runs at a rate
	// (clusters/clockrate) moves its whole process's wall clock, as a
	// change of the system's time would; any other moves the wall clock
	// it gives its impl (impls.Config.Wall).
	Offset Duration `json:"offset,omitempty"`
	// Rate comes with clock-rate: the factor the worker's Go runtime clock
	// runs at from now on (1: the real rate), in a worker built for it.
	Rate float64 `json:"rate,omitempty"`
}

// Event is a line a worker sends to the driver.
type Event struct {
	// Op is an op to record (its Index is ignored).
	Op *history.Op `json:"op,omitempty"`
	// Point says the worker reached an armed pause point and waits for
	// continue.
	Point string `json:"point,omitempty"`
	// Ready says the worker connected to everything and starts its loop.
	Ready bool `json:"ready,omitempty"`
	// Fatal says why the worker cannot run; it exits after sending it.
	Fatal string `json:"fatal,omitempty"`
}

// eventOpPrefix starts the JSON of an Event that carries an op, which the
// pool decodes on a fast path (history.OpParser).
const eventOpPrefix = `{"op":`

// What a holder does when its client tells it that its lease is gone, or
// may be gone (--on-lost). The notice is recorded either way.
const (
	// OnLostIgnore goes on with the critical section as if nothing was
	// said: what a client that does not listen does.
	OnLostIgnore = "ignore"
	// OnLostStopWriting is the careful holder: once told, it writes no
	// more (it cuts its work short and skips its read and write) and
	// releases the lock.
	OnLostStopWriting = "stop-writing"
)

// OnLostModes are the values of --on-lost.
var OnLostModes = []string{OnLostIgnore, OnLostStopWriting}

// The pause points of the worker loop.
const (
	// PointAfterAcquire is right after an acquire returned ok, before the
	// resource is touched: the GC pause of the debate.
	PointAfterAcquire = "after-acquire"
	// PointBeforeWrite is after the read, right before the write.
	PointBeforeWrite = "before-write"
)
