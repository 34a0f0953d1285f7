//go:build locktest_clockrate

package rate

import _ "unsafe" // for go:linkname

// setClockRate is the patched runtime's (clockrate.Overlay).
//
//go:linkname setClockRate runtime.setClockRate
func setClockRate(rate float64)

// setClockWallOffset is the patched runtime's (clockrate.Overlay).
//
//go:linkname setClockWallOffset runtime.setClockWallOffset
func setClockWallOffset(off int64)

func setWall(off int64) error {
	setClockWallOffset(off)
	return nil
}

func set(factor float64) error {
	setClockRate(factor)
	return nil
}
