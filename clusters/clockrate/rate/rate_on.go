//go:build locktest_clockrate

package rate

import _ "unsafe" // for go:linkname

// setClockRate is the patched runtime's (clockrate.Overlay).
//
//go:linkname setClockRate runtime.setClockRate
func setClockRate(rate float64)

func set(factor float64) error {
	setClockRate(factor)
	return nil
}
