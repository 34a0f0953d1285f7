// Command ratecheck sets its clock to run at the rate its first argument
// gives, sleeps for the duration of its second by that clock, then
// prints, as JSON, how long the sleep took by its monotonic clock and by
// the wall clock, and whether its monotonic clock went back at the
// change back to the real rate; then it moves its wall clock an hour
// ahead and prints how far time.Now's wall reading is from the real one
// (read by a system call), and how far its monotonic clock moved.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/locktest/locktest/clusters/clockrate/rate"
)

func main() {
	factor, _ := strconv.ParseFloat(os.Args[1], 64)
	d, _ := time.ParseDuration(os.Args[2])
	if err := rate.Set(factor); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	start, wall := time.Now(), time.Now().UnixNano()
	time.Sleep(d)
	timer := time.NewTimer(d)
	<-timer.C
	mono, real := time.Since(start), time.Duration(time.Now().UnixNano()-wall)
	before := time.Now()
	if err := rate.Set(1); err != nil {
		os.Exit(3)
	}
	back := time.Since(before) < 0
	mark := time.Now()
	if err := rate.SetWall(time.Hour); err != nil {
		os.Exit(3)
	}
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_REALTIME, &ts)
	ahead := time.Now().UnixNano() - ts.Nano()
	json.NewEncoder(os.Stdout).Encode(map[string]any{"mono_ns": mono, "wall_ns": real, "went_back": back,
		"wall_ahead_ns": ahead, "mono_after_jump_ns": time.Since(mark)})
}
