package history

import (
	"time"

	"golang.org/x/sys/unix"
)

// Clock reads CLOCK_MONOTONIC relative to a test's start. Every process on
// the host shares CLOCK_MONOTONIC, and no fault moves it, so times taken by
// the driver and by every worker compare directly. The zero Clock measures
// from the kernel's own origin.
type Clock struct {
	origin int64
}

// Monotonic returns CLOCK_MONOTONIC in ns since the kernel's origin.
func Monotonic() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		// CLOCK_MONOTONIC exists on every Linux this runs on; failing to read
		// it is not a condition a caller could handle.
		panic("history: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}

// StartClock returns a clock whose origin is now.
func StartClock() Clock { return Clock{origin: Monotonic()} }

// ClockAt returns a clock whose origin is the given CLOCK_MONOTONIC reading,
// so a worker can share the driver's origin.
func ClockAt(origin int64) Clock { return Clock{origin: origin} }

// Origin returns the CLOCK_MONOTONIC reading the clock counts from.
func (c Clock) Origin() int64 { return c.origin }

// Now returns the time since the origin.
func (c Clock) Now() time.Duration { return time.Duration(Monotonic() - c.origin) }
